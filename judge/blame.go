package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// Probed reports whether the run's blame was measured by the scheduler
// probe: then the neighbours signal judges the measured wait behind other
// processes and names them with their share of it.
func Probed(s *tare.Summary) bool {
	return s.Blame != nil && s.Blame.Source == tare.BlameMeasured
}

// measuredNeighbours completes the neighbours signal from measured blame:
// w is the mean wait behind other processes, over the ticks in which it
// exceeded the steal threshold.
func measuredNeighbours(sig tare.Signal, b *tare.Blame, waited string, w float64, over, ticks int, overPct float64, th Thresholds) tare.Signal {
	who := behindNames(b)
	switch {
	case w > th.Neighbours:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("%s waited for a CPU %.1f%% of the time behind other processes (threshold %g%%; measured by the scheduler probe, at most the CPU they used): %s", waited, w, th.Neighbours, who)
	case overPct > th.NeighbourTicks && over >= 2:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("%s waited behind other processes more than %g%% of the tick in %.0f%% of ticks (%d of %d; threshold %g%% of ticks; measured by the scheduler probe): %s", waited, th.Steal, overPct, over, ticks, th.NeighbourTicks, who)
	default:
		sig.Detail = fmt.Sprintf("%s waited behind other processes %.1f%% of the time (threshold %g%%; measured by the scheduler probe, at most the CPU they used)", waited, w, th.Neighbours)
		if b.Others() >= 0.05 {
			sig.Detail += ": " + who
		}
	}
	return sig
}

// namedBehind is how many other processes the neighbours signal names.
const namedBehind = 3

// behindNames names the other processes the measured threads waited
// behind, the largest share first, each with its share of a CPU:
// "`sh` (pids 7, 9) 11.9%, `batch` (pid 4121) 1.6% and others 0.3%".
func behindNames(b *tare.Blame) string {
	var parts []string
	rest := 0.0
	for _, o := range b.Behind {
		if o.Owner != tare.OwnerOther {
			continue
		}
		if o.Name == "" || len(parts) == namedBehind || o.WaitPct < 0.05 {
			rest += o.WaitPct
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", o.Who(), o.WaitPct))
	}
	out := strings.Join(parts, ", ")
	switch {
	case out == "":
		return fmt.Sprintf("other processes %.1f%%", rest)
	case rest >= 0.05:
		return fmt.Sprintf("%s and others %.1f%%", out, rest)
	}
	return out
}

// coreShare is the share of the wait behind other processes that one CPU
// saw above which the advice names that core to free.
const coreShare = 75

// busiestCore is the CPU that saw most of the wait behind other processes
// and its share of it (percent); -1 when it saw less than coreShare, or
// the host has a single CPU (nothing else to move to).
func busiestCore(b *tare.Blame, vcpus int) (int, float64) {
	total, top, cpu := 0.0, 0.0, -1
	for _, c := range b.OthersByCPU {
		total += c.WaitPct
		if c.WaitPct > top {
			top, cpu = c.WaitPct, c.CPU
		}
	}
	if vcpus < 2 || total <= 0 || 100*top/total < coreShare {
		return -1, 0
	}
	return cpu, 100 * top / total
}

// measuredNeighbourAdvice names the process to stop (its container, when
// the ledger saw it run in one), and the core to free when the wait behind
// others was mostly on one.
func measuredNeighbourAdvice(b *tare.Blame, by *tare.CPUBy, vcpus int, pin string) string {
	cpu, share := busiestCore(b, vcpus)
	for _, o := range b.Behind {
		if o.Owner != tare.OwnerOther || o.Name == "" {
			continue
		}
		if c := containerOf(by, o.PIDs); c != nil {
			return fmt.Sprintf("Stop %s during the test (%s), or %s; then rerun.", c, stopHint(c), pin)
		}
		if cpu >= 0 {
			return fmt.Sprintf("Stop %s or move it off CPU %d, where %.0f%% of the wait behind other processes was (taskset -c), or %s; then rerun.", o.Who(), cpu, share, pin)
		}
		return fmt.Sprintf("Stop %s or move it elsewhere during the test, or %s; then rerun.", o.Who(), pin)
	}
	if cpu >= 0 {
		return fmt.Sprintf("Free CPU %d, where %.0f%% of the wait behind other processes was, or %s; then rerun.", cpu, share, pin)
	}
	return fmt.Sprintf("Processes tare could not name (gone before it looked) held the CPUs: run the test on a dedicated host, or %s; then rerun.", pin)
}

// blameWarnings are what the summary must say of measured blame: ticks in
// which the probe's wait disagreed with schedstat's run delay (the truth
// check), and events it lost.
func blameWarnings(s *tare.Summary) []string {
	if !Probed(s) {
		return nil
	}
	var w []string
	if t := s.Blame.Schedstat; t != nil && t.Disagreed > 0 {
		w = append(w, fmt.Sprintf("the scheduler probe's run delay disagreed with schedstat's by more than 5%% (or 1 ms a tick) in %d of %d ticks (over the run: %.1f%% of a CPU by the probe, %.1f%% by schedstat): the blame of those ticks is approximate",
			t.Disagreed, t.Ticks, t.ProbeWaitPct, t.WaitPct))
	}
	if n := s.Blame.DroppedEvents; n > 0 {
		w = append(w, fmt.Sprintf("the scheduler probe lost %d events (a map full, or a run of its program skipped): the blame undercounts", n))
	}
	return w
}

// containerOf is the container the ledger saw one of pids run in; nil
// when it saw none of them in one.
func containerOf(by *tare.CPUBy, pids []int) *tare.Container {
	if by == nil {
		return nil
	}
	for _, p := range by.TopOthers {
		if p.Container != nil && slices.Contains(pids, p.PID) {
			return p.Container
		}
	}
	return nil
}
