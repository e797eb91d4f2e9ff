package host

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
)

// samplesOf runs a sampler for n ticks and returns what it sent.
func samplesOf(t *testing.T, s *Sampler, n int) []tare.HostSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n+5)*s.Tick())
	defer cancel()
	out := make(chan tare.HostSample)
	go s.Run(ctx, out)
	var got []tare.HostSample
	for hs := range out {
		if got = append(got, hs); len(got) == n {
			cancel()
		}
	}
	if len(got) < n {
		t.Fatalf("%d samples, want %d (warnings %v)", len(got), n, s.Warnings())
	}
	return got
}

// meanRunDelay is the run delay over the samples, weighted by their length.
func meanRunDelay(t *testing.T, samples []tare.HostSample) float64 {
	t.Helper()
	var sum, total float64
	for i, hs := range samples {
		if hs.RunDelay == nil {
			t.Fatalf("sample %d has no run delay", i)
		}
		d := hs.End.Sub(hs.Start).Seconds()
		sum += *hs.RunDelay * d
		total += d
	}
	return sum / total
}

// TestRunDelayHog: a CPU-bound probe pinned to CPU 0 waits for the CPU
// more once a hog is pinned to the same CPU. Alone it waits only for
// whatever else the machine runs there; with the hog, the scheduler shares
// CPU 0 between them and the probe waits about half the time. The test
// compares the two in the same run: no absolute figure. As root, probe and
// hog run at nice -10, so the rest of a busy machine (other builds, other
// tests) weighs little against them on CPU 0 and the contrast stays clear.
func TestRunDelayHog(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference runs for 4 s: skipped with -short")
	}
	interfere.Exclusive(t)
	pin := interfere.Pinned(0)
	probe := interfere.Busy(t, pin...)
	measure := func() float64 {
		s, err := NewSampler(Config{Tick: 500 * time.Millisecond, SUT: []int{probe.Process.Pid}})
		if err != nil {
			t.Fatal(err)
		}
		return meanRunDelay(t, samplesOf(t, s, 4))
	}
	alone := measure()
	interfere.Busy(t, pin...)
	hogged := measure()
	t.Logf("probe run delay: alone %.1f %%, with a hog on its CPU %.1f %% (%.1fx)", alone, hogged, hogged/alone)
	if hogged < alone*1.25 || hogged-alone < 10 {
		t.Errorf("run delay with the hog %.1f %% is not clearly above alone %.1f %%", hogged, alone)
	}
}

// TestCgroupThrottling makes a cgroup with a quota of 20 ms per 100 ms
// period, puts a busy loop in it and checks that a sampler measuring that
// process finds its cgroup and reports throttling in most ticks. The cgroup
// gets a high weight, so that on a busy machine it still gets its 20 ms
// early in each period and runs into the quota. Root only: skipped when the
// cgroup cannot be made. The cgroup is removed afterwards.
func TestCgroupThrottling(t *testing.T) {
	if testing.Short() {
		t.Skip("real throttling runs for 3 s: skipped with -short")
	}
	interfere.Exclusive(t)
	dir := interfere.QuotaCgroup(t, DefaultCgroupRoot, 20000, 100000)
	busy := interfere.Busy(t)
	interfere.Join(t, dir, busy.Process.Pid)
	s, err := NewSampler(Config{Tick: 500 * time.Millisecond, SUT: []int{busy.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.cgroups) == 0 || s.cgroups[0].Path != dir {
		t.Fatalf("sampler found cgroups %v for pid %d, want %q first (warnings %v)", s.cgroups, busy.Process.Pid, dir, s.Warnings())
	}
	samples := samplesOf(t, s, 6)
	throttled := 0
	for i, hs := range samples {
		if hs.Throttled == nil {
			t.Fatalf("sample %d: no throttling figure (warnings %v)", i, s.Warnings())
		}
		if *hs.Throttled > 0 {
			throttled++
		}
		t.Logf("tick %d: throttled %.1f %% run delay %v", i, *hs.Throttled, fmtPtr(hs.RunDelay))
	}
	if throttled*3 < len(samples)*2 {
		t.Errorf("throttled in %d of %d ticks, want most", throttled, len(samples))
	}
}

// TestShortLivedChildrenNamed: a shell that runs short CPU-bound children
// one after another (a build: each lives well under a tick) is named in
// the ledger with them, rather than leaving their CPU unattributed.
func TestShortLivedChildrenNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("real short-lived processes for 3 s: skipped with -short")
	}
	interfere.Exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each awk burns about 30-100 ms of CPU and exits; the shell loops for 4 s.
	build := exec.CommandContext(ctx, "sh", "-c", `end=$(( $(date +%s) + 4 )); while [ $(date +%s) -lt $end ]; do awk 'BEGIN{for(i=0;i<400000;i++)s+=i}'; done`)
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); build.Wait() }()
	s, err := NewSampler(Config{Tick: 500 * time.Millisecond, Tare: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var named, unattributed, others float64
	for _, hs := range samplesOf(t, s, 5) {
		if hs.CPUBy == nil {
			continue
		}
		others += hs.CPUBy.Others
		unattributed += hs.CPUBy.Unattributed
		for _, p := range hs.CPUBy.TopOthers {
			if p.PID == build.Process.Pid && slices.Contains(p.Children, "awk") {
				named += p.CPUPct
			}
		}
	}
	t.Logf("over 5 ticks: the shell and its awks %.1f %%, others %.1f %%, unattributed %.1f %%", named, others, unattributed)
	if named < 2*unattributed || named < 5 {
		t.Errorf("the shell (pid %d) with its short-lived awks was named with %.1f %% of the host, unattributed %.1f %%: want the builds named, most of their CPU theirs", build.Process.Pid, named, unattributed)
	}
}
