package testservice

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingHelper is not a test: TestMissing runs it in a process of its
// own, where it calls Unavailable, explicit or not (which is Missing), or
// Unable.
func TestMissingHelper(t *testing.T) {
	if os.Getenv("TARE_TEST_MISSING") == "" {
		t.Skip("run by TestMissing")
	}
	if os.Getenv("TARE_TEST_UNABLE") == "1" {
		Unable(t, "no %s here", "frobnicator")
	} else {
		Unavailable(t, os.Getenv("TARE_TEST_EXPLICIT") == "1", "no %s here", "frobnicator")
	}
	t.Log("went on after Missing")
}

// TestMissing: a missing dependency, or what the machine does not allow
// (Unable), skips the test, except under CI (CI=true, 1), where it fails
// it, and so does a service the environment named; either way with the
// message, and the test goes no further.
func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci       string
		explicit string
		unable   string
		fail     bool
		want     string
	}{
		{"", "", "", false, "--- SKIP: TestMissingHelper"},
		{"false", "", "", false, "--- SKIP: TestMissingHelper"},
		{"true", "", "", true, "--- FAIL: TestMissingHelper"},
		{"1", "", "", true, "--- FAIL: TestMissingHelper"},
		{"", "1", "", true, "--- FAIL: TestMissingHelper"},
		{"", "", "1", false, "--- SKIP: TestMissingHelper"},
		{"true", "", "1", true, "--- FAIL: TestMissingHelper"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_MISSING=1", "CI="+tt.ci, "TARE_TEST_EXPLICIT="+tt.explicit, "TARE_TEST_UNABLE="+tt.unable)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tt.fail || !strings.Contains(string(out), tt.want) ||
			!strings.Contains(string(out), "no frobnicator here") || strings.Contains(string(out), "went on") {
			t.Errorf("CI=%q explicit=%q unable=%q: %v, want failed=%v, %q and the message, and no further:\n%s", tt.ci, tt.explicit, tt.unable, err, tt.fail, tt.want, out)
		}
	}
}
