package tare

import "time"

// CompareSchema names the version of the Comparison JSON contract.
const CompareSchema = "tare.compare/v1"

// CompareLevel is the protocol verdict: whether the same load gave the same
// curve in every window.
type CompareLevel string

// The protocol verdict levels.
const (
	// Reproducible: every figure agrees across the windows within the
	// divergence threshold; the figures describe the code.
	Reproducible CompareLevel = "reproducible"
	// HostVariable: some figure diverges beyond the threshold between
	// windows, beyond noise and above the latency floor; the host is the
	// variable and no scaling decision is valid.
	HostVariable CompareLevel = "host-variable"
	// Inconclusive: some figure diverges beyond the threshold, but on too
	// few requests to tell a host effect from chance; the verdict says how
	// many to run.
	Inconclusive CompareLevel = "inconclusive"
)

// Comparison is runs or protocol windows side by side (`tare compare
// --json`): their figures, the divergence of each metric, the statistical
// tests between windows, the capacity range and the protocol verdict. Like
// Summary, keys may be added, never renamed; a figure that could not be
// computed is nil (JSON null), never 0.
type Comparison struct {
	Schema        string          `json:"schema"`
	Protocol      string          `json:"protocol,omitempty"` // the protocol id, when the runs are its windows
	Runs          []ComparedRun   `json:"runs"`
	DivergencePct Divergence      `json:"divergence_pct"`
	Tests         []WindowTest    `json:"tests"`
	Capacity      CapacityRange   `json:"capacity"`
	Verdict       CompareVerdict  `json:"verdict"`
	Warnings      []string        `json:"warnings,omitempty"`
	Sweeps        []SweepCapacity `json:"sweeps,omitempty"` // per window, when the protocol swept the rate
	// Changes are what differed in each window's whose-CPU ledger against
	// the quietest window measured: neighbours, steal, throttling, the
	// generator's lateness, the system under test's CPU per request.
	Changes []WindowChange `json:"changes,omitempty"`
	// Calendar says, of each window chosen from the host's calendar
	// (windows: auto), whether it measured as quiet or as busy as the
	// calendar predicted.
	Calendar []WindowCheck `json:"calendar,omitempty"`
}

// ComparedRun is one run's figures in a comparison.
type ComparedRun struct {
	ID        string    `json:"id"`
	Source    string    `json:"source"` // "store", or the summary file it was read from
	Label     string    `json:"label"`
	Window    string    `json:"window"` // "peak", "offpeak", "mid", or "" outside the protocol
	StartedAt time.Time `json:"started_at"`
	Requests  int       `json:"requests"`
	Latency   LatencyMS `json:"latency_ms"`

	OfferedPerS  *float64   `json:"offered_per_s"`
	AchievedPerS *float64   `json:"achieved_per_s"`
	TokensPerS   *float64   `json:"tokens_per_s"`
	CPUBusyPct   *float64   `json:"cpu_busy_pct"`
	Steal        StealStats `json:"steal_pct"`
	Verdict      Level      `json:"verdict"` // the run's own verdict
	Ticks        int        `json:"ticks"`   // ticks with completions, for the tests
	// Records is how many requests with a latency the tests read from
	// the run's raw records: 0 when there were none (a summary file).
	Records int `json:"records"`

	// The run's side of the whose-CPU ledger, set beside the others'.
	VCPUs            int      `json:"vcpus"`
	CPUBy            *CPUBy   `json:"cpu_by"`             // % of all the host's CPU time; nil when not measured
	NeighbourWaitPct *float64 `json:"neighbour_wait_pct"` // the measured processes' wait behind neighbours
	ThrottledPct     *float64 `json:"throttled_pct"`
	SendLag          LagMS    `json:"send_lag_ms"` // tare's own lateness
	GeneratorCPUPct  *float64 `json:"generator_cpu_pct"`
	// SUTCPUPerRequestMS is the system under test's CPU time per
	// completed request: more of it in one window is more work per
	// request (the code or its data), not the host.
	SUTCPUPerRequestMS *float64 `json:"sut_cpu_ms_per_request"`
}

