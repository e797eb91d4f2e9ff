package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/store"
)

// runWhile runs `tare run` in-process against a loopback server for about
// 3 s and calls fault once the run is stored and its first records are
// (load is flowing); it returns the exit status, the summary printed and
// stderr.
func runWhile(t *testing.T, db string, fault func()) (int, tare.Summary, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type outcome struct {
		code   int
		stdout string
		stderr string
	}
	// The test's own connection to the store, to see the run's first
	// records arrive; opened first, so the schema is there before tare's.
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	defer st.Close()
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		err := run(ctx, []string{"run", "--url", srv.URL + "/", "--rate", "200/s", "--duration", "3s", "--quiet", "--json", "--db", db, "--tick", "200ms"},
			strings.NewReader(""), &out, &errb)
		done <- outcome{exitCode(err, &errb), out.String(), errb.String()}
	}()
	waitStored(t, st, done)
	st.Close() // before the fault: a dropped database takes its connections
	fault()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("the run did not end within 45 s of the store's failure")
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(o.stdout), &s); err != nil {
		t.Fatalf("no summary printed after the store failed: %v\nstdout %s\nstderr %s", err, o.stdout, o.stderr)
	}
	return o.code, s, o.stderr
}

// waitStored waits until a run in st has records stored: the run is
// stored and load is flowing. A run that ended first (done) fails the test.
func waitStored[T any](t *testing.T, st tare.Store, done <-chan T) {
	t.Helper()
	ctx := t.Context()
	errFound := errors.New("found")
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := st.FindRuns(ctx, tare.RunFilter{})
		if err != nil {
			t.Fatalf("find the run in the store: %v", err)
		}
		if len(runs) > 0 {
			err := st.StreamResults(ctx, runs[0].ID, func(*tare.Result) error { return errFound })
			if errors.Is(err, errFound) {
				return
			}
		}
		select {
		case <-done:
			t.Fatal("the run ended before any of its records was stored")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no record of the run stored within 30 s")
		}
	}
}

// checkStoreFault: exit 2, the store's failure named after the summary, and
// the measurement whole.
func checkStoreFault(t *testing.T, code int, s tare.Summary, stderr, cause string) {
	t.Helper()
	t.Logf("exit %d; requests %+v; stderr %s", code, s.Requests, stderr)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr, "the store failed to") || !strings.Contains(stderr, "the measurement above is complete") || !strings.Contains(stderr, cause) {
		t.Errorf("stderr %q: want the store's failure, its cause %q, and that the measurement is complete", stderr, cause)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Errorf("stderr has a stack trace: %s", stderr)
	}
	if s.Requests.Total < 500 || s.Requests.OK != s.Requests.Total || s.Run.Status != tare.StatusComplete {
		t.Errorf("requests %+v status %q: the measurement did not go on to the end", s.Requests, s.Run.Status)
	}
}

// TestDiskFullMidRun: the SQLite store sits on a 4 MiB tmpfs that fills up
// a second into the run. The load goes on, the summary is printed with the
// store's failure among its warnings, and tare exits 2.
func TestDiskFullMidRun(t *testing.T) {
	testservice.Root(t, "mounting a small tmpfs")
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		testservice.Unable(t, "cannot mount a tmpfs on %s (%v): a container without CAP_SYS_ADMIN", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	code, s, stderr := runWhile(t, filepath.Join(dir, "tare.db"), func() {
		// Fill what is left of the file system.
		f, err := os.Create(filepath.Join(dir, "filler"))
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		chunk := make([]byte, 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("fill the tmpfs: %v, want ENOSPC", err)
				}
				return
			}
		}
	})
	checkStoreFault(t, code, s, stderr, "full")
	found := false
	for _, w := range s.Verdict.Warnings {
		found = found || strings.Contains(w, "the store failed to")
	}
	if !found {
		t.Errorf("warnings %q: want the store's failure among them", s.Verdict.Warnings)
	}
}

// TestPostgresGoneMidRun: the run's PostgreSQL database is dropped a second
// into the run, its connections terminated (DROP DATABASE … WITH (FORCE)).
// The load goes on, the summary is printed, and tare exits 2 naming the
// store's failure.
func TestPostgresGoneMidRun(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, postgresDSN())
	if err != nil {
		t.Fatalf("postgres at %s: %v (scripts/test starts one)", postgresDSN(), err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("tare_gone_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		testservice.Unavailable(t, testservice.PostgresExplicit(), "cannot create a database of the test's own: %v", err)
	}
	drop := func() error {
		_, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}
	t.Cleanup(func() { drop() })
	u, err := url.Parse(postgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	code, s, stderr := runWhile(t, u.String(), func() {
		if err := drop(); err != nil {
			t.Errorf("drop the run's database: %v", err)
		}
	})
	checkStoreFault(t, code, s, stderr, "terminating connection")
	if strings.Contains(stderr, "postgres:postgres@") {
		t.Errorf("the DSN's password was printed: %s", stderr)
	}
}

var postgresDSN = testservice.PostgresDSN
