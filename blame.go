package tare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Where a Blame comes from.
const (
	// BlameMeasured: the scheduler's own switch events (the eBPF probe,
	// as root on a kernel with BTF) said who held each CPU while the
	// measured threads waited for it.
	BlameMeasured = "measured"
	// BlameEstimated: the measured threads' run delay split in proportion
	// to the ledger's CPU shares (HostSample.NeighbourWait).
	BlameEstimated = "estimated"
)

// Whom a wait was spent behind (Behind.Owner).
const (
	OwnerOther  = "other"             // another process, named
	OwnerSUT    = "system_under_test" // the system under test's own threads
	OwnerTare   = "tare"              // tare's
	OwnerKernel = "kernel"            // kernel threads
	OwnerWakeup = "wakeup"            // nobody: the CPU was idle, and the thread not yet running (wake-up latency)
)

// Blame is, of the time the measured threads (the system under test's and
// tare's) waited for a CPU, how much was spent behind whom, over a tick
// (HostSample.Blame, measured only) or a run (Summary.Blame). Shares are
// percent of one CPU: two threads waiting a whole second each are 200.
type Blame struct {
	Source string `json:"source"` // BlameMeasured or BlameEstimated
	// Why says why a run's blame was estimated: the probe is off, or
	// cannot run here.
	Why     string   `json:"why,omitempty"`
	WaitPct float64  `json:"wait_pct"`
	Behind  []Behind `json:"behind"` // the largest first
	// RunDelayPct is, measured only, the measured threads' waits that
	// ended (the thread ran), counted in full as schedstat counts its run
	// delay: WaitPct charges a wait tick by tick as it goes, so the two
	// differ by the waits under way at the tick's ends. The truth check
	// compares this one with schedstat.
	RunDelayPct *float64 `json:"run_delay_pct,omitempty"`
	// RunDelaySpreadPct is how far RunDelayPct may be from schedstat's
	// because the two were not read at the same instant: the probe's
	// growth while the sampler read schedstat (long when the sampler
	// itself waited for a CPU meanwhile), at both ends of the tick.
	RunDelaySpreadPct *float64 `json:"run_delay_spread_pct,omitempty"`
	// DroppedEvents counts the scheduler events the probe could not count
	// (a map full, a run of the program skipped): 0 when estimated.
	DroppedEvents int64 `json:"dropped_events"`
	// UnseenSwitches counts context switches the kernel did not trace
	// (the task leaving a CPU was not the last one seen arriving), each
	// made up for as well as the probe can; 0 when estimated.
	UnseenSwitches int64 `json:"unseen_switches,omitempty"`
	// ProbeCPUPct is the CPU the probe itself used in the kernel, in
	// percent of one CPU, where the kernel counts it (sysctl
	// kernel.bpf_stats_enabled=1); nil elsewhere, and when estimated.
	ProbeCPUPct *float64 `json:"probe_cpu_pct,omitempty"`
	// OthersByCPU is the wait behind other processes on each CPU, measured
	// only: where the neighbours were in the way, which core to free.
	OthersByCPU []CPUWait `json:"others_by_cpu,omitempty"`
	// Schedstat is the truth check of a measured run: the measured
	// threads' run delay from schedstat over the same ticks.
	Schedstat *TruthCheck `json:"schedstat,omitempty"`
	// Waiters are the busiest processes tare check watched, each with
	// whom it waited behind.
	Waiters []Waiter `json:"waiters,omitempty"`

	// Waits are, of a tick measured by the probe, the stretches in which
	// the measured threads waited behind one holder, each of WaitFloor or
	// more (in order of Start): what a request's life overlapped
	// (per-request blame). Kept with the tick, so a stored run can be
	// judged again; empty in a run's Blame.
	Waits []Wait `json:"waits,omitempty"`
	// WaitsLost counts the stretches the probe could not pass on (its
	// ring buffer was full) and those past MaxTickWaits a tick keeps
	// (the shortest go first): their wait is in the tick's sums, not in
	// any request's exposure.
	WaitsLost int64 `json:"waits_lost,omitempty"`
}

// Wait is a stretch of time in which measured threads of one group (the
// system under test's, or tare's) waited for a CPU while one holder ran
// on it: from the later of the holder's start and the first waiter's
// arrival to the next switch on that CPU. Waited sums the waiters' wait
// within it: k threads waiting the whole stretch wait k times its
// length.
type Wait struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	CPU   int       `json:"cpu"`
	// Group is whose threads waited: OwnerSUT or OwnerTare.
	Group string `json:"group"`
	// Owner is who held the CPU meanwhile (Behind.Owner), and Name, PID
	// and Root name it as a Behind does (PID is the holder's process).
	Owner  string        `json:"owner"`
	Name   string        `json:"name,omitempty"`
	PID    int           `json:"pid,omitempty"`
	Root   int           `json:"root,omitempty"`
	Waited time.Duration `json:"waited_ns"`
}

