package tare

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// CPUShares is how one CPU (or all of them) spent a tick, as percent of the
// tick's total jiffies, computed the way sysstat's mpstat does: guest time is
// already inside user and is left out of the total, and a counter that goes
// backwards counts as 0.
type CPUShares struct {
	CPU     int     `json:"cpu"` // CPU number; -1 for the aggregate of all online CPUs
	User    float64 `json:"user"`
	Nice    float64 `json:"nice"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"` // time the hypervisor gave this vCPU to someone else
	Idle    float64 `json:"idle"`
}

// Busy is the share of the tick the guest itself ran: everything but idle,
// iowait and steal.
func (c CPUShares) Busy() float64 {
	b := 100 - c.Idle - c.IOWait - c.Steal
	if b < 0 {
		return 0
	}
	return b
}

// HostSample is the host's interference over one tick. A source that was not
// available is nil, never 0.
type HostSample struct {
	Start time.Time `json:"start"` // beginning of the tick (previous reading)
	End   time.Time `json:"end"`   // end of the tick (this reading)

	CPU    CPUShares   `json:"cpu"`     // aggregate of online CPUs
	PerCPU []CPUShares `json:"per_cpu"` // online CPUs only, by CPU number

	PSISome   *float64 `json:"psi_some"`  // % of the tick some task waited for a CPU (/proc/pressure/cpu)
	PSIFull   *float64 `json:"psi_full"`  // % of the tick all non-idle tasks waited
	Throttled *float64 `json:"throttled"` // % of the tick the cgroup of the system under test (or tare's) was throttled
	RunDelay  *float64 `json:"run_delay"` // % of the tick the measured processes (system under test and tare) waited on a run queue

	SUTRunDelay  *float64 `json:"sut_run_delay,omitempty"`  // of the system under test alone; nil when it is not known
	TareRunDelay *float64 `json:"tare_run_delay,omitempty"` // of tare alone

	// CPUBy is whose CPU the tick was; nil when the processes could not be read.
	CPUBy *CPUBy `json:"cpu_by,omitempty"`

	// Blame is behind whom the measured processes waited, as the
	// scheduler probe measured it; nil without the probe (BlameOf
	// estimates it then).
	Blame *Blame `json:"blame,omitempty"`

	// PSIIOSome is the % of the tick some task waited for I/O
	// (/proc/pressure/io): a service blocked off CPU while it rose was
	// held up by the host's I/O, not by its own code.
	PSIIOSome *float64 `json:"psi_io_some,omitempty"`
	// IOBy names the processes that read and wrote the most to storage
	// in the tick (read_bytes + write_bytes of /proc/<pid>/io, where it
	// can be read; a child's once it is reaped is its parent's), the
	// busiest first, five at most; nil when none did or it could not be
	// read.
	IOBy []ProcessIO `json:"io_by,omitempty"`
	// FixedWorkUS is how long a small fixed piece of CPU work of tare's
	// own took at the end of the tick, in µs (the fastest of a few tries,
	// on the CPU the sampler ran on): a CPU made slower by a busy sibling
	// on its physical core, a lower clock, or a hypervisor that takes it
	// in slices it reports as no steal takes longer, where no counter
	// shows it. Waiting for a CPU does not count (that is run delay), and
	// its data stays in the core's cache, so memory bandwidth does not
	// slow it. Nil when not timed.
	FixedWorkUS *float64 `json:"fixed_work_us,omitempty"`
}

// ProcessIO is one process's I/O over a tick.
type ProcessIO struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Bytes int64  `json:"bytes"` // read and written, to storage
}

// CPUBy is the whose-CPU ledger of a tick or a run: all of the host's CPU
// time split by owner, in percent of it, summing to 100. It is what tells
// the system under test's own load from a neighbour's.
type CPUBy struct {
	SystemUnderTest float64 `json:"system_under_test"` // its processes and threads, and their descendants
	Tare            float64 `json:"tare"`              // the generator, and what it started as part of the load
	Others          float64 `json:"others"`            // every other process
	Kernel          float64 `json:"kernel"`            // irq, softirq and kernel threads
	Unattributed    float64 `json:"unattributed"`      // busy time no visible process accounts for
	Steal           float64 `json:"steal"`
	Idle            float64 `json:"idle"` // idle and iowait

	// TopOthers are the busiest other services (ProcessShare) and
	// containers, busiest first (five at most).
	TopOthers []ProcessShare `json:"top_others"`
	// SUTNodes splits SystemUnderTest by the nodes of its process graph
	// (SUTSummary.Graph): the proxy, the app server, the database. Nil
	// when the system under test is not known.
	SUTNodes []NodeShare `json:"sut_nodes,omitempty"`
}

