package judge

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// capacityRange is capacity as a range, by what was measured: the sweeps'
// capacities when the protocol swept the rate, else the latency of each
// window at the load run (p95 the headline, p50 and p99 beside it). The
// findings say where off-peak was not the best or peak not the worst.
func capacityRange(c *tare.Comparison, floorMS, thresholdPct float64) tare.CapacityRange {
	r := tare.CapacityRange{From: "windows"}
	if !hasWindows(c.Runs) && !slices.ContainsFunc(c.Sweeps, func(s tare.SweepCapacity) bool { return s.Window != "" }) {
		r.From = "runs"
	}
	if len(c.Sweeps) > 0 {
		var names []string
		var values []float64
		for _, s := range c.Sweeps {
			if s.CapacityPerS != nil {
				names, values = append(names, s.Window), append(values, *s.CapacityPerS)
			}
		}
		var of map[string]float64
		r.MetricRange, of = valueRange("rate_per_s", names, values, true)
		r.Findings = findings(c, r.MetricRange, of, "the highest sustainable rate", floorMS, thresholdPct)
		return r
	}
	var p95s map[string]float64
	for _, m := range []struct {
		name  string
		value func(tare.LatencyMS) *float64
	}{
		{"p50_ms", func(l tare.LatencyMS) *float64 { return l.P50 }},
		{"p95_ms", func(l tare.LatencyMS) *float64 { return l.P95 }},
		{"p99_ms", func(l tare.LatencyMS) *float64 { return l.P99 }},
	} {
		var names []string
		var values []float64
		for _, run := range c.Runs {
			if v := m.value(run.Latency); v != nil {
				names, values = append(names, groupName(run)), append(values, *v)
			}
		}
		mr, of := valueRange(m.name, names, values, false)
		if mr.Best != nil {
			r.Metrics = append(r.Metrics, mr)
		}
		if m.name == "p95_ms" {
			r.MetricRange, p95s = mr, of
		}
	}
	r.Findings = findings(c, r.MetricRange, p95s, "p95", floorMS, thresholdPct)
	return r
}

// valueRange is the range of values, each measured in names[i] (a window,
// or a run without one): the runs of one name give their median, then the
// best name's value is the best, the worst's the worst, and the median
// name's (the lower of the two middle ones, with an even count) typical;
// with two names there is no typical. higherIsBetter says which end is
// best (a rate, not a latency); the gap is how much worse the worst is.
// of is each name's value.
func valueRange(metric string, names []string, values []float64, higherIsBetter bool) (r tare.MetricRange, of map[string]float64) {
	r.Metric = metric
	of = map[string]float64{}
	var order []string
	byName := map[string][]float64{}
	for i, n := range names {
		if _, ok := byName[n]; !ok {
			order = append(order, n)
		}
		byName[n] = append(byName[n], values[i])
	}
	if len(order) == 0 {
		return r, of
	}
	type point struct {
		name  string
		value float64
	}
	points := make([]point, len(order))
	for i, n := range order {
		points[i] = point{n, stats.Median(byName[n])}
		of[n] = points[i].value
	}
	// Best first; equal figures keep the order they were measured in.
	slices.SortStableFunc(points, func(a, b point) int {
		if higherIsBetter {
			return cmp.Compare(b.value, a.value)
		}
		return cmp.Compare(a.value, b.value)
	})
	best, worst := points[0], points[len(points)-1]
	r.Best, r.BestWindow = tare.Float(best.value), best.name
	if len(points) > 1 {
		r.Worst, r.WorstWindow = tare.Float(worst.value), worst.name
		r.Gap = roundTo(math.Abs(worst.value-best.value), 3)
		r.GapPct = gapPct(best.value, worst.value)
	}
	if len(points) > 2 {
		t := points[(len(points)-1)/2]
		r.Typical, r.TypicalWindow = tare.Float(t.value), t.name
	}
	return r, of
}