// WaitFloor is the shortest wait the probe passes on as a Wait: shorter
// ones (a wake-up's few microseconds) move no request a user reads in a
// tail, and at 50,000 switches a second would flood the ring buffer.
const WaitFloor = 20 * time.Microsecond

// MaxTickWaits bounds the Waits a tick keeps: at 1 s ticks, room for
// 8,192 stretches of over 100 µs, far more than a 2-CPU host's waits a
// second that matter; past it the shortest are dropped and counted.
const MaxTickWaits = 8192

// Outside reports whether the wait was behind another process: the
// interference a request may be blamed on. Wake-up latency, and waits
// behind the system under test, tare or the kernel's threads, are not:
// kernel threads are not neighbours (the neighbours signal counts only
// other processes), mostly the kernel working for the test itself, the
// softirqs of its loopback and veth traffic.
func (w *Wait) Outside() bool {
	return w.Owner == OwnerOther
}

// Behind is the wait spent behind one owner: another process by its
// service (ProcessShare: a process and the descendants that kept its
// name, a pool's master and its workers), or the system under test, tare,
// kernel threads, or nobody (wake-up). Two processes of one name in other
// families are two Behinds. Processes tare never saw in its process table
// (short-lived ones, gone before it looked) cannot be placed in a family:
// they are one Behind per command, with Root 0.
type Behind struct {
	Owner   string  `json:"owner"`
	Name    string  `json:"name"` // its command; "" for the rest of the other processes, and for wake-up
	PIDs    []int   `json:"pids"` // sorted, at most MaxBlamePIDs
	WaitPct float64 `json:"wait_pct"`
	// Root is, of another process, the root of its service
	// (ProcessShare.PID); 0 for the processes tare did not see, and for
	// the other owners.
	Root int `json:"root,omitempty"`
}

// MaxBlamePIDs bounds the pids a Behind lists: a burst of short-lived
// processes is named by its command, not by its thousand pids.
const MaxBlamePIDs = 16

// CPUWait is a wait on one CPU.
type CPUWait struct {
	CPU     int     `json:"cpu"`
	WaitPct float64 `json:"wait_pct"`
}

// TruthCheck compares the probe's run delay (Blame.RunDelayPct) with
// schedstat's of the same threads, tick by tick.
type TruthCheck struct {
	WaitPct      float64 `json:"wait_pct"`        // schedstat's run delay, over the ticks both measured
	ProbeWaitPct float64 `json:"probe_wait_pct"`  // the probe's, over the same ticks
	Ticks        int     `json:"ticks"`           // ticks both measured
	Disagreed    int     `json:"disagreed_ticks"` // ticks whose two figures differ by more than TruthTolerance
}

// Waiter is one process tare check watched (a service: ProcessShare),
// and whom it waited behind.
type Waiter struct {
	Name    string   `json:"name"`
	PIDs    []int    `json:"pids"`
	Root    int      `json:"root,omitempty"` // the root of its service (ProcessShare.PID)
	WaitPct float64  `json:"wait_pct"`
	Behind  []Behind `json:"behind"`
}

// TruthTolerance is how far the probe's run delay may be from schedstat's
// in a tick: 5 %, or 1 ms of the tick, whichever is more, beyond the
// spread of when the two were read (Blame.RunDelaySpreadPct).
func TruthTolerance(schedstatPct, tickSeconds float64) float64 {
	return max(0.05*schedstatPct, 0.1/max(tickSeconds, 1e-3))
}

// Disagrees reports whether the tick's run delay as the probe measured it
// and as schedstat did differ by more than TruthTolerance; false when
// either is missing.
func (h *HostSample) Disagrees() bool {
	if h.Blame == nil || h.Blame.RunDelayPct == nil || h.RunDelay == nil {
		return false
	}
	spread := 0.0
	if s := h.Blame.RunDelaySpreadPct; s != nil {
		spread = *s
	}
	return math.Abs(*h.Blame.RunDelayPct-*h.RunDelay) > spread+TruthTolerance(*h.RunDelay, h.End.Sub(h.Start).Seconds())
}

// Others is the wait behind other processes, in percent of one CPU.
func (b *Blame) Others() float64 {
	sum := 0.0
	for _, w := range b.Behind {
		if w.Owner == OwnerOther {
			sum += w.WaitPct
		}
	}
	return sum
}

// BlameOf is the tick's blame: measured when the probe counted it, else
// estimated from the ledger; nil when neither run delay nor the ledger
// was measured.
func (h *HostSample) BlameOf() *Blame {
	if h.Blame != nil {
		return h.Blame
	}
	return h.EstimatedBlame()
}

