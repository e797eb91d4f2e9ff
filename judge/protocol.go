package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// DefaultDivergencePct is the divergence between windows above which the
// host, not the code, is the variable (docs/json.md, Definitions: 30 %).
const DefaultDivergencePct = 30.0

// ProtocolRules are what the protocol verdict is judged against.
type ProtocolRules struct {
	// DivergencePct is the divergence of any metric between windows above
	// which the verdict is host-variable; DefaultDivergencePct when 0.
	DivergencePct float64
	// SLO, when set, is checked in every window for the decision rules.
	SLO SLO
}

// Protocol sets the capacity range and the protocol verdict of a
// comparison whose figures stats.Compare filled in. runs are the compared
// runs' summaries, in the order of c.Runs (the SLO is checked on them).
//
// The verdict is host-variable when any metric diverges by more than the
// threshold: the same load gave another curve at another hour, so no
// scaling decision is valid, and the advice says not to scale up. The
// decision rules against an SLO: off-peak (the quietest host) over it means
// the problem is the code; peak over it while off-peak meets it means add
// headroom or move the workload. The advice never recommends scaling up.
func Protocol(c *tare.Comparison, runs []tare.Summary, rules ProtocolRules) {
	if rules.DivergencePct == 0 {
		rules.DivergencePct = DefaultDivergencePct
	}
	c.Capacity = capacityRange(c)
	v := tare.CompareVerdict{Level: tare.Reproducible, ThresholdPct: rules.DivergencePct, Diverged: []string{}}
	d := c.DivergencePct
	var worst string
	worstPct := math.Inf(-1)
	for _, m := range []struct {
		name string
		pct  *float64
	}{{"avg", d.Avg}, {"p50", d.P50}, {"p95", d.P95}, {"p99", d.P99}, {"throughput", d.Throughput}} {
		if m.pct == nil || *m.pct <= rules.DivergencePct {
			continue
		}
		v.Diverged = append(v.Diverged, m.name)
		if *m.pct > worstPct {
			worst, worstPct = m.name, *m.pct
		}
	}
	// A sweep per window: the capacities themselves diverge.
	if cp := c.Capacity; cp.Metric == "rate_per_s" && cp.GapPct != nil && *cp.GapPct > rules.DivergencePct {
		v.Diverged = append(v.Diverged, "capacity")
		if *cp.GapPct > worstPct {
			worst, worstPct = "capacity", *cp.GapPct
		}
	}
	between := "between these runs"
	if hasWindows(c.Runs) {
		between = "between windows"
	}
	if len(v.Diverged) > 0 {
		v.Level = tare.HostVariable
		v.Advice = append(v.Advice,
			fmt.Sprintf("The host is the variable: no scaling decision is valid from these runs. %s diverges by %.1f%% %s (threshold %g%%): the same load gave another curve at another hour.",
				metricName(worst), worstPct, between, rules.DivergencePct),
			"Do not scale up (or down) on these figures: a bigger host on the same shared infrastructure buys the neighbours' noise too.",
			"For a number to plan on, measure on a dedicated or non-burstable host; meanwhile plan with the capacity range: the worst case (peak) for what users see by day, the typical case (mid) for capacity math.")
	} else {
		measured := d.Avg != nil || d.P50 != nil || d.P95 != nil || d.P99 != nil || d.Throughput != nil
		if measured {
			v.Advice = append(v.Advice, fmt.Sprintf("The runs agree within %g%% on every metric measured in all of them: the figures describe the code, and a scaling decision from them is valid.", rules.DivergencePct))
		} else {
			v.Advice = append(v.Advice, "No metric was measured in every run: nothing to compare, so nothing says the host is the variable either.")
		}
		if polluted := pollutedRuns(c.Runs); len(polluted) > 0 {
			v.Advice = append(v.Advice, fmt.Sprintf("Even so, %s %s polluted: the agreement may be luck; check the steal of each window before trusting it.",
				strings.Join(polluted, ", "), plural(len(polluted), "was", "were")))
		}
	}
	if len(rules.SLO) > 0 {
		v.SLO, v.Advice = sloRules(c, runs, rules.SLO, v.Advice)
	}
	c.Verdict = v
}

