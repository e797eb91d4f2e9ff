package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

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
	// LatencyFloor is the smallest difference of latency between windows
	// that can be a host effect; when 0, the largest latency floor the
	// runs' verdicts used, else DefaultThresholds'.
	LatencyFloor time.Duration
}

// Protocol sets the capacity range, what changed between windows and the
// protocol verdict of a comparison whose figures stats.Compare filled in.
// runs are the compared runs' summaries, in the order of c.Runs (the SLO
// is checked on them).
//
// A figure's divergence counts only beyond noise and above the latency
// floor (metricVerdicts). The verdict is host-variable when one counts:
// the same load gave another curve at another hour, so no scaling
// decision is valid, and the advice says not to scale up. It is
// inconclusive when a figure diverges beyond the threshold and the floor
// but on too few requests to tell, with how many to run; reproducible
// otherwise. The decision rules against an SLO: off-peak (the quietest
// host) over it means the problem is the code; peak over it while
// off-peak meets it means add headroom or move the workload. The advice
// never recommends scaling up.
func Protocol(c *tare.Comparison, runs []tare.Summary, rules ProtocolRules) {
	if rules.DivergencePct == 0 {
		rules.DivergencePct = DefaultDivergencePct
	}
	th := rules.DivergencePct
	floor := latencyFloor(runs, rules.LatencyFloor)
	c.Capacity = capacityRange(c, floor, th)
	c.Changes = windowChanges(c, c.Capacity.BestWindow, floor, th)
	v := tare.CompareVerdict{Level: tare.Reproducible, ThresholdPct: th, Diverged: []string{}, LatencyFloorMS: floor}
	v.Metrics = metricVerdicts(c, th, floor)
	var diverged, unsure, belowFloor []tare.MetricVerdict
	for _, m := range v.Metrics {
		switch m.Status {
		case tare.MetricDiverged:
			diverged = append(diverged, m)
			v.Diverged = append(v.Diverged, m.Metric)
		case tare.MetricTooLittleData:
			unsure = append(unsure, m)
		case tare.MetricBelowFloor:
			belowFloor = append(belowFloor, m)
		}
	}
	// A sweep per window: the capacities themselves diverge.
	capacityGap := false
	if cp := c.Capacity; cp.Metric == "rate_per_s" && cp.GapPct != nil && *cp.GapPct > th {
		v.Diverged = append(v.Diverged, "capacity")
		capacityGap = true
	}
	between := "between these runs"
	if hasWindows(c.Runs) {
		between = "between windows"
	}
	switch {
	case len(v.Diverged) > 0:
		v.Level = tare.HostVariable
		v.Advice = append(v.Advice, "The host is the variable: no scaling decision is valid from these runs. "+
			divergedText(c, diverged, capacityGap, between, th, floor))
		v.Advice = append(v.Advice,
			"Do not scale up (or down) on these figures: a bigger host on the same shared infrastructure buys the neighbours' noise too.",
			"For a number to plan on, measure on a dedicated or non-burstable host; meanwhile plan with the capacity range: the worst case for what users see when the host is busiest, the typical case for capacity math.")
	case len(unsure) > 0:
		v.Level = tare.Inconclusive
		v.Need = need(c, v.Metrics)
		m := widest(unsure)
		v.Advice = append(v.Advice, fmt.Sprintf("Too little data to tell whether the host is the variable: %s, but %s includes no difference.%s",
			lowerFirst(higher(m)), interval(&m), explain(c, m.A, m.B, floor, th)))
		run := "Run more requests a window and compare again"
		if v.Need != nil {
			run = "Run " + v.Need.Detail
		}
		v.Advice = append(v.Advice, run+"; until then these figures support no scaling decision, and say nothing against the host either.")
	default:
		measured := len(v.Metrics) > 0
		if measured {
			v.Advice = append(v.Advice, fmt.Sprintf("The runs agree within %g%% on every metric measured in all of them, or differ by less than the latency floor (%s): the figures describe the code, and a scaling decision from them is valid.", th, tare.MSText(floor)))
		} else {
			v.Advice = append(v.Advice, "No metric was measured in every run: nothing to compare, so nothing says the host is the variable either.")
		}
		if len(belowFloor) > 0 {
			m := widest(belowFloor)
			v.Advice = append(v.Advice, fmt.Sprintf("%s differs by %.1f%% between %s and %s, but by %s only, within the latency floor (%s): scheduler noise on a fast service, not a host effect.",
				metricName(m.Metric), *m.DivergencePct, m.A, m.B, tare.MSText(*m.AValue-*m.BValue), tare.MSText(floor)))
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

// divergedText says which figure diverged most, how, and what changed
// between the two windows it diverged between.
func divergedText(c *tare.Comparison, diverged []tare.MetricVerdict, capacityGap bool, between string, th, floor float64) string {
	if len(diverged) == 0 && capacityGap {
		return fmt.Sprintf("%s diverges by %.1f%% %s (threshold %g%%): the same load gave another curve at another hour.",
			metricName("capacity"), *c.Capacity.GapPct, between, th)
	}
	m := widest(diverged)
	if !m.Tested {
		return fmt.Sprintf("%s diverges by %.1f%% %s (threshold %g%%): the same load gave another curve at another hour.%s",
			metricName(m.Metric), *m.DivergencePct, between, th, explain(c, m.A, m.B, floor, th))
	}
	return fmt.Sprintf("%s, %.1f%% apart (threshold %g%%) and beyond noise: %s. The same load gave another curve at another hour.%s",
		higher(m), *m.DivergencePct, th, interval(&m), explain(c, m.A, m.B, floor, th))
}

// higher says how much higher a figure was in one window than the other.
func higher(m tare.MetricVerdict) string {
	return fmt.Sprintf("%s is %.3g× higher in %s than in %s (%s against %s)", metricName(m.Metric), *m.AValue / *m.BValue, m.A, m.B,
		tare.MSText(*m.AValue), tare.MSText(*m.BValue))
}

// lowerFirst is s with its first letter in lower case, to go mid-sentence.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// widest is the verdict of the figure that diverged most.
func widest(ms []tare.MetricVerdict) tare.MetricVerdict {
	return slices.MaxFunc(ms, func(a, b tare.MetricVerdict) int {
		return cmp.Compare(*a.DivergencePct, *b.DivergencePct)
	})
}

// latencyFloor is floor when set, else the largest the runs' verdicts
// used, else the default, in ms.
func latencyFloor(runs []tare.Summary, floor time.Duration) float64 {
	if floor > 0 {
		return ms(floor)
	}
	f := DefaultThresholds().LatencyFloor
	used := time.Duration(0)
	for _, r := range runs {
		if _, ok := r.Thresholds["latency_floor_ms"]; ok {
			used = max(used, ThresholdsOf(r.Thresholds).LatencyFloor)
		}
	}
	if used > 0 {
		f = used
	}
	return ms(f)
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
