package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
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
// tare check watches the three busiest processes: where others were
// busier (CI's go test compiling the next packages, three `compile`s at
// 80-130 % of a CPU), the hogs are not among them, which says nothing of
// the feature, and it checks again, up to three times.
func TestCheckBusiestBlame(t *testing.T) {
	probeHere(t)
	interfere.Exclusive(t)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	duty := interfere.Duty(t, 50*time.Millisecond, 50*time.Millisecond, interfere.Pinned(0)...)
	hogs := []struct {
		name string
		pid  int
	}{{"sh", hog.Process.Pid}, {"perl", duty.Process.Pid}}
	var s tare.Summary
	// behind is how much of a CPU name (pid) waited behind the other hog,
	// and whom it waited behind; -1 when it is not among the waiters.
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
	for try := 1; ; try++ {
		code, stdout, stderr := tareCmd(t, "check", "--for", "3s", "--tick", "500ms", "--json")
		if code != 0 && code != 3 {
			t.Fatalf("tare check: exit %d; %s", code, stderr)
		}
		s = tare.Summary{}
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("summary: %v\n%s", err, stdout)
		}
		if s.Blame == nil || s.Blame.Source != tare.BlameMeasured {
			t.Fatalf("blame %+v, want it measured", s.Blame)
		}
		watched := true
		for _, h := range hogs {
			if pct, _ := behind(h.name, h.pid); pct < 0 {
				watched = false
			}
		}
		if watched || try == 3 {
			break
		}
		t.Logf("check %d: the hogs were not the busiest processes, watched %+v; again", try, s.Blame.Waiters)
	}
	for _, h := range hogs {
		pct, all := behind(h.name, h.pid)
		t.Logf("`%s` (pid %d): %.1f%% of a CPU behind the other hog; behind %+v", h.name, h.pid, pct, all)
		if pct < 1 {
			t.Errorf("`%s` (pid %d) not shown waiting behind the other hog: %+v", h.name, h.pid, s.Blame.Waiters)
		}
	}
}

// TestWatchBlameNamesApart (issue 40): two `sh` loops pinned to the CPU of
// the service and tare, of two process families (one the test's child,
// one a child of `timeout`, as RabbitMQ's disk monitor is of beam.smp),
// are two neighbours: the blame, the ledger, the verdict and the advice
// name each with its own pid and share, never one `sh` with both pids.
func TestWatchBlameNamesApart(t *testing.T) {
	probeHere(t)
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	// timeout stays the loop's parent; setpriv kills the loop with it.
	wrapper := interfere.Busy(t, append(interfere.Pinned(0), "timeout", "-s", "KILL", "60", "setpriv", "--pdeathsig", "KILL")...)
	other := childOf(t, wrapper.Process.Pid)
	s := pinnedWatch(t, 0, "--pid", strconv.Itoa(svc.Process.Pid), "--", "sleep", "3")
	b := s.Blame
	if b == nil || b.Source != tare.BlameMeasured {
		t.Fatalf("blame %+v, want it measured", b)
	}
	t.Logf("hog %d, other %d; behind %+v; top others %+v", hog.Process.Pid, other, b.Behind, s.Host.CPUBy.TopOthers)
	behind := func(pid int) int {
		return slices.IndexFunc(b.Behind, func(w tare.Behind) bool { return w.Owner == tare.OwnerOther && slices.Contains(w.PIDs, pid) })
	}
	for _, pid := range []int{hog.Process.Pid, other} {
		i := behind(pid)
		switch {
		case i < 0:
			t.Errorf("not waited behind `sh` (pid %d): %+v", pid, b.Behind)
		case b.Behind[i].Name != "sh" || !slices.Equal(b.Behind[i].PIDs, []int{pid}) || b.Behind[i].WaitPct < 1:
			t.Errorf("waited behind %+v, want `sh` (pid %d) alone, 1%% of a CPU or more", b.Behind[i], pid)
		}
	}
	if s.Host.CPUBy == nil {
		t.Fatal("no ledger")
	}
	for _, pid := range []int{hog.Process.Pid, other} {
		i := slices.IndexFunc(s.Host.CPUBy.TopOthers, func(p tare.ProcessShare) bool { return p.PID == pid })
		if i < 0 || len(s.Host.CPUBy.TopOthers[i].PIDs) > 1 {
			t.Errorf("the ledger's top others %+v do not give `sh` (pid %d) a share of its own", s.Host.CPUBy.TopOthers, pid)
		}
	}
	n := signalOf(t, s, judge.SignalNeighbours)
	advice := strings.Join(s.Verdict.Advice, "\n")
	for _, text := range []string{n.Detail, advice} {
		if bothIn(text, hog.Process.Pid, other) {
			t.Errorf("one name for both `sh`: %s", text)
		}
	}
	// The advice names the first process waited behind: on a busy machine
	// it may be another than the hogs.
	if i := slices.IndexFunc(b.Behind, func(w tare.Behind) bool { return w.Owner == tare.OwnerOther && w.Name != "" }); i >= 0 && b.Behind[i].Name == "sh" &&
		!strings.Contains(advice, "Stop "+b.Behind[i].Who()) {
		t.Errorf("the advice does not name %s alone to stop:\n%s", b.Behind[i].Who(), advice)
	}
}

