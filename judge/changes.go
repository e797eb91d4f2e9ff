package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// What counts as a change between two windows' ledgers: less is the noise
// of a quiet host (a daemon's few percent come and go).
const (
	// changeCPU is the least difference of a neighbour's CPU, in percent
	// of one CPU, that names it; it must also be twice the other side's.
	changeCPU = 5.0
	// changeNeighboursCPU is the same for all the neighbours together.
	changeNeighboursCPU = 10.0
	// changeShare is the least difference of a share of the time (steal,
	// throttling, the wait behind neighbours), in points.
	changeShare = 2.0
	// changeLagFactor is how many times the other window's send-lag p99
	// tare's own must be, and more than the latency floor above it.
	changeLagFactor = 2.0
	// changeSUTCPUMS is the least CPU time of the system under test, in
	// ms, on each side for its CPU per request to be compared: the kernel
	// counts CPU time in clock ticks (10 ms at USER_HZ 100), so a run that
	// used 30 ms of it has ±30 % of noise in the figure.
	changeSUTCPUMS = 1000.0
)

// windowChanges sets each window's ledger beside that of the quietest
// window measured (the best end of the capacity range) and names what
// differed.
func windowChanges(c *tare.Comparison, ref string, floorMS, thresholdPct float64) []tare.WindowChange {
	ledgers := windowLedgers(c.Runs)
	var base *ledger
	for i := range ledgers {
		if ledgers[i].name == ref {
			base = &ledgers[i]
		}
	}
	if base == nil || !base.measured {
		return nil
	}
	var out []tare.WindowChange
	for i := range ledgers {
		if l := &ledgers[i]; l != base && l.measured {
			out = append(out, tare.WindowChange{Window: l.name, Against: ref, Items: changes(l, base, floorMS, thresholdPct)})
		}
	}
	return out
}

// ledger is one window's whose-CPU figures, the mean over its runs of
// those each measured.
type ledger struct {
	name       string
	measured   bool // some figure of the ledger was measured
	vcpus      int
	others     map[neighbour]float64 // % of one CPU
	top        int                   // the most named neighbours a run of it kept
	neighbours *float64              // other processes and unattributed busy time, % of one CPU
	wait       *float64              // the measured processes' wait behind neighbours, % of wall time
	steal      *float64
	throttled  *float64
	sendLagP99 *float64
	sutCPU     *float64 // ms per request
	sutCPUMS   float64  // in all, over the runs with the figure
}

// windowLedgers pools the runs' ledgers by window (or by run outside the
// protocol), in order of first appearance.
func windowLedgers(runs []tare.ComparedRun) []ledger {
	var out []ledger
	index := map[string]int{}
	type sums struct{ neighbours, wait, steal, throttled, lag, sut meanOf }
	var acc []sums
	var ledgers []int // per window, how many runs had a ledger
	for _, r := range runs {
		name := groupName(r)
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, ledger{name: name, others: map[neighbour]float64{}})
			acc = append(acc, sums{})
			ledgers = append(ledgers, 0)
		}
		l, a := &out[i], &acc[i]
		cpus := float64(max(r.VCPUs, 1))
		l.vcpus = max(l.vcpus, r.VCPUs)
		if by := r.CPUBy; by != nil {
			ledgers[i]++
			a.neighbours.add(tare.Float(by.Neighbours() * cpus))
			for _, p := range by.TopOthers {
				l.others[neighbourOf(p)] += p.CPUPct * cpus
			}
			l.top = max(l.top, len(by.TopOthers))
		}
		a.steal.add(r.Steal.Mean)
		a.wait.add(r.NeighbourWaitPct)
		a.throttled.add(r.ThrottledPct)
		a.lag.add(r.SendLag.P99)
		a.sut.add(r.SUTCPUPerRequestMS)
		if r.SUTCPUPerRequestMS != nil {
			l.sutCPUMS += *r.SUTCPUPerRequestMS * float64(r.Requests)
		}
	}
	for i := range out {
		l, a := &out[i], &acc[i]
		for n := range l.others {
			l.others[n] /= float64(ledgers[i])
		}
		l.neighbours, l.wait, l.steal = a.neighbours.mean(), a.wait.mean(), a.steal.mean()
		l.throttled, l.sendLagP99, l.sutCPU = a.throttled.mean(), a.lag.mean(), a.sut.mean()
		l.measured = ledgers[i] > 0 || a.steal.n+a.wait.n+a.throttled.n+a.lag.n+a.sut.n > 0
	}
	return out
}

// meanOf is the mean of the figures given, nil when none was.
type meanOf struct {
	n   int
	sum float64
}

func (m *meanOf) add(v *float64) {
	if v != nil {
		m.n++
		m.sum += *v
	}
}

