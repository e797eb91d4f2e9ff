package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/interfere"
	"github.com/tare-dev/tare/internal/testservice"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/schedprobe"
)

// probeHere skips a test of measured blame where the scheduler probe is
// not expected to run: not root, or a kernel without BTF (under CI, which
// has both, it fails: testservice.Unable).
func probeHere(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real interference for seconds: skipped with -short")
	}
	if err := schedprobe.Expected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
}

// TestWatchMeasuredBlame: a service pinned to CPU 0 (a busy loop, --pid),
// watched with the scheduler probe by a tare pinned to CPU 0 too (the
// blame is of both: tare's own threads wait behind whoever holds their
// CPU). With a hog pinned to CPU 0 their wait is measured behind the hog,
// named with its pid and a large share, the run is polluted and the advice
// names CPU 0. With the hog pinned to CPU 1, not a moment of their wait is
// behind the hog, and the verdict does not blame it (whatever else of a
// busy machine it may find on CPU 0: other processes share CPU 0 with
// them, and the test names none of those).
func TestWatchMeasuredBlame(t *testing.T) {
	probeHere(t)
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	for _, cpu := range []int{0, 1} {
		t.Run("hog on CPU "+strconv.Itoa(cpu), func(t *testing.T) {
			hog := interfere.Busy(t, interfere.Pinned(cpu)...)
			s := pinnedWatch(t, 0, "--pid", strconv.Itoa(svc.Process.Pid), "--", "sleep", "3")
			b := s.Blame
			if b == nil || b.Source != tare.BlameMeasured {
				t.Fatalf("blame %+v, want it measured", b)
			}
			hogAt := slices.IndexFunc(b.Behind, func(w tare.Behind) bool {
				return w.Owner == tare.OwnerOther && slices.Contains(w.PIDs, hog.Process.Pid)
			})
			n := signalOf(t, s, judge.SignalNeighbours)
			t.Logf("waited %.1f%% of a CPU, behind %+v; schedstat %+v; %s: %s", b.WaitPct, b.Behind, b.Schedstat, s.Verdict.Level, n.Detail)
			if b.Schedstat == nil || b.Schedstat.Ticks == 0 {
				t.Errorf("no truth check: %+v", b.Schedstat)
			}
			if cpu == 1 {
				if hogAt >= 0 {
					t.Errorf("waited %.1f%% behind the hog on another CPU, want none", b.Behind[hogAt].WaitPct)
				}
				if strings.Contains(n.Detail, "pid "+strconv.Itoa(hog.Process.Pid)) {
					t.Errorf("the neighbours signal blames the hog on another CPU: %s", n.Detail)
				}
				return
			}
			// On a quiet machine the hog has about half of CPU 0; other
			// processes of a busy one take their part.
			if hogAt < 0 || b.Behind[hogAt].Name != "sh" || b.Behind[hogAt].WaitPct < 10 {
				t.Errorf("the hog (sh, pid %d) was not waited behind 10%% of a CPU or more: %+v", hog.Process.Pid, b.Behind)
			}
			if !n.Fired || s.Verdict.Level != tare.Polluted || !strings.Contains(n.Detail, "`sh` (pid "+strconv.Itoa(hog.Process.Pid)+")") {
				t.Errorf("neighbours %+v, level %s; want it fired naming the hog, polluted", n, s.Verdict.Level)
			}
			if advice := strings.Join(s.Verdict.Advice, "\n"); !strings.Contains(advice, "CPU 0") {
				t.Errorf("the advice does not name CPU 0:\n%s", advice)
			}
		})
	}
}

// pinnedWatch runs tare watch with args as a process pinned to cpu, and
// returns its summary.
func pinnedWatch(t *testing.T, cpu int, args ...string) tare.Summary {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "taskset", append([]string{"-c", strconv.Itoa(cpu), os.Args[0], "watch", "--json", "--tick", "500ms"}, args...)...)
	cmd.Env = append(os.Environ(), "TARE_TEST_MAIN=1") // this binary as tare (TestMain)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tare watch: %v; stderr %s", err, stderr.String())
	}
	var s tare.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, out)
	}
	return s
}

// TestCheckBusiestBlame: tare check, with the scheduler probe, says for
// the busiest processes whom each waited behind: a hog (`sh`) and a hog
// busy half the time (`perl`) sharing CPU 0 each waited behind the other.
func TestCheckBusiestBlame(t *testing.T) {
	probeHere(t)
	interfere.Exclusive(t)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	duty := interfere.Duty(t, 50*time.Millisecond, 50*time.Millisecond, interfere.Pinned(0)...)
	code, stdout, stderr := tareCmd(t, "check", "--for", "3s", "--tick", "500ms", "--json")
	if code != 0 && code != 3 {
		t.Fatalf("tare check: exit %d; %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if s.Blame == nil || s.Blame.Source != tare.BlameMeasured {
		t.Fatalf("blame %+v, want it measured", s.Blame)
	}
	behind := func(name string, pid int) (float64, []tare.Behind) {
		for _, w := range s.Blame.Waiters {
			if w.Name == name && slices.Contains(w.PIDs, pid) {
				for _, b := range w.Behind {
					if b.Owner == tare.OwnerOther && b.Name == map[string]string{"sh": "perl", "perl": "sh"}[name] {
						return b.WaitPct, w.Behind
					}
				}
				return 0, w.Behind
			}
		}
		return -1, nil
	}
	for _, w := range []struct {
		name string
		pid  int
	}{{"sh", hog.Process.Pid}, {"perl", duty.Process.Pid}} {
		pct, all := behind(w.name, w.pid)
		t.Logf("`%s` (pid %d): %.1f%% of a CPU behind the other hog; behind %+v", w.name, w.pid, pct, all)
		if pct < 1 {
			t.Errorf("`%s` (pid %d) not shown waiting behind the other hog: %+v", w.name, w.pid, s.Blame.Waiters)
		}
	}
}
