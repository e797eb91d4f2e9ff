package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestSignalsPrintThePartialSummary: SIGINT and SIGTERM stop the arrivals,
// drain, print the summary marked interrupted, and exit 0.
func TestSignalsPrintThePartialSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tare twice for ~1 s; skipped with -short")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "run", "--url", srv.URL+"/", "--rate", "100/s", "--duration", "1m", "--json",
				"--db", filepath.Join(t.TempDir(), "sig.db"), "--tick", "200ms")
			cmd.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := bufio.NewReader(stderr).ReadString('\n'); err != nil { // the first progress line
				t.Fatalf("no progress: %v", err)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if err != nil {
				t.Fatalf("tare exited with %v after %s; want status 0", err, sig)
			}
			var s tare.Summary
			if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
				t.Fatalf("no summary after %s: %v\n%s", sig, err, stdout.String())
			}
			if s.Run.Status != tare.StatusInterrupted || s.Requests.Total < 100 {
				t.Errorf("status %q requests %+v; want interrupted with the requests sent", s.Run.Status, s.Requests)
			}
		})
	}
}

// TestSecretsNeverStored: an Authorization header and an API key never
// reach the stored run, its export, the printed summary or the logs.
func TestSecretsNeverStored(t *testing.T) {
	const header, key = "hdr-secret-0f3a9c", "sk-secret-77b1e2"
	db := filepath.Join(t.TempDir(), "secrets.db")
	t.Setenv("TARE_API_KEY", key)
	model := testservice.Model(t, modelsim.Config{TokenCost: 100 * time.Microsecond, MeanTokens: 4})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer web.Close()

	var seen strings.Builder
	for _, args := range [][]string{
		{"run", "--url", web.URL + "/?api_key=" + key, "-H", "Authorization: Bearer " + header, "-H", "X-Api-Key: " + header},
		{"run", "--model", model.URL + "/v1", "-H", "Authorization: Bearer " + header, "--max-tokens", "4"},
	} {
		args = append(args, "--jobs", "10", "--rate", "50/s", "--db", db, "--tick", "100ms")
		for _, asJSON := range []bool{false, true} {
			a := args
			if asJSON {
				a = append(a, "--json")
			}
			code, stdout, stderr := tareCmd(t, a...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", a, code, stderr)
			}
			seen.WriteString(stdout + stderr)
		}
	}
	code, stdout, _ := tareCmd(t, "runs", "list", "--db", db, "--json")
	var runs []tare.Run
	if code != 0 || json.Unmarshal([]byte(stdout), &runs) != nil || len(runs) != 4 {
		t.Fatalf("runs list: exit %d: %s", code, stdout)
	}
	seen.WriteString(stdout)
	// Each command must have printed the run (its id, or its 10 records,
	// the CSV with its header line): an empty or failed output holds no
	// secret and proves nothing.
	for _, r := range runs {
		for _, c := range []struct {
			args  []string
			lines int // 0: the output names the run instead
		}{
			{[]string{"runs", "show", r.ID}, 0},
			{[]string{"runs", "show", "--json", r.ID}, 0},
			{[]string{"runs", "export", r.ID}, 10},
			{[]string{"runs", "export", "--format", "csv", r.ID}, 11},
		} {
			code, out, errOut := tareCmd(t, append(c.args, "--db", db)...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
			}
			if n := strings.Count(out, "\n"); c.lines > 0 && n != c.lines || c.lines == 0 && !strings.Contains(out, r.ID) {
				t.Fatalf("%v printed %d lines, want %d, or does not name the run:\n%s", c.args, n, c.lines, out)
			}
			seen.WriteString(out + errOut)
		}
	}
	for _, file := range []string{db, db + "-wal"} {
		if b, err := os.ReadFile(file); err == nil {
			seen.Write(b)
		}
	}
	for _, secret := range []string{header, key} {
		if strings.Contains(seen.String(), secret) {
			t.Errorf("the secret %q reached the output, the export or the store", secret)
		}
	}
}
