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
	"github.com/tare-dev/tare/internal/testservice"
)

// runWhile runs `tare run` in-process against a loopback server for about
// 3 s and calls fault once the run is stored and load is flowing; it
// returns the exit status, the summary printed and stderr.
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
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		err := run(ctx, []string{"run", "--url", srv.URL + "/", "--rate", "200/s", "--duration", "3s", "--quiet", "--json", "--db", db, "--tick", "200ms"},
			strings.NewReader(""), &out, &errb)
		done <- outcome{exitCode(err, &errb), out.String(), errb.String()}
	}()
	time.Sleep(time.Second)
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
	if os.Geteuid() != 0 {
		t.Skip("mounts a small tmpfs: root only")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): a container without CAP_SYS_ADMIN", dir, err)
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
		t.Skipf("cannot create a database of the test's own: %v", err)
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