// bothIn reports whether one "(pids …)" of text lists both a and b.
func bothIn(text string, a, b int) bool {
	for _, group := range regexp.MustCompile(`\(pids ([0-9, …]+)\)`).FindAllStringSubmatch(text, -1) {
		pids := strings.Split(group[1], ", ")
		if slices.Contains(pids, strconv.Itoa(a)) && slices.Contains(pids, strconv.Itoa(b)) {
			return true
		}
	}
	return false
}

// childOf waits for the first child of pid to run, and returns its pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
		if err != nil {
			t.Fatalf("children of %d: %v", pid, err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ := strconv.Atoi(f[0])
			if comm, _ := os.ReadFile(filepath.Join("/proc", f[0], "comm")); strings.TrimSpace(string(comm)) == "sh" {
				return child
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no `sh` child of %d", pid)
	return 0
}

// TestCheckNamesInFull: a busy program whose name is longer than the 15
// bytes the kernel keeps of it (a link to sh named nightly-compactor,
// which the kernel calls nightly-compact) is named in full by tare check:
// in the ledger, and in the busy signal a person reads.
func TestCheckNamesInFull(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference for seconds: skipped with -short")
	}
	interfere.Exclusive(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "nightly-compactor")
	if err := os.Symlink(sh, prog); err != nil {
		t.Fatal(err)
	}
	hog := interfere.BusyAs(t, prog, interfere.Pinned(1)...)
	code, stdout, stderr := tareCmd(t, "check", "--for", "2s", "--tick", "500ms", "--json")
	if code != 0 && code != 3 {
		t.Fatalf("tare check: exit %d; %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if s.Host.CPUBy == nil {
		t.Fatalf("no ledger: %s", stdout)
	}
	t.Logf("top others %+v", s.Host.CPUBy.TopOthers)
	i := slices.IndexFunc(s.Host.CPUBy.TopOthers, func(p tare.ProcessShare) bool { return p.PID == hog.Process.Pid })
	if i < 0 || s.Host.CPUBy.TopOthers[i].Name != "nightly-compactor" {
		t.Errorf("top others %+v: want pid %d named nightly-compactor", s.Host.CPUBy.TopOthers, hog.Process.Pid)
	}
	busy := signalOf(t, s, judge.SignalBusy)
	if want := "`nightly-compactor` (pid " + strconv.Itoa(hog.Process.Pid) + ")"; !strings.Contains(busy.Detail, want) {
		t.Errorf("busy signal %q does not name %s", busy.Detail, want)
	}
}
