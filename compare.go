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
	// windows; the host is the variable and no scaling decision is valid.
	HostVariable CompareLevel = "host-variable"
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
}

// CapacityRange is capacity as a range, not a number: the best case
// (off-peak), the worst case (peak, what users see by day) and the typical
// case (mid, the baseline for capacity math). The gap between best and worst
// is the cost of shared infrastructure; GapPct is it as a divergence,
// gap / min(best, worst).
type CapacityRange struct {
	// Metric says what the figures are: "p95_ms" (latency at the load
	// that was run: lower is better) or "rate_per_s" (the highest
	// sustainable rate a sweep found: higher is better).
	Metric  string   `json:"metric"`
	Best    *float64 `json:"best"`
	Worst   *float64 `json:"worst"`
	Typical *float64 `json:"typical"`
	Gap     *float64 `json:"gap"`
	GapPct  *float64 `json:"gap_pct"`
	// From says where best and worst came from: "windows" (off-peak and
	// peak), or "runs" (the best and worst run, when they carry no window).
	From string `json:"from"`
}

// CompareVerdict is the protocol verdict with its advice.
type CompareVerdict struct {
	Level        CompareLevel `json:"level"`
	ThresholdPct float64      `json:"threshold_pct"`
	Diverged     []string     `json:"diverged"` // the metrics above the threshold
	Advice       []string     `json:"advice"`
	SLO          []WindowSLO  `json:"slo,omitempty"`
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