// Divergence is, per metric, |a − b| / min(a, b) in percent for the pair of
// runs that differ most: with every value positive that is
// (max − min) / min. A metric missing from any run, or zero in one, is nil.
type Divergence struct {
	Avg        *float64 `json:"avg"`
	P50        *float64 `json:"p50"`
	P95        *float64 `json:"p95"`
	P99        *float64 `json:"p99"`
	Throughput *float64 `json:"throughput"` // achieved requests per second
}

// WindowTest is the statistical backing of a difference between two
// windows (or two runs outside the protocol): a Mann-Whitney U test on
// their per-tick p95 and a bootstrap confidence interval for the difference
// of their median tick p95.
type WindowTest struct {
	A      string `json:"a"` // window name, or run id outside the protocol
	B      string `json:"b"`
	TicksA int    `json:"ticks_a"` // ticks with completions
	TicksB int    `json:"ticks_b"`

	U      *float64 `json:"u"`       // Mann-Whitney U of A
	Z      *float64 `json:"z"`       // U standardised: normal approximation, tie- and continuity-corrected
	PValue *float64 `json:"p_value"` // two-sided; from the exact distribution of U for small samples

	// DiffMS is median tick p95 of A − that of B; CILowMS and CIHighMS
	// bound it at ConfidencePct, from a seeded percentile bootstrap.
	DiffMS        *float64 `json:"p95_diff_ms"`
	CILowMS       *float64 `json:"ci_low_ms"`
	CIHighMS      *float64 `json:"ci_high_ms"`
	ConfidencePct float64  `json:"confidence_pct"`
	Warning       string   `json:"warning,omitempty"`

	// Requests is the test on every request's latency; nil when either
	// side has no raw records (a summary file).
	Requests *RequestTest `json:"requests"`
}

// RequestTest compares two windows request by request: a Mann-Whitney U
// test on their latencies, and for each figure (avg, p50, p95, p99) the
// ratio A / B with an interval. The intervals are at ConfidencePct, each
// widened so that all the comparison's intervals together hold at 95 %
// (Bonferroni): a verdict that reads any of them reads them all.
type RequestTest struct {
	RequestsA int      `json:"requests_a"` // requests with a latency, as tested
	RequestsB int      `json:"requests_b"`
	U         *float64 `json:"u"`
	Z         *float64 `json:"z"`
	PValue    *float64 `json:"p_value"`
	// SlowerPct is the effect size of the U test: the chance that a
	// request of A took longer than one of B (ties count half); 50 is no
	// difference.
	SlowerPct *float64 `json:"slower_pct"`
	// ConfidencePct is each interval's level; FamilyConfidencePct, that
	// of all the comparison's intervals together.
	ConfidencePct       float64      `json:"confidence_pct"`
	FamilyConfidencePct float64      `json:"family_confidence_pct"`
	Metrics             []MetricTest `json:"metrics"`
}

// MetricTest is one figure of two windows, from their requests: A / B and
// its interval. Significant says the interval excludes 1.
type MetricTest struct {
	Metric        string   `json:"metric"` // "avg", "p50", "p95" or "p99"
	AMS           *float64 `json:"a_ms"`
	BMS           *float64 `json:"b_ms"`
	Ratio         *float64 `json:"ratio"`
	RatioLow      *float64 `json:"ratio_low"`
	RatioHigh     *float64 `json:"ratio_high"`
	DivergencePct *float64 `json:"divergence_pct"` // |a − b| / min(a, b)
	Significant   bool     `json:"significant"`
}