func (m *meanOf) mean() *float64 {
	if m.n == 0 {
		return nil
	}
	return tare.Float(m.sum / float64(m.n))
}

// changes names what differs in l against base: first what was worse in
// l (the interference that can explain l being slower), then what was
// worse in base; in each, the busiest named neighbour first, then the
// wait behind neighbours, steal, throttling, tare's lateness, all the
// neighbours, the other named ones, and the service's own CPU per request.
func changes(l, base *ledger, floorMS, thresholdPct float64) []tare.Change {
	var out []tare.Change
	higher := func(v, w float64) string {
		if v >= w {
			return l.name
		}
		return base.name
	}
	named := 0.0 // the difference the named neighbours account for
	for _, n := range pairNeighbours(l.others, base.others) {
		if math.Abs(n.v-n.w) < changeCPU || max(n.v, n.w) < 2*min(n.v, n.w) {
			continue
		}
		named += n.v - n.w
		busy, quiet, used := l, base, n.w
		if n.w > n.v {
			busy, quiet, used = base, l, n.v
		}
		out = append(out, tare.Change{Kind: tare.ChangeNeighbour, Name: n.name, PID: n.pid, Value: roundTo(n.v, 1), Against: roundTo(n.w, 1), Unit: "% of a CPU", In: busy.name,
			Detail: fmt.Sprintf("in %s, %s used %.0f%% of a CPU (%s)", busy.name, n.who(), max(n.v, n.w), quiet.usage(used))})
	}
	share := func(kind string, v, w *float64, least float64, unit, what string) {
		if v == nil || w == nil || math.Abs(*v-*w) < least || max(*v, *w) < 2*min(*v, *w) {
			return
		}
		out = append(out, tare.Change{Kind: kind, Value: roundTo(*v, 1), Against: roundTo(*w, 1), Unit: unit, In: higher(*v, *w),
			Detail: fmt.Sprintf(what, *v, *w)})
	}
	// All the neighbours together, when the named ones do not account
	// for the difference.
	if v, w := l.neighbours, base.neighbours; v != nil && w != nil && math.Abs(*v-*w-named) >= changeNeighboursCPU {
		share(tare.ChangeNeighbours, v, w, changeNeighboursCPU, "% of a CPU",
			"other processes and busy time no process accounts for used %.0f%% of a CPU against %.0f%% in "+base.name)
	}
	share(tare.ChangeNeighbourWait, l.wait, base.wait, changeShare, "%",
		"the service and tare waited for a CPU behind neighbours %.1f%% of the time against %.1f%% in "+base.name)
	share(tare.ChangeSteal, l.steal, base.steal, changeShare, "%",
		"steal took %.1f%% of the host's CPU against %.1f%% in "+base.name)
	share(tare.ChangeThrottling, l.throttled, base.throttled, changeShare, "%",
		"the cgroup was throttled %.1f%% of the time against %.1f%% in "+base.name)
	if v, w := l.sendLagP99, base.sendLagP99; v != nil && w != nil && math.Abs(*v-*w) > floorMS &&
		max(*v, *w) >= changeLagFactor*min(*v, *w) {
		what := "something held the generator back in " + l.name
		if *w > *v {
			what = "something held the generator back in " + base.name
		}
		out = append(out, tare.Change{Kind: tare.ChangeSendLag, Value: roundTo(*v, 3), Against: roundTo(*w, 3), Unit: "ms", In: higher(*v, *w),
			Detail: fmt.Sprintf("tare's own send lag p99 was %s against %s in %s: %s", tare.MSText(*v), tare.MSText(*w), base.name, what)})
	}
	if v, w := l.sutCPU, base.sutCPU; v != nil && w != nil && min(l.sutCPUMS, base.sutCPUMS) >= changeSUTCPUMS &&
		min(*v, *w) > 0 && 100*(max(*v, *w)/min(*v, *w)-1) > thresholdPct {
		more := "more"
		if *v < *w {
			more = "less"
		}
		out = append(out, tare.Change{Kind: tare.ChangeSUTCPU, Value: roundTo(*v, 3), Against: roundTo(*w, 3), Unit: "ms", In: higher(*v, *w),
			Detail: fmt.Sprintf("the system under test spent %s of CPU per request against %s in %s: %s work per request (the code or its data), or slower CPUs (contended caches, a lower clock)",
				tare.MSText(*v), tare.MSText(*w), base.name, more)})
	}
	rank := map[string]int{tare.ChangeNeighbour: 0, tare.ChangeNeighbourWait: 1, tare.ChangeSteal: 2, tare.ChangeThrottling: 3,
		tare.ChangeSendLag: 4, tare.ChangeNeighbours: 5, tare.ChangeSUTCPU: 7}
	type ranked struct {
		rank int
		c    tare.Change
	}
	all := make([]ranked, len(out))
	for i, c := range out {
		r := rank[c.Kind]
		if c.Kind == tare.ChangeNeighbour && slices.ContainsFunc(out[:i], func(o tare.Change) bool { return o.Kind == c.Kind && o.In == c.In }) {
			r = 6 // the busiest named neighbour says who; the others come after how much
		}
		if c.In != l.name {
			r += 10
		}
		all[i] = ranked{r, c}
	}
	slices.SortStableFunc(all, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	for i := range all {
		out[i] = all[i].c
	}
	return out
}

// usage says how much of a CPU a neighbour used in l, for the side where
// it used little (v): "absent in offpeak", or its share there. A run keeps
// only its busiest neighbours: when all of its places were taken, absent
// means not among them.
func (l *ledger) usage(v float64) string {
	switch {
	case v > 0:
		return fmt.Sprintf("%.0f%% in %s", v, l.name)
	case l.top >= tare.TopOthersKept:
		return "not among the busiest in " + l.name
	}
	return "absent in " + l.name
}

// neighbour is a named neighbour of a window's ledger: a service by its
// command and root pid, or a container's share by its busiest command
// (pid 0, as a container's busiest process changes).
type neighbour struct {
	name string
	pid  int
}

func neighbourOf(p tare.ProcessShare) neighbour {
	if p.Container != nil {
		return neighbour{name: p.Name}
	}
	return neighbour{p.Name, p.PID}
}

// pairedNeighbour is a neighbour's share of one CPU in two windows.
type pairedNeighbour struct {
	neighbour
	v, w float64
}

// who names it: "`sh` (pid 7)", or "`sh`" for every process of the name.
func (n pairedNeighbour) who() string {
	if n.pid == 0 {
		return "`" + n.name + "`"
	}
	return fmt.Sprintf("`%s` (pid %d)", n.name, n.pid)
}

// pairNeighbours pairs the named neighbours of two windows, the largest
// difference first. The same process in both (a server that ran all day)
// is paired with itself. Two processes of one name in one window are two
// neighbours, not one: a CPU hog's `sh` beside a broker's. Those of a name
// that are not the same process in both windows (a cron job, run each
// hour under a new pid) are paired by name: each window's processes of
// that name summed, pid 0; where only one window has such processes, each
// is paired with nothing.
func pairNeighbours(a, b map[neighbour]float64) []pairedNeighbour {
	var out []pairedNeighbour
	unmatched := func(m, other map[neighbour]float64, name string) (sum float64, alone []neighbour) {
		for n, v := range m {
			if _, ok := other[n]; !ok && n.name == name {
				sum += v
				alone = append(alone, n)
			}
		}
		return sum, alone
	}
	names := map[string]bool{}
	for n, v := range a {
		names[n.name] = true
		if w, ok := b[n]; ok {
			out = append(out, pairedNeighbour{n, v, w})
		}
	}
	for n := range b {
		names[n.name] = true
	}
	for name := range names {
		va, alone := unmatched(a, b, name)
		wb, aloneB := unmatched(b, a, name)
		switch {
		case len(alone) > 0 && len(aloneB) > 0:
			out = append(out, pairedNeighbour{neighbour{name: name}, va, wb})
		default:
			for _, n := range alone {
				out = append(out, pairedNeighbour{n, a[n], 0})
			}
			for _, n := range aloneB {
				out = append(out, pairedNeighbour{n, 0, b[n]})
			}
		}
	}
	slices.SortFunc(out, func(x, y pairedNeighbour) int {
		return cmp.Or(cmp.Compare(math.Abs(y.v-y.w), math.Abs(x.v-x.w)), strings.Compare(x.name, y.name), cmp.Compare(x.pid, y.pid))
	})
	return out
}

// explain says what changed between windows a and b, for a figure that
// differed between them: " What changed: " and the first few changes of
// the busier against the other, or that the ledger shows none; "" when
// either carries no ledger.
func explain(c *tare.Comparison, a, b string, floorMS, thresholdPct float64) string {
	ledgers := windowLedgers(c.Runs)
	var la, lb *ledger
	for i := range ledgers {
		switch ledgers[i].name {
		case a:
			la = &ledgers[i]
		case b:
			lb = &ledgers[i]
		}
	}
	if la == nil || lb == nil || !la.measured || !lb.measured {
		return ""
	}
	var parts []string
	for _, x := range changes(la, lb, floorMS, thresholdPct) {
		if x.In == a && len(parts) < 3 {
			parts = append(parts, x.Detail)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf(" What changed: nothing in the whose-CPU ledger was worse in %s than in %s: no neighbour, steal, throttling or generator lateness on this host explains it; look beyond it (a shared database, a remote dependency, the data served).", a, b)
	}
	return " What changed: " + strings.Join(parts, "; ") + "."
}
