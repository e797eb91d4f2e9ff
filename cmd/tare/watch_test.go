package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestWatchStored: a tare watch window is stored like a run, with its
// label, protocol window and ticks, and its run id printed; tare runs show,
// tare compare and tare report take it afterwards (issue 20, item 7).
func TestWatchStored(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "watch.db"))
	watch := func(label, window string) (id string, s tare.Summary) {
		t.Helper()
		code, stdout, stderr := tareCmd(t, "watch", "--tick", "100ms", "--label", label, "--window", window, "--",
			"sh", "-c", "sleep 0.5; echo the watched tool ran")
		if code != 0 {
			t.Fatalf("watch: exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "the watched tool ran") {
			t.Errorf("the command's output did not pass through:\n%s", stdout)
		}
		m := runIDPattern.FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("the watch summary names no run id:\n%s", stdout)
		}
		code, stdout, stderr = tareCmd(t, "runs", "show", m[1], "--json")
		if code != 0 {
			t.Fatalf("runs show %s: exit %d: %s", m[1], code, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("runs show --json: %v\n%s", err, stdout)
		}
		return m[1], s
	}
	peak, s := watch("checkout", "peak")
	if s.Run.ID != peak || s.Run.Label != "checkout" || s.Run.Window != "peak" || s.Run.Status != tare.StatusComplete ||
		!strings.Contains(s.Run.Target, "sleep 0.5") || s.Host.Ticks == 0 || s.Verdict.Level == "" {
		t.Errorf("stored window: run %+v, %d host ticks, verdict %q", s.Run, s.Host.Ticks, s.Verdict.Level)
	}
	if code, stdout, _ := tareCmd(t, "runs", "list", "--label", "checkout"); code != 0 || !strings.Contains(stdout, peak) {
		t.Errorf("runs list --label checkout: exit %d, want the window:\n%s", code, stdout)
	}
	// The ticks were stored: the text shows the per-tick steal of the window.
	if code, stdout, stderr := tareCmd(t, "runs", "show", peak); code != 0 || !strings.Contains(stdout, "steal/tick") {
		t.Errorf("runs show: exit %d, want the stored ticks' steal/tick line: %s\n%s", code, stderr, stdout)
	}

	offpeak, _ := watch("checkout", "offpeak")
	if code, stdout, stderr := tareCmd(t, "compare", peak, offpeak); code != 0 || !strings.Contains(stdout, "peak") || !strings.Contains(stdout, "offpeak") {
		t.Errorf("compare two watch windows: exit %d: %s\n%s", code, stderr, stdout)
	}
	html := filepath.Join(t.TempDir(), "watch.html")
	if code, _, stderr := tareCmd(t, "report", peak, "-o", html); code != 0 {
		t.Errorf("report of a watch window: exit %d: %s", code, stderr)
	} else if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), peak) {
		t.Errorf("report of a watch window: %v, or the report does not name the run", err)
	}

	// --no-store keeps nothing and prints no id.
	code, stdout, stderr := tareCmd(t, "watch", "--no-store", "--tick", "100ms", "--", "true")
	if code != 0 || runIDPattern.MatchString(stdout) {
		t.Errorf("watch --no-store: exit %d, %s; want no run id:\n%s", code, stderr, stdout)
	}
	if _, stdout, _ := tareCmd(t, "runs", "list", "--json"); strings.Count(stdout, `"id"`) != 2 {
		t.Errorf("runs list: want the two stored windows only:\n%s", stdout)
	}
	// A bad --window or store is refused before the command runs.
	marker := filepath.Join(t.TempDir(), "ran")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, args := range [][]string{
		{"--window", "noon"},
		{"--db", filepath.Join(file, "tare.db")}, // under a file: cannot be created
	} {
		code, _, stderr := tareCmd(t, append(append([]string{"watch"}, args...), "--", "touch", marker)...)
		if code != 2 {
			t.Errorf("watch %v: exit %d, want 2: %s", args, code, stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("watch %v ran the command before refusing", args)
		}
	}
}
