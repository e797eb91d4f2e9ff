package testservice

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingHelper is not a test: TestMissing runs it in a process of its
// own, where it calls Unavailable, explicit or not (which is Missing).
func TestMissingHelper(t *testing.T) {
	if os.Getenv("TARE_TEST_MISSING") == "" {
		t.Skip("run by TestMissing")
	}
	Unavailable(t, os.Getenv("TARE_TEST_EXPLICIT") == "1", "no %s here", "frobnicator")
	t.Log("went on after Missing")
}

// TestMissing: a missing dependency skips the test, except under CI
// (CI=true, 1), where it fails it, and so does a service the environment
// named; either way with the message, and the test goes no further.
func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci       string
		explicit string
		fail     bool
		want     string
	}{
		{"", "", false, "--- SKIP: TestMissingHelper"},
		{"false", "", false, "--- SKIP: TestMissingHelper"},
		{"true", "", true, "--- FAIL: TestMissingHelper"},
		{"1", "", true, "--- FAIL: TestMissingHelper"},
		{"", "1", true, "--- FAIL: TestMissingHelper"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_MISSING=1", "CI="+tt.ci, "TARE_TEST_EXPLICIT="+tt.explicit)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tt.fail || !strings.Contains(string(out), tt.want) ||
			!strings.Contains(string(out), "no frobnicator here") || strings.Contains(string(out), "went on") {
			t.Errorf("CI=%q explicit=%q: %v, want failed=%v, %q and the message, and no further:\n%s", tt.ci, tt.explicit, err, tt.fail, tt.want, out)
		}
	}
}