// sloRules checks the SLO in every run and applies the decision rules.
func sloRules(c *tare.Comparison, runs []tare.Summary, slo SLO, advice []string) ([]tare.WindowSLO, []string) {
	var checks []tare.WindowSLO
	failed := map[string][]string{} // window → what failed, in words
	var failedRuns []string
	for i := range runs {
		ch := slo.Check(&runs[i])
		name := c.Runs[i].Window
		if name == "" {
			name = runName(c.Runs[i])
		}
		w := tare.WindowSLO{Window: name, Met: Met(ch), Checks: ch}
		checks = append(checks, w)
		if w.Met {
			continue
		}
		for _, ck := range ch {
			if !ck.Met {
				failed[c.Runs[i].Window] = append(failed[c.Runs[i].Window], describe(ck))
			}
		}
		if c.Runs[i].Window == "" {
			failedRuns = append(failedRuns, name)
		}
	}
	quote := func(w string) string { return strings.Join(slices.Compact(failed[w]), ", ") }
	switch {
	case len(failed[tare.WindowOffpeak]) > 0:
		advice = append(advice, fmt.Sprintf("Off-peak, on the quietest host, the SLO %s still fails (%s): the problem is the code, not the host. Profile and fix it; a bigger host would only hide it.", slo, quote(tare.WindowOffpeak)))
	case len(failed[tare.WindowPeak]) > 0 || len(failed[tare.WindowMid]) > 0:
		w := tare.WindowPeak
		if len(failed[w]) == 0 {
			w = tare.WindowMid
		}
		rest := "while off-peak meets it"
		if !windowPresent(c.Runs, tare.WindowOffpeak) {
			rest = "(no off-peak run says whether a quiet host would meet it: run that window before blaming the host)"
		}
		advice = append(advice, fmt.Sprintf("%s fails the SLO %s (%s) %s: add headroom or move the workload (off the busy hours, or to a less crowded or dedicated host).", titleCase(w), slo, quote(w), rest))
	case len(failedRuns) > 0:
		advice = append(advice, fmt.Sprintf("%s failed the SLO %s; without protocol windows tare cannot tell the host from the code: run the same load off-peak (tare protocol) to find out.", strings.Join(failedRuns, ", "), slo))
	default:
		advice = append(advice, fmt.Sprintf("Every run meets the SLO %s, the worst window included: on this host as it is, the SLO holds.", slo))
	}
	return checks, advice
}

// capacityRange is capacity as a range: the sweeps' capacities when the
// protocol swept the rate, else the p95 of each window at the load run.
// Runs without windows give the best and worst run instead.
func capacityRange(c *tare.Comparison) tare.CapacityRange {
	var windows []string
	var values []float64
	if len(c.Sweeps) > 0 {
		for _, s := range c.Sweeps {
			if s.CapacityPerS != nil {
				windows, values = append(windows, s.Window), append(values, *s.CapacityPerS)
			}
		}
		return valueRange("rate_per_s", windows, values, true)
	}
	for _, run := range c.Runs {
		if run.Latency.P95 != nil {
			windows, values = append(windows, run.Window), append(values, *run.Latency.P95)
		}
	}
	return valueRange("p95_ms", windows, values, false)
}

// valueRange is the range of values, each measured in windows[i]: best
// off-peak, worst at peak, typical mid, the medians of each; without any
// window, the best and worst value. higherIsBetter says which end is best
// (a rate, not a latency); the gap is always the worse minus the better.
func valueRange(metric string, windows []string, values []float64, higherIsBetter bool) tare.CapacityRange {
	r := tare.CapacityRange{Metric: metric, From: "windows"}
	byWindow := map[string][]float64{}
	for i, w := range windows {
		byWindow[w] = append(byWindow[w], values[i])
	}
	switch {
	case len(byWindow[tare.WindowPeak]) > 0 || len(byWindow[tare.WindowOffpeak]) > 0 || len(byWindow[tare.WindowMid]) > 0:
		r.Best, r.Worst, r.Typical = medianPtr(byWindow[tare.WindowOffpeak]), medianPtr(byWindow[tare.WindowPeak]), medianPtr(byWindow[tare.WindowMid])
	case len(values) > 0:
		r.From = "runs"
		best, worst := slices.Min(values), slices.Max(values)
		if higherIsBetter {
			best, worst = worst, best
		}
		r.Best, r.Worst = tare.Float(best), tare.Float(worst)
	}
	if r.Best != nil && r.Worst != nil {
		gap := *r.Worst - *r.Best
		if higherIsBetter {
			gap = -gap
		}
		r.Gap = roundTo(gap, 3)
		r.GapPct = gapPct(*r.Best, *r.Worst)
	}
	return r
}

// gapPct is |best − worst| / min(best, worst) in percent: the divergence of
// the two ends of the range.
func gapPct(best, worst float64) *float64 {
	lo := min(best, worst)
	if !(lo > 0) {
		return nil
	}
	return roundTo(100*math.Abs(best-worst)/lo, 1)
}

func medianPtr(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	return tare.Float(median(v))
}

func roundTo(v float64, decimals int) *float64 {
	p := math.Pow(10, float64(decimals))
	return tare.Float(math.Round(v*p) / p)
}

func hasWindows(runs []tare.ComparedRun) bool {
	return slices.ContainsFunc(runs, func(r tare.ComparedRun) bool { return r.Window != "" })
}

func windowPresent(runs []tare.ComparedRun, w string) bool {
	return slices.ContainsFunc(runs, func(r tare.ComparedRun) bool { return r.Window == w })
}

func pollutedRuns(runs []tare.ComparedRun) []string {
	var out []string
	for _, r := range runs {
		if r.Verdict == tare.Polluted {
			out = append(out, cmp.Or(r.Window, runName(r)))
		}
	}
	return slices.Compact(out)
}

// runName names a run in advice: its window, label or id.
func runName(r tare.ComparedRun) string {
	return cmp.Or(r.Label, r.ID, r.Source, "a run")
}

func metricName(m string) string {
	switch m {
	case "throughput":
		return "Throughput"
	case "capacity":
		return "The capacity a sweep found"
	}
	return "Latency " + m
}

func titleCase(w string) string {
	switch w {
	case tare.WindowOffpeak:
		return "Off-peak"
	case "":
		return w
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