// findings say where the measured order is not the one the protocol
// expects (off-peak the quietest, peak the busiest): itself a finding
// about the host when the difference is beyond noise. A difference the
// test cannot tell from chance is said only when it is above the
// threshold: a tie is no finding.
func findings(c *tare.Comparison, r tare.MetricRange, of map[string]float64, what string, floorMS, thresholdPct float64) []string {
	if r.Best == nil || r.Worst == nil {
		return nil
	}
	var out []string
	check := func(expected, role, measured string) {
		v, ok := of[expected]
		m := of[measured]
		if !ok || expected == measured || v == m {
			return // not measured, or as good (or bad) as the measured end: a tie
		}
		real, why := noise(c, r.Metric, measured, expected, floorMS)
		if !real && 100*(max(v, m)/min(v, m)-1) <= thresholdPct {
			return
		}
		out = append(out, fmt.Sprintf("%s, the window expected to be the %s, was not: %s was %s in %s against %s in %s, %s",
			titleCase(expected), role, what, figure(r.Metric, m), measured, figure(r.Metric, v), expected, why))
	}
	check(tare.WindowOffpeak, "quietest", r.BestWindow)
	check(tare.WindowPeak, "busiest", r.WorstWindow)
	return out
}

// noise says whether the difference of two windows' p95 is beyond noise,
// and in words: a finding about the host's hours, or a difference the
// test cannot tell from chance.
func noise(c *tare.Comparison, metric, a, b string, floorMS float64) (bool, string) {
	if metric == "rate_per_s" {
		return true, "the host's busy hours are not the ones the plan assumed"
	}
	m, _ := pairTest(c, a, b, "p95")
	switch {
	case m == nil:
		return false, "untested (no raw records), so it may be chance"
	case m.AMS != nil && m.BMS != nil && math.Abs(*m.AMS-*m.BMS) <= floorMS:
		return false, fmt.Sprintf("a difference within the latency floor (%s): noise, so nothing to conclude about the host's hours", tare.MSText(floorMS))
	case !m.Significant:
		return false, "a difference the test cannot tell from chance: nothing to conclude about the host's hours yet"
	}
	return true, "beyond noise: a finding about the host, whose busy hours are not the ones the plan assumed"
}

// pairTest is the test of figure between windows a and b, oriented a over
// b, and the test on requests it belongs to; nil when there is none.
func pairTest(c *tare.Comparison, a, b, figure string) (*tare.MetricTest, *tare.RequestTest) {
	for _, t := range c.Tests {
		if t.Requests == nil || !(t.A == a && t.B == b || t.A == b && t.B == a) {
			continue
		}
		for _, m := range t.Requests.Metrics {
			if m.Metric != figure {
				continue
			}
			if t.A == a {
				return &m, t.Requests
			}
			return flip(m), t.Requests
		}
	}
	return nil, nil
}

// flip is m with its sides swapped: B over A.
func flip(m tare.MetricTest) *tare.MetricTest {
	inv := func(p *float64) *float64 {
		if p == nil || *p == 0 {
			return nil
		}
		return roundTo(1 / *p, 3)
	}
	m.AMS, m.BMS = m.BMS, m.AMS
	m.Ratio, m.RatioLow, m.RatioHigh = inv(m.Ratio), inv(m.RatioHigh), inv(m.RatioLow)
	return &m
}

// figure formats a value of metric: a latency in ms or a rate.
func figure(metric string, v float64) string {
	if metric == "rate_per_s" {
		return fmt.Sprintf("%.3g/s", v)
	}
	return tare.MSText(v)
}

// groupName is the name a comparison tests a run under: its window, or
// the run itself outside the protocol (stats.RunName).
func groupName(r tare.ComparedRun) string {
	if r.Window != "" {
		return r.Window
	}
	if r.Source != "" && r.Source != "store" {
		return filepath.Base(r.Source)
	}
	return cmp.Or(r.ID, "?")
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