// NodeShare is one node of the system under test's process graph in a
// ledger: its part of the host's CPU time, and its threads' wait for a CPU.
type NodeShare struct {
	Node        int      `json:"node"`                    // its index in SUTSummary.Graph, which is stable over a run
	CPUPct      float64  `json:"cpu_pct"`                 // percent of all the host's CPU time, as the rest of CPUBy
	RunDelayPct *float64 `json:"run_delay_pct,omitempty"` // percent of the tick its threads waited on a run queue; nil when not read
}

// ProcessShare is one service's part of the host's CPU time, or one
// container's. A service is a process with the descendants it forked that
// kept its name (a pool's master and its workers, postgres and its
// backends); two processes of one name in other families are two shares.
// The processes of a container are one share, named by the container and
// by its busiest process.
type ProcessShare struct {
	// Name is its command name: comm, or the whole name where the kernel
	// cut comm at 15 bytes; of a container, its busiest process's.
	Name string `json:"name"`
	// PID is the process the share is known by: of a service, its root
	// (the top-most process of its family with that name); of a
	// container, its busiest process.
	PID    int     `json:"pid"`
	CPUPct float64 `json:"cpu_pct"` // percent of all the host's CPU time, as the rest of CPUBy
	// PIDs are, of a service of several processes, its root and those of
	// its processes that used CPU in the share, sorted, at most
	// MaxBlamePIDs; nil for a share of one process, and of a container.
	PIDs []int `json:"pids,omitempty"`

	// Container is the container the process runs in; nil outside one.
	Container *Container `json:"container,omitempty"`
	// Processes is how many of the container's processes used CPU in
	// the share (in its busiest tick, over a run); 0 outside a container.
	Processes int `json:"processes,omitempty"`
	// Children are the command names of the short-lived processes it
	// started whose CPU is in CPUPct: children that exited and were
	// reaped inside the tick, charged to it from its children's time.
	// Only the names tare saw; none when its CPU is all its own.
	Children []string `json:"children,omitempty"`
}

// Who names the share for a person: "`sh` (pid 7)", a service's
// processes "`gunicorn` (pids 100, 101, 102)", or the container with how
// many of its processes ran.
func (p ProcessShare) Who() string {
	if p.Container == nil {
		if len(p.PIDs) > 1 {
			return Behind{Name: p.Name, PIDs: p.PIDs}.Who()
		}
		return fmt.Sprintf("`%s` (pid %d)", p.Name, p.PID)
	}
	if p.Processes > 1 {
		return fmt.Sprintf("%s, %d processes, busiest `%s` (pid %d)", p.Container, p.Processes, p.Name, p.PID)
	}
	return fmt.Sprintf("%s, `%s` (pid %d)", p.Container, p.Name, p.PID)
}

// TopOthersKept is how many of the busiest other processes a CPUBy keeps.
const TopOthersKept = 5

// Busiest sorts ps busiest first (the lower pid first among equals) and
// returns the TopOthersKept first, in ps's array.
func Busiest(ps []ProcessShare) []ProcessShare {
	slices.SortFunc(ps, func(a, b ProcessShare) int {
		return cmp.Or(cmp.Compare(b.CPUPct, a.CPUPct), cmp.Compare(a.PID, b.PID))
	})
	n := min(len(ps), TopOthersKept)
	return ps[:n:n]
}

// Neighbours is the CPU that others held while anyone might have wanted
// it: other processes and unattributed busy time, which is where other
// containers show up.
func (c *CPUBy) Neighbours() float64 { return c.Others + c.Unattributed }

// NeighbourWait is the CPU that the system under test and tare lost in
// the tick because something outside the test held it, in percent of one
// CPU: their wait behind other processes where the scheduler probe
// measured it (Blame), else estimated. Measured, it is capped as the
// estimate is, at the CPU the other processes used (the ledger's): with k
// of the measured threads waiting on a CPU, a neighbour's millisecond
// there is k milliseconds of their wait, but one of CPU they lost; a
// saturated service queueing behind its own threads would otherwise turn
// a quiet host's background into pollution. Nil when neither was measured.
func (h *HostSample) NeighbourWait() *float64 {
	if h.Blame != nil {
		w := h.Blame.Others()
		if h.CPUBy != nil {
			w = min(w, h.CPUBy.Neighbours()*float64(max(len(h.PerCPU), 1)))
		}
		return Float(w)
	}
	return h.estimatedNeighbourWait()
}