// EstimatedBlame splits the tick's run delay as NeighbourWait does: the
// neighbours' part over the busiest other processes in proportion to
// their CPU (the rest, and the unattributed time, as other processes
// unnamed), the remainder between the system under test and tare in
// proportion to theirs. Nil when run delay or the ledger was not measured.
func (h *HostSample) EstimatedBlame() *Blame {
	if h.RunDelay == nil || h.CPUBy == nil {
		return nil
	}
	by := h.CPUBy
	b := &Blame{Source: BlameEstimated, WaitPct: *h.RunDelay}
	nw := *h.estimatedNeighbourWait()
	if n := by.Neighbours(); nw > 0 && n > 0 {
		named := 0.0
		for _, p := range by.TopOthers {
			b.addShare(p, nw*p.CPUPct/n)
			named += nw * p.CPUPct / n
		}
		if rest := nw - named; rest > 0 {
			b.add(OwnerOther, "", 0, rest)
		}
	}
	own := *h.RunDelay - nw
	switch sut, tare := by.SystemUnderTest, by.Tare; {
	case own <= 0:
	case sut+tare > 0:
		b.add(OwnerSUT, "", 0, own*sut/(sut+tare))
		b.add(OwnerTare, "", 0, own*tare/(sut+tare))
	case h.SUTRunDelay != nil:
		b.add(OwnerSUT, "", 0, own)
	default:
		b.add(OwnerTare, "", 0, own)
	}
	b.Sort()
	return b
}

// add adds pct of wait behind owner and name (and pid, unless 0).
func (b *Blame) add(owner, name string, pid int, pct float64) {
	if pct <= 0 {
		return
	}
	b.AddWait(BehindKey{owner, name, 0}, pid, pct)
}

// AddWait adds pct of wait behind the owner key stands for, and pid (when
// above 0) to its pids, adding its Behind when b has none.
func (b *Blame) AddWait(key BehindKey, pid int, pct float64) {
	w := b.behind(key)
	w.WaitPct += pct
	if pid > 0 {
		w.PIDs = AddPID(w.PIDs, pid)
	}
}

// addShare adds pct of wait behind another process's share of the ledger:
// its service, or its container's busiest process.
func (b *Blame) addShare(p ProcessShare, pct float64) {
	if pct <= 0 {
		return
	}
	w := b.behind(BehindKey{OwnerOther, p.Name, p.PID})
	w.WaitPct += pct
	w.PIDs = AddPID(w.PIDs, p.PID)
	for _, pid := range p.PIDs {
		w.PIDs = AddPID(w.PIDs, pid)
	}
}

// behind returns b's Behind of key, added when there is none.
func (b *Blame) behind(key BehindKey) *Behind {
	i := slices.IndexFunc(b.Behind, func(w Behind) bool { return w.Key() == key })
	if i < 0 {
		b.Behind = append(b.Behind, Behind{Owner: key.Owner, Name: key.Name, PIDs: []int{}, Root: key.Root})
		i = len(b.Behind) - 1
	}
	return &b.Behind[i]
}

// BehindKey is whom a Behind stands for: one owner, and of other
// processes one service (a name and its root), or the processes of a name
// that tare did not see (root 0).
type BehindKey struct {
	Owner, Name string
	Root        int
}

// Key is w's identity: two Behinds of one key are the same owner's.
func (w Behind) Key() BehindKey { return BehindKey{w.Owner, w.Name, w.Root} }

// AddPID adds pid to the sorted pids, unless it is there or MaxBlamePIDs
// are.
func AddPID(pids []int, pid int) []int {
	i, found := slices.BinarySearch(pids, pid)
	if found || len(pids) >= MaxBlamePIDs {
		return pids
	}
	return slices.Insert(pids, i, pid)
}

// Sort puts the largest wait first (then by owner and name, so that the
// order never depends on a map's).
func (b *Blame) Sort() {
	slices.SortFunc(b.Behind, func(x, y Behind) int {
		return cmp.Or(cmp.Compare(y.WaitPct, x.WaitPct), cmp.Compare(x.Owner, y.Owner), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Root, y.Root))
	})
}

// Who names a process owner the way the verdict and the summary do:
// "`sh` (pid 7)", "`sh` (pids 7, 9)", with "…" when the pids were cut at
// MaxBlamePIDs.
func (w Behind) Who() string {
	ids := make([]string, len(w.PIDs))
	for i, p := range w.PIDs {
		ids[i] = strconv.Itoa(p)
	}
	switch {
	case len(ids) == 0:
		return fmt.Sprintf("`%s`", w.Name)
	case len(ids) == 1:
		return fmt.Sprintf("`%s` (pid %s)", w.Name, ids[0])
	case len(ids) >= MaxBlamePIDs:
		return fmt.Sprintf("`%s` (pids %s, …)", w.Name, strings.Join(ids, ", "))
	}
	return fmt.Sprintf("`%s` (pids %s)", w.Name, strings.Join(ids, ", "))
}