// CapacityRange is capacity as a range, not a number: the best case, the
// worst case (what users see when the host is busiest) and the typical
// case (the baseline for capacity math), each as measured and named by
// the window it came from. Off-peak is expected to be the best and peak
// the worst; Findings say where the host did otherwise. The gap between
// best and worst is the cost of shared infrastructure; GapPct is it as a
// divergence, gap / min(best, worst).
type CapacityRange struct {
	// The headline figure: "p95_ms" (latency at the load that was run:
	// lower is better) or "rate_per_s" (the highest sustainable rate a
	// sweep found: higher is better).
	MetricRange
	// From says what best and worst were picked from: "windows", or
	// "runs" (when the runs carry no window).
	From string `json:"from"`
	// Metrics are the range of every latency figure (p50_ms, p95_ms,
	// p99_ms), the headline's included.
	Metrics []MetricRange `json:"metrics,omitempty"`
	// Findings say where the measured order is not the expected one
	// (off-peak the quietest, peak the busiest).
	Findings []string `json:"findings,omitempty"`
}

// MetricRange is one figure's range over the windows: the best, the worst
// and the typical value measured (the median window; none with only
// two), each with the window (or run) it came from.
type MetricRange struct {
	Metric        string   `json:"metric"`
	Best          *float64 `json:"best"`
	BestWindow    string   `json:"best_window,omitempty"`
	Worst         *float64 `json:"worst"`
	WorstWindow   string   `json:"worst_window,omitempty"`
	Typical       *float64 `json:"typical"`
	TypicalWindow string   `json:"typical_window,omitempty"`
	Gap           *float64 `json:"gap"` // how much worse the worst is than the best: never negative
	GapPct        *float64 `json:"gap_pct"`
}

// CompareVerdict is the protocol verdict with its advice.
type CompareVerdict struct {
	Level        CompareLevel `json:"level"`
	ThresholdPct float64      `json:"threshold_pct"`
	Diverged     []string     `json:"diverged"` // the metrics that count: above the threshold, beyond noise and the floor
	Advice       []string     `json:"advice"`
	SLO          []WindowSLO  `json:"slo,omitempty"`

	// LatencyFloorMS is the smallest difference of latency that can be a
	// host effect: below it, a divergence of sub-millisecond figures is
	// scheduler noise however large in percent.
	LatencyFloorMS float64 `json:"latency_floor_ms"`
	// Metrics say of every figure whether its divergence counted, and why.
	Metrics []MetricVerdict `json:"metrics,omitempty"`
	// Need is what to run to tell, when the verdict is inconclusive.
	Need *DataNeed `json:"need,omitempty"`
}

// The statuses of a figure in the protocol verdict.
const (
	MetricWithin        = "within"          // divergence within the threshold
	MetricBelowFloor    = "below_floor"     // above the threshold, but the difference is below the latency floor
	MetricTooLittleData = "too_little_data" // above the threshold and the floor, but its interval includes no difference
	MetricDiverged      = "diverged"        // counts: the host is the variable
)

// MetricVerdict is how one figure's divergence was judged, between the two
// windows (or runs) that decided it.
type MetricVerdict struct {
	Metric        string   `json:"metric"`
	Status        string   `json:"status"` // one of the Metric* statuses
	A             string   `json:"a"`      // the window with the higher figure
	B             string   `json:"b"`
	AValue        *float64 `json:"a_value"`
	BValue        *float64 `json:"b_value"`
	DivergencePct *float64 `json:"divergence_pct"`
	// Tested says whether the requests of both were tested; an untested
	// divergence (summary files keep no records) counts on the threshold
	// and the floor alone.
	Tested        bool     `json:"tested"`
	RatioLow      *float64 `json:"ratio_low,omitempty"` // A / B's interval, when tested
	RatioHigh     *float64 `json:"ratio_high,omitempty"`
	ConfidencePct float64  `json:"confidence_pct,omitempty"` // of the interval
	RequestsA     int      `json:"requests_a,omitempty"`     // the requests tested
	RequestsB     int      `json:"requests_b,omitempty"`
	Detail        string   `json:"detail"`
}

// DataNeed is how much to run to tell a divergence from chance.
type DataNeed struct {
	RequestsPerWindow int      `json:"requests_per_window"`
	Seconds           *float64 `json:"seconds"` // at the rate the windows ran; nil when it is not known
	Detail            string   `json:"detail"`
}