// estimatedNeighbourWait estimates NeighbourWait from the ledger: the
// measured processes' run delay, scaled by the neighbours' part of the CPU
// time that processes used, and never more than the CPU the neighbours
// actually used:
//
//	neighbour wait = min(run delay × neighbours / (neighbours + system under test + tare),
//	                     neighbours × CPUs)
//
// A service that waits behind its own threads, or behind tare, has no
// neighbour wait however long it waits: that is its own load. The cap keeps
// a saturated service's long waits from turning a quiet host's background
// (a daemon's 1 %) into pollution. Nil when run delay or the ledger was not
// measured.
func (h *HostSample) estimatedNeighbourWait() *float64 {
	if h.RunDelay == nil || h.CPUBy == nil {
		return nil
	}
	n := h.CPUBy.Neighbours()
	all := n + h.CPUBy.SystemUnderTest + h.CPUBy.Tare
	if all <= 0 {
		return Float(0)
	}
	cpus := float64(max(len(h.PerCPU), 1))
	return Float(min(*h.RunDelay*n/all, n*cpus))
}

// DefaultPollutedThreshold is the share (%) of steal, throttling or wait
// behind neighbours above which a tick is polluted (HostSample.Polluted)
// unless a run sets another: the verdict's default (judge's
// Thresholds.Steal), the recorder's, and the report's for a summary that
// recorded none (Summary.PollutedThreshold).
const DefaultPollutedThreshold = 10

// PollutedThresholdKey is the key of Summary.Thresholds that records the
// polluted-tick threshold a run's verdict used. It says steal because the
// same figure thresholds a tick's steal, but it thresholds the tick's
// throttling and its wait behind neighbours too.
const PollutedThresholdKey = "steal_pct"

// The length of a tick, the time slice every figure is kept per.
const (
	// DefaultTick is the tick when a run sets none.
	DefaultTick = time.Second
	// MinTick is the shortest tick: /proc/stat counts in 10 ms jiffies, so
	// a 100 ms tick already quantises each CPU's shares to 10 %, and below
	// it every share is noise.
	MinTick = 100 * time.Millisecond
)

// Polluted reports whether interference from outside the test exceeded
// threshold (percent) in the tick: steal, throttling, or the measured
// processes waiting behind neighbours. CPU pressure alone does not pollute
// a tick: it cannot tell the system under test waiting for its own threads
// from waiting for a neighbour.
func (h *HostSample) Polluted(threshold float64) bool {
	if h.CPU.Steal > threshold || h.Throttled != nil && *h.Throttled > threshold {
		return true
	}
	w := h.NeighbourWait()
	return w != nil && *w > threshold
}

// MaxCPUSteal is the highest steal of any single CPU in the sample: the
// aggregate hides one starved vCPU.
func (h *HostSample) MaxCPUSteal() float64 {
	m := h.CPU.Steal
	for _, c := range h.PerCPU {
		if c.Steal > m {
			m = c.Steal
		}
	}
	return m
}

// Env describes the machine a run measured, recorded once per run.
type Env struct {
	Hostname   string `json:"hostname"`
	VCPUs      int    `json:"vcpus"`
	Kernel     string `json:"kernel"`
	ClkTck     int    `json:"clk_tck"`
	Cgroup     string `json:"cgroup"` // "v1", "v2" or "" when unknown
	PSI        bool   `json:"psi"`
	Hypervisor *bool  `json:"hypervisor"` // nil when unknown
	// HostProcesses says whether /proc listed the host's processes (its
	// PID namespace is the host's: kthreadd is pid 2). False in a container
	// with a PID namespace of its own, where other processes' CPU is busy
	// time no visible process accounts for; nil when unknown.
	HostProcesses *bool `json:"host_processes"`
	Pod           *Pod  `json:"pod,omitempty"` // the Kubernetes pod tare ran in; nil outside one
	// Container is the container tare ran in, as far as it could tell
	// from inside; nil outside one.
	Container *Container `json:"container,omitempty"`
}

// Pod is the Kubernetes pod a run was measured from: what the downward
// API told tare (TARE_POD_NAME, TARE_POD_NAMESPACE, TARE_POD_UID, and
// TARE_HOSTNAME, the node) and what its cgroup path says. A field nobody
// told tare, and the cgroup a cgroup namespace hides, are "".
type Pod struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
	Node      string `json:"node"`   // spec.nodeName: the host the pod ran on
	Cgroup    string `json:"cgroup"` // the pod's cgroup path, like /kubepods/burstable/pod<uid>/<container>
	QoS       string `json:"qos"`    // "Guaranteed", "Burstable" or "BestEffort", read off the cgroup path
}

// Mid is the middle of the sample, the instant that places it on a run's
// timeline (the tick, the stage, the warm-up it belongs to); End when it
// has no Start.
func (h *HostSample) Mid() time.Time {
	if !h.Start.IsZero() && h.End.After(h.Start) {
		return h.Start.Add(h.End.Sub(h.Start) / 2)
	}
	return h.End
}
