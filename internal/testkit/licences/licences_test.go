package licences

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// script is scripts/licences, from this package's directory.
var script = filepath.Join("..", "..", "..", "scripts", "licences")

// run runs scripts/licences with args and returns its output and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", append([]string{script}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("scripts/licences %s: %v\n%s", strings.Join(args, " "), err, out.String())
		return "", -1
	}
}

// module copies the Go module testdata/name into a temporary directory, so
// that the script may write its THIRD_PARTY_NOTICES there.
func module(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", name)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckPassesOnProject(t *testing.T) {
	out, code := run(t, "-C", filepath.Join("..", "..", ".."), "check")
	if code != 0 {
		t.Fatalf("scripts/licences check on tare exited %d, want 0:\n%s", code, out)
	}
	if !strings.Contains(out, "THIRD_PARTY_NOTICES is up to date") {
		t.Errorf("scripts/licences check on tare does not say the notices are up to date:\n%s", out)
	}
}

// TestCheckFailsOnCopyleft runs the check on a module that requires a
// GPL-3.0 module from the proxy (downloaded on first use, hence not -short).
// Its notices are generated first, so the licence is the only reason left
// to fail.
func TestCheckFailsOnCopyleft(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads github.com/foxcpp/maddy from the Go module proxy")
	}
	dir := module(t, "copyleft")
	if out, code := run(t, "-C", dir); code != 0 {
		t.Fatalf("scripts/licences (generate) exited %d, want 0:\n%s", code, out)
	}
	out, code := run(t, "-C", dir, "check")
	if code != 1 {
		t.Fatalf("scripts/licences check exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"FAIL github.com/foxcpp/maddy v0.8.1",
		"GPL-3.0, a copyleft",
		"go mod why -m github.com/foxcpp/maddy",
		"1 licence(s) outside the allow-list",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scripts/licences check: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "stale") || strings.Contains(out, "missing") {
		t.Errorf("scripts/licences check blames the notices, which were just made:\n%s", out)
	}
}

// TestCheckFailsOnStaleNotices: a module without dependencies passes once
// its notices are made, and fails when they no longer match.
func TestCheckFailsOnStaleNotices(t *testing.T) {
	dir := module(t, "nodeps")
	if out, code := run(t, "-C", dir, "check"); code != 1 || !strings.Contains(out, "THIRD_PARTY_NOTICES is missing: run scripts/licences") {
		t.Errorf("check without notices: exit %d, want 1 and the missing file named:\n%s", code, out)
	}
	if out, code := run(t, "-C", dir); code != 0 {
		t.Fatalf("scripts/licences (generate) exited %d, want 0:\n%s", code, out)
	}
	if out, code := run(t, "-C", dir, "check"); code != 0 {
		t.Fatalf("check after generating: exit %d, want 0:\n%s", code, out)
	}
	notices := filepath.Join(dir, "THIRD_PARTY_NOTICES")
	f, err := os.OpenFile(notices, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("example.com/gone v1.0.0: MIT\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "-C", dir, "check")
	if code != 1 {
		t.Fatalf("check with a stale file: exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"THIRD_PARTY_NOTICES is stale", "run scripts/licences and commit it", "-example.com/gone v1.0.0: MIT"} {
		if !strings.Contains(out, want) {
			t.Errorf("check with a stale file: no %q in\n%s", want, out)
		}
	}
}
