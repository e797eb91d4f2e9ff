package main

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/demo"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/judge"
)

// watchJSON runs tare watch with the arguments and returns its summary.
func watchJSON(t *testing.T, args ...string) tare.Summary {
	t.Helper()
	code, stdout, stderr := tareCmd(t, append([]string{"watch", "--json", "--tick", "500ms"}, args...)...)
	if code != 0 {
		t.Fatalf("tare watch: exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	return s
}

func signalOf(t *testing.T, s tare.Summary, name string) tare.Signal {
	t.Helper()
	for _, sig := range s.Verdict.Signals {
		if sig.Name == name {
			return sig
		}
	}
	t.Fatalf("no %s signal in %+v", name, s.Verdict.Signals)
	return tare.Signal{}
}

// TestWatchRunDelay: a CPU-bound probe pinned to CPU 0 and watched with
// --pid; with a hog pinned to the same CPU, its run delay rises, and the
// neighbours signal fires naming the hog.
func TestWatchRunDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference for ~6 s: skipped with -short")
	}
	interfere.Exclusive(t)
	pin := interfere.Pinned(0)
	probe := interfere.Busy(t, pin...)
	pid := strconv.Itoa(probe.Process.Pid)
	alone := watchJSON(t, "--pid", pid, "--", "sleep", "2")
	interfere.Busy(t, pin...)
	hogged := watchJSON(t, "--pid", pid, "--", "sleep", "3")

	a, h := signalOf(t, alone, judge.SignalRunDelay), signalOf(t, hogged, judge.SignalRunDelay)
	if a.Value == nil || h.Value == nil {
		t.Fatalf("run delay not measured: alone %+v hogged %+v", a, h)
	}
	t.Logf("run delay of the probe: alone %.1f%%, with a hog on its CPU %.1f%%; verdict %s", *a.Value, *h.Value, hogged.Verdict.Level)
	// The probe is the system under test (--pid); the hog is a neighbour:
	// its wait is interference and the run is polluted. The hog is among
	// the busiest others (the suite's other packages may be busier).
	n := signalOf(t, hogged, judge.SignalNeighbours)
	if !n.Fired || hogged.Verdict.Level != tare.Polluted {
		t.Errorf("with a hog on the probe's CPU: neighbours %+v, level %s; want it fired, polluted", n, hogged.Verdict.Level)
	}
	if by := hogged.Host.CPUBy; by == nil || !slices.ContainsFunc(by.TopOthers, func(p tare.ProcessShare) bool { return p.Name == "sh" }) {
		t.Errorf("the hog (sh) is not among the busiest other processes: %+v", by)
	}
	// What the hog changed is the probe's wait behind neighbours; its run
	// delay alone is also the rest of a busy suite.
	an, hn := signalOf(t, alone, judge.SignalNeighbours), n
	if an.Value == nil || hn.Value == nil || *hn.Value <= *an.Value {
		t.Errorf("wait behind neighbours: alone %+v, with the hog %+v; want it higher with the hog", an, hn)
	}
}

// TestWatchThrottling: as root, a cgroup with a 20% CPU quota holding a busy
// process, watched with --cgroup, fires the throttling signal: polluted.
func TestWatchThrottling(t *testing.T) {
	if testing.Short() {
		t.Skip("real throttling for ~3 s: skipped with -short")
	}
	interfere.Exclusive(t)
	dir := interfere.QuotaCgroup(t, host.DefaultCgroupRoot, 20000, 100000)
	busy := interfere.Busy(t)
	interfere.Join(t, dir, busy.Process.Pid)
	s := watchJSON(t, "--cgroup", dir, "--", "sleep", "3")
	sig := signalOf(t, s, judge.SignalThrottling)
	t.Logf("throttling: %s; verdict %s", sig.Detail, s.Verdict.Level)
	if !sig.Fired || s.Verdict.Level != tare.Polluted {
		t.Errorf("signal %+v level %s: want throttling fired and the run polluted", sig, s.Verdict.Level)
	}
}

// TestWatchExitStatus: tare watch passes on the command's status.
func TestWatchExitStatus(t *testing.T) {
	code, _, stderr := tareCmd(t, "watch", "--quiet", "--tick", "100ms", "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Errorf("exit %d, want the command's 3; stderr %s", code, stderr)
	}
}

// TestCheck samples the host briefly and reports steal with a verdict.
func TestCheck(t *testing.T) {
	code, stdout, stderr := tareCmd(t, "check", "--for", "1s", "--tick", "200ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Host.Ticks < 3 || s.Host.Steal.Mean == nil || s.Requests.Total != 0 || s.Latency.P50 != nil {
		t.Errorf("host %+v requests %+v latency p50 %v: want host ticks and steal, no requests", s.Host, s.Requests, s.Latency.P50)
	}
}

// TestDemoNeighbourNamesItsHogs: the CPU hogs of tare demo --neighbour
// go by a name that says whose they are (hogName, in /proc/<pid>/comm,
// where the ledger and the verdict read it), not by a shell's.
func TestDemoNeighbourNamesItsHogs(t *testing.T) {
	interfere.Exclusive(t)
	stop := demo.StartNeighbour(t.Context(), selfCommand, 0, nil)
	defer stop()
	var names []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		names = childNames(t)
		if len(names) >= runtime.NumCPU() && !slices.ContainsFunc(names, func(n string) bool { return n != hogName }) {
			return
		}
	}
	t.Errorf("the demo's hogs are named %q; want %d named %q", names, runtime.NumCPU(), hogName)
}

// childNames are the command names of this process's children.
func childNames(t *testing.T) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		if f := strings.Fields(string(b[end+1:])); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			names = append(names, string(b[open+1:end]))
		}
	}
	return names
}