// WindowChange is what differed in one window's whose-CPU ledger against
// another's (the quietest measured).
type WindowChange struct {
	Window  string   `json:"window"`
	Against string   `json:"against"`
	Items   []Change `json:"items"` // empty: nothing in the ledger differed
}

// The kinds of a Change.
const (
	ChangeNeighbour     = "neighbour"       // a named process present in one window and not (or less) the other
	ChangeNeighbours    = "neighbours"      // other processes' and unattributed CPU altogether
	ChangeNeighbourWait = "neighbour_wait"  // the measured processes' wait behind neighbours
	ChangeSteal         = "steal"           // the hypervisor's
	ChangeThrottling    = "throttling"      // a cgroup quota's
	ChangeSendLag       = "send_lag"        // tare's own lateness: something held the generator back
	ChangeSUTCPU        = "sut_cpu_per_req" // the system under test's CPU per request: its own work
)

// Change is one figure of the ledger that differed between two windows.
type Change struct {
	Kind    string   `json:"kind"`           // one of the Change* kinds
	Name    string   `json:"name,omitempty"` // the neighbour's name, for ChangeNeighbour
	Value   *float64 `json:"value"`          // in the window
	Against *float64 `json:"against"`        // in the other
	Unit    string   `json:"unit"`           // "% of a CPU", "%", "ms"
	In      string   `json:"in"`             // the window where it was higher
	Detail  string   `json:"detail"`
	// PID is, for ChangeNeighbour, the neighbour's pid (a service's root,
	// ProcessShare.PID) when the same process ran in both windows, or ran
	// in one only; 0 when it stands for every process of the name, paired
	// across windows by name alone (pids are not kept over hours).
	PID int `json:"pid,omitempty"`
}

// WindowSLO is the SLO checked against one window (or run).
type WindowSLO struct {
	Window string     `json:"window"` // window name, or run id outside the protocol
	Met    bool       `json:"met"`
	Checks []SLOCheck `json:"checks"`
}

// SweepSchema names the version of the Sweep JSON contract.
const SweepSchema = "tare.sweep/v1"

// StepStatus is how one step of a capacity sweep went.
type StepStatus string

// The step outcomes.
const (
	StepOK        StepStatus = "ok"        // the SLO held and the system kept up
	StepSLOFailed StepStatus = "slo"       // the SLO failed
	StepSaturated StepStatus = "saturated" // the backlog grew or achieved fell short of offered
)

// Sweep is a capacity search: the arrival rate raised step by step, then
// narrowed, until the SLO failed or the system saturated.
type Sweep struct {
	Schema string      `json:"schema"`
	Target string      `json:"target"`
	Window string      `json:"window,omitempty"`
	SLO    string      `json:"slo"`
	Steps  []SweepStep `json:"steps"`
	// CapacityPerS is the highest offered rate that held, below the lowest
	// that failed; nil when even the first step failed.
	CapacityPerS *float64 `json:"capacity_per_s"`
	// AtLeast is true when no step failed: the capacity is a lower bound.
	AtLeast  bool     `json:"at_least"`
	Stopped  string   `json:"stopped"` // why the search ended, in words
	Warnings []string `json:"warnings,omitempty"`
}

// SweepStep is one load window of a sweep and its outcome.
type SweepStep struct {
	RunID        string     `json:"run_id"`
	OfferedPerS  float64    `json:"offered_per_s"` // the rate asked for
	AchievedPerS *float64   `json:"achieved_per_s"`
	P95MS        *float64   `json:"p95_ms"`
	Status       StepStatus `json:"status"`
	Reasons      []string   `json:"reasons"` // why the step failed, in words; empty when it held
	Verdict      Level      `json:"verdict"` // the step run's own verdict
	Fired        []string   `json:"fired"`   // the names of the verdict's signals that fired
}

// SweepCapacity is the capacity a sweep found in one window.
type SweepCapacity struct {
	Window       string   `json:"window"`
	CapacityPerS *float64 `json:"capacity_per_s"`
	AtLeast      bool     `json:"at_least"`
	Steps        int      `json:"steps"`
}
