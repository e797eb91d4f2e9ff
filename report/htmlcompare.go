package report

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
)

// Comparison is what the report shows of runs set side by side: the
// windows of the three-window protocol, or any runs. It is the report's
// own input, kept small so that filling it from tare compare's result is
// a few lines in the command; every part but Windows is optional and
// left out of the page when empty.
type Comparison struct {
	// Headline says in words what the comparison found, e.g. "p95
	// diverges by 112% between the windows: the server is the variable".
	Headline     string
	Diverged     bool     // some metric diverged beyond Threshold, beyond noise and the latency floor
	Inconclusive bool     // some metric diverged, on too little data to tell
	Advice       []string // the decision rules that apply, in words
	// Findings say where the measured order of the windows is not the
	// expected one; Changes, what differed in their whose-CPU ledgers.
	Findings []string
	Changes  []string
	// Calendar says, of each window chosen from the host's calendar,
	// whether it measured as the calendar predicted.
	Calendar []string

	Windows []Window // in the order the page shows them

	// Divergence per metric, |a − b| / min(a, b) between the windows, in
	// percent; a metric above Threshold (30 % by default) means the host
	// is the variable and no scaling decision is valid.
	Divergence []Divergence
	Threshold  float64

	Capacity *Capacity
	Sweep    []SweepPoint
	SLOMS    *float64 // the latency objective drawn on the sweep curve, ms
}

// Window is one side of a comparison.
type Window struct {
	Name string // "peak", "offpeak", "mid", or a run's label
	Run  *Run
}

// Divergence is how far the windows disagree on one metric.
type Divergence struct {
	Metric   string     `json:"metric"`  // e.g. "p95_ms"
	Values   []*float64 `json:"values"`  // per window, in Windows order
	Percent  *float64   `json:"percent"` // the divergence, %; nil when a window lacks the figure
	Diverged bool       `json:"diverged"`
	// Status is how the verdict judged it (tare.MetricDiverged, …); ""
	// when it was not judged.
	Status string `json:"status,omitempty"`
}

// Capacity is the capacity range: best case, worst case (what users see
// when the host is busiest) and typical (the baseline for capacity
// maths), each as measured, with the window it came from. The gap between
// best and worst is the cost of shared infrastructure.
type Capacity struct {
	Unit    string        `json:"unit"` // e.g. "req/s at p95<=2s"
	Best    CapacityPoint `json:"best"`
	Typical CapacityPoint `json:"typical"`
	Worst   CapacityPoint `json:"worst"`
}

// CapacityPoint is one end of the capacity range.
type CapacityPoint struct {
	Window string   `json:"window"`
	Value  *float64 `json:"value"`
}

// SweepPoint is one step of a capacity sweep: a rate tried in a window
// and the latency it gave.
type SweepPoint struct {
	Window   string   `json:"window"`
	RatePerS float64  `json:"rate_per_s"`
	P95MS    *float64 `json:"p95_ms"`
	MetSLO   bool     `json:"met_slo"`
}

// ComparisonOf is the page's view of a judged comparison of runs, which
// must be the runs it compared, in its order.
func ComparisonOf(c *tare.Comparison, runs []*Run) *Comparison {
	out := &Comparison{
		Diverged:     c.Verdict.Level == tare.HostVariable,
		Inconclusive: c.Verdict.Level == tare.Inconclusive,
		Advice:       c.Verdict.Advice,
		Threshold:    c.Verdict.ThresholdPct,
		Findings:     c.Capacity.Findings,
	}
	for _, ch := range c.Changes {
		if len(ch.Items) == 0 {
			out.Changes = append(out.Changes, fmt.Sprintf("%s: nothing in the ledger differed from %s", ch.Window, ch.Against))
		}
		for _, it := range ch.Items {
			out.Changes = append(out.Changes, ch.Window+": "+it.Detail)
		}
	}
	for _, wc := range c.Calendar {
		out.Calendar = append(out.Calendar, wc.Verdict)
	}
	status := map[string]string{}
	for _, m := range c.Verdict.Metrics {
		status[m.Metric] = m.Status
	}
	if len(c.Verdict.Advice) > 0 {
		out.Headline = c.Verdict.Advice[0]
	}
	for i, r := range c.Runs {
		if i >= len(runs) {
			break
		}
		out.Windows = append(out.Windows, Window{Name: cmp.Or(r.Window, r.Label, r.ID), Run: runs[i]})
	}
	metric := func(name string, pct *float64, value func(tare.ComparedRun) *float64) {
		judged := status[strings.TrimSuffix(strings.TrimSuffix(name, "_ms"), "_per_s")]
		d := Divergence{Metric: name, Percent: pct, Status: judged, Diverged: judged == tare.MetricDiverged}
		if len(c.Verdict.Metrics) == 0 {
			d.Diverged = pct != nil && *pct > c.Verdict.ThresholdPct // judged before figures had statuses
		}
		for _, r := range c.Runs {
			d.Values = append(d.Values, value(r))
		}
		out.Divergence = append(out.Divergence, d)
	}
	dv := c.DivergencePct
	metric("avg_ms", dv.Avg, func(r tare.ComparedRun) *float64 { return r.Latency.Avg })
	metric("p50_ms", dv.P50, func(r tare.ComparedRun) *float64 { return r.Latency.P50 })
	metric("p95_ms", dv.P95, func(r tare.ComparedRun) *float64 { return r.Latency.P95 })
	metric("p99_ms", dv.P99, func(r tare.ComparedRun) *float64 { return r.Latency.P99 })
	metric("throughput_per_s", dv.Throughput, func(r tare.ComparedRun) *float64 { return r.AchievedPerS })
	if cp := c.Capacity; cp.Best != nil || cp.Worst != nil {
		out.Capacity = &Capacity{
			Unit:    cp.Metric,
			Best:    CapacityPoint{Window: cp.BestWindow, Value: cp.Best},
			Typical: CapacityPoint{Window: cp.TypicalWindow, Value: cp.Typical},
			Worst:   CapacityPoint{Window: cp.WorstWindow, Value: cp.Worst},
		}
	}
	return out
}
