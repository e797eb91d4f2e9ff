package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// TestSkipUnableHelper is not a test: TestSkipUnable runs it in a process
// of its own, where it calls SkipUnable on the error TARE_TEST_UNABLE
// names.
func TestSkipUnableHelper(t *testing.T) {
	err := map[string]error{
		"missing":     fmt.Errorf("%w: frobnicator is not installed", ErrMissing),
		"not allowed": fmt.Errorf("%w: frobnicating needs root", ErrSkip),
		"fault":       errors.New("the frobnicator broke"),
	}[os.Getenv("TARE_TEST_UNABLE")]
	if err == nil {
		t.Skip("run by TestSkipUnable")
	}
	SkipUnable(t, err)
	t.Log("went on")
}

// TestSkipUnable: what the machine lacks or does not allow skips the
// scenario, saying why, except under CI, where it fails; any other error
// is left to the caller.
func TestSkipUnable(t *testing.T) {
	for _, tt := range []struct {
		err, ci string
		want    string
	}{
		{"missing", "", "--- SKIP"},
		{"missing", "true", "--- FAIL"},
		{"not allowed", "", "--- SKIP"},
		{"not allowed", "true", "--- FAIL"},
		{"fault", "", "went on"},
		{"fault", "true", "went on"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipUnableHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_UNABLE="+tt.err, "CI="+tt.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("%s, CI=%q: want %q:\n%s", tt.err, tt.ci, tt.want, out)
		}
	}
}

// TestMissingPrograms: without taskset or python3, the scenarios that pin
// tare or stall a service are missing what scripts/test installs, which
// fails them under CI, not merely what the machine does not allow.
func TestMissingPrograms(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := context.Background()
	_, pinErr := Env{}.pinned(ctx, "0", []string{"run"})
	_, _, stallErr := startStalling(ctx, time.Second, 0, time.Second)
	for name, err := range map[string]error{"taskset": pinErr, "python3": stallErr} {
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v, want an error wrapping ErrMissing naming it", name, err)
		}
	}
}

// TestQuota: a cgroup the machine does not allow is an ErrSkip; a quota
// the kernel refuses as root (0 µs, below its 1 ms minimum) is the
// scenario's failure, not a skip.
func TestQuota(t *testing.T) {
	if _, err := quota(t.TempDir(), os.Getpid(), 20); !errors.Is(err, ErrSkip) || !errors.Is(err, interfere.ErrNotAllowed) {
		t.Errorf("quota under a root with no cpu controller: %v, want an ErrSkip", err)
	}
	_, remove, err := interfere.MakeQuota("/sys/fs/cgroup", 20000, 100000)
	if err != nil {
		testservice.Unable(t, "the live case: %v", err)
	}
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	undo, err := quota("", os.Getpid(), 0)
	if err == nil {
		undo()
		t.Fatal("quota of 0% was taken")
	}
	if errors.Is(err, ErrSkip) {
		t.Errorf("a quota the kernel refuses, as root: %v, want an error that is not ErrSkip", err)
	}
}
