package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestMain keeps every test's runs in a store of its own, and lets a test
// run this binary as tare itself (TARE_TEST_MAIN=1) to kill it for real.
func TestMain(m *testing.M) {
	if os.Getenv("TARE_TEST_MAIN") == "1" {
		main()
		return
	}
	dir, err := os.MkdirTemp("", "tare-cmd-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("TARE_DB", filepath.Join(dir, "tare.db"))
	// The demo's model runs as this binary, as tare.
	selfCommand = func(ctx context.Context, args ...string) (*exec.Cmd, error) {
		c := exec.CommandContext(ctx, os.Args[0], args...)
		c.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		return c, nil
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var runIDPattern = regexp.MustCompile(`run ([0-9a-f-]{36})`)

func TestRunsLifecycle(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "runs.db"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "100/s", "--jobs", "50", "--quiet", "--label", "lifecycle", "--tick", "100ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	m := runIDPattern.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("the summary names no run id:\n%s", stdout)
	}
	id := m[1]

	code, stdout, _ = tareCmd(t, "runs", "list")
	if code != 0 || !strings.Contains(stdout, id) || !strings.Contains(stdout, "lifecycle") {
		t.Fatalf("runs list: exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = tareCmd(t, "runs", "show", id[:13], "--json")
	var s tare.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || s.Run.ID != id || s.Requests.Total != 50 || s.Run.Status != tare.StatusComplete {
		t.Fatalf("runs show: exit %d: %+v", code, s.Run)
	}

	export := filepath.Join(t.TempDir(), "run.jsonl")
	if code, _, stderr := tareCmd(t, "runs", "export", id, "-o", export); code != 0 {
		t.Fatalf("runs export: exit %d: %s", code, stderr)
	}
	lines := countLines(t, export)
	if lines != 50 {
		t.Errorf("export has %d records, want 50", lines)
	}
	// A plain HTTP record's first answer is its first byte, not a token.
	if b, err := os.ReadFile(export); err != nil || !strings.Contains(string(b), `"ttfb_ms":`) || strings.Contains(string(b), `"ttft_ms"`) {
		t.Errorf("export of an HTTP run: want ttfb_ms and no ttft_ms (err %v):\n%.400s", err, b)
	}
	for _, format := range []string{"csv", "hdr"} {
		if code, stdout, stderr := tareCmd(t, "runs", "export", id, "--format", format); code != 0 || len(stdout) == 0 {
			t.Errorf("runs export --format %s: exit %d: %s", format, code, stderr)
		}
	}

	code, stdout, stderr = tareCmd(t, "runs", "import", export, "--label", "again")
	if code != 0 {
		t.Fatalf("runs import: exit %d: %s", code, stderr)
	}
	imported := runIDPattern.FindStringSubmatch(stdout)[1]
	code, stdout, _ = tareCmd(t, "runs", "show", imported, "--json")
	var again tare.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &again) != nil {
		t.Fatalf("show imported: exit %d", code)
	}
	// Stored times are wall-clock; the live run measured on the monotonic
	// clock, so the two agree to within the clocks' drift.
	if again.Requests != s.Requests || *again.Latency.P99 < 0.99**s.Latency.P99 || *again.Latency.P99 > 1.01**s.Latency.P99 {
		t.Errorf("imported run: requests %+v p99 %v; the original had %+v p99 %v", again.Requests, *again.Latency.P99, s.Requests, *s.Latency.P99)
	}

	summaryFile := filepath.Join(t.TempDir(), "summary.json")
	os.WriteFile(summaryFile, []byte(mustJSON(t, s)), 0o644)
	if code, _, stderr := tareCmd(t, "runs", "import", summaryFile); code != 0 {
		t.Errorf("import a summary: exit %d: %s", code, stderr)
	}

	if code, _, _ := tareCmd(t, "runs", "delete", imported); code != 1 {
		t.Errorf("delete without --yes and no answer: exit %d, want 1 (not deleted)", code)
	}
	if code, _, stderr := tareCmd(t, "runs", "delete", "--yes", imported); code != 0 {
		t.Errorf("delete --yes: exit %d: %s", code, stderr)
	}
	if code, _, stderr := tareCmd(t, "runs", "show", imported); code != 2 || !strings.Contains(stderr, "no stored run") {
		t.Errorf("show a deleted run: exit %d: %s", code, stderr)
	}
}

func TestRunsBadInput(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "bad.db"))
	notJSON := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(notJSON, []byte("hello\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"runs", "show", "nosuchrun"}, `no stored run "nosuchrun"`},
		{[]string{"runs", "export", "nosuchrun"}, `no stored run "nosuchrun"`},
		{[]string{"runs", "import", "/nonexistent/file.json"}, "/nonexistent/file.json"},
		{[]string{"runs", "import", notJSON}, "neither a tare.summary/v1 JSON (tare run --json) nor raw JSONL records"},
		{[]string{"runs", "list", "--limit", "-1"}, "--limit must be 0 (all) or more"},
		{[]string{"runs", "show"}, "accepts 1 arg(s)"},
	}
	for _, tt := range tests {
		code, _, stderr := tareCmd(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// TestUnwritableStoreSendsNothing: a store that cannot be written is an
// error before any load is sent.
func TestUnwritableStoreSendsNothing(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	code, _, stderr := tareCmd(t, "run", "--url", srv.URL, "--jobs", "10", "--quiet", "--db", filepath.Join(file, "tare.db"))
	if code != 2 || hits != 0 {
		t.Errorf("exit %d, %d requests sent; want 2 and none. stderr: %s", code, hits, stderr)
	}
	if !strings.Contains(stderr, file) {
		t.Errorf("stderr %q does not name the path", stderr)
	}
}

// TestKilledRunIsReadable: tare killed with SIGKILL mid-run leaves a stored
// run that reads back as interrupted, with the records written so far.
func TestKilledRunIsReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tare for ~3 s before killing it; skipped with -short")
	}
	db := filepath.Join(t.TempDir(), "killed.db")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "run", "--url", srv.URL+"/", "--rate", "200/s", "--duration", "1m", "--db", db, "--tick", "200ms")
	cmd.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Progress lines come every few seconds when stderr is not a terminal:
	// the first one means load is flowing and batches are being written.
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("no progress from tare: %v", err)
	}
	t.Logf("progress before the kill: %s", strings.TrimSpace(line))
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	code, stdout, errOut := tareCmd(t, "runs", "list", "--db", db, "--json")
	var runs []tare.Run
	if code != 0 || json.Unmarshal([]byte(stdout), &runs) != nil || len(runs) != 1 {
		t.Fatalf("runs list: exit %d %s %s", code, stdout, errOut)
	}
	if runs[0].Status != tare.StatusInterrupted {
		t.Errorf("status %q, want interrupted", runs[0].Status)
	}
	export := filepath.Join(t.TempDir(), "killed.jsonl")
	if code, _, errOut := tareCmd(t, "runs", "export", runs[0].ID, "--db", db, "-o", export); code != 0 {
		t.Fatalf("export: exit %d %s", code, errOut)
	}
	if n := countLines(t, export); n < 200 {
		t.Errorf("%d records survived ~5 s at 200/s; want the batches written before the kill", n)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(string(b))
}

// TestStoreFailsMidRun: the run's row vanishes under the writer mid-run;
// the measurement goes on, the summary is printed, the error is reported,
// and the exit status is 2.
func TestStoreFailsMidRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "failing.db")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	go func() {
		// Once the run exists, delete it from another connection.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(300 * time.Millisecond)
			code, stdout, _ := tareCmd(t, "runs", "list", "--db", db, "--json")
			var runs []tare.Run
			if code == 0 && json.Unmarshal([]byte(stdout), &runs) == nil && len(runs) == 1 {
				tareCmd(t, "runs", "delete", "--yes", "--db", db, runs[0].ID)
				return
			}
		}
	}()
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "100/s", "--duration", "3s", "--quiet", "--json", "--db", db, "--tick", "200ms")
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("no summary printed: %v\n%s", err, stdout)
	}
	if code != 2 || !strings.Contains(stderr, "store") {
		t.Errorf("exit %d, stderr %q: want 2 and the store's error", code, stderr)
	}
	if s.Requests.Total < 250 || s.Requests.OK != s.Requests.Total {
		t.Errorf("requests %+v: the measurement did not go on", s.Requests)
	}
}

// TestPostgresStore: the same run stored in PostgreSQL, the team store.
func TestPostgresStore(t *testing.T) {
	dsn := postgresDSN()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	label := fmt.Sprintf("pg-%d", time.Now().UnixNano())
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--jobs", "20", "--rate", "100/s", "--quiet", "--db", dsn, "--label", label, "--tick", "100ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	id := runIDPattern.FindStringSubmatch(stdout)[1]
	t.Cleanup(func() { tareCmd(t, "runs", "delete", "--yes", "--db", dsn, id) })
	code, stdout, _ = tareCmd(t, "runs", "list", "--db", dsn, "--label", label)
	if code != 0 || !strings.Contains(stdout, id) {
		t.Errorf("runs list in postgres: exit %d\n%s", code, stdout)
	}
	if strings.Contains(stdout+stderr, "postgres:postgres@") {
		t.Errorf("the DSN's password was printed")
	}
}
