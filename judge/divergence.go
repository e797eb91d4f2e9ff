package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// needPower is the chance that the run judge asks for tells a difference
// like the one seen from chance, if it is real.
const needPower = 0.8

// latencyFigures are the latency figures of a comparison, as tests and
// divergences name them.
var latencyFigures = []string{"avg", "p50", "p95", "p99"}

// metricVerdicts judges the divergence of every figure. A latency figure
// counts (diverged) between two windows when it differs by more than the
// threshold, by more than the latency floor, and beyond noise: its
// interval from the test on requests excludes no difference. Where
// every run's records were tested, each pair of windows is judged and the
// one that decides is shown; otherwise (summary files keep no records)
// the two runs furthest apart are, on the threshold and the floor alone.
// Throughput counts on the threshold alone, as it always has.
func metricVerdicts(c *tare.Comparison, thresholdPct, floorMS float64) []tare.MetricVerdict {
	tested := everyRunTested(c)
	var out []tare.MetricVerdict
	for _, figure := range latencyFigures {
		var v *tare.MetricVerdict
		if tested {
			v = testedVerdict(c, figure, thresholdPct, floorMS)
		} else {
			v = untestedVerdict(c, figure, thresholdPct, floorMS)
		}
		if v != nil {
			out = append(out, *v)
		}
	}
	if d := c.DivergencePct.Throughput; d != nil {
		v := tare.MetricVerdict{Metric: "throughput", Status: tare.MetricWithin, DivergencePct: d,
			Detail: fmt.Sprintf("within %g%%", thresholdPct)}
		if *d > thresholdPct {
			v.Status, v.Detail = tare.MetricDiverged, fmt.Sprintf("achieved rates %.1f%% apart (threshold %g%%)", *d, thresholdPct)
		}
		out = append(out, v)
	}
	return out
}

// everyRunTested says whether every run's requests were tested against
// every other window's.
func everyRunTested(c *tare.Comparison) bool {
	if len(c.Tests) == 0 {
		return false
	}
	for _, r := range c.Runs {
		if r.Records < 2 {
			return false
		}
	}
	for _, t := range c.Tests {
		if t.Requests == nil {
			return false
		}
	}
	return true
}

// statusRank orders the statuses: the one that decides a figure comes
// first.
func statusRank(s string) int {
	return map[string]int{tare.MetricDiverged: 0, tare.MetricTooLittleData: 1, tare.MetricBelowFloor: 2, tare.MetricWithin: 3}[s]
}

// testedVerdict judges figure over every pair of windows tested, and
// keeps the pair that decides: the highest status, and among equals the
// largest divergence.
func testedVerdict(c *tare.Comparison, figure string, thresholdPct, floorMS float64) *tare.MetricVerdict {
	var all []tare.MetricVerdict
	for _, t := range c.Tests {
		for _, m := range t.Requests.Metrics {
			if m.Metric != figure || m.Ratio == nil || m.DivergencePct == nil {
				continue
			}
			hi, lo := t.A, t.B
			if *m.Ratio < 1 {
				hi, lo, m = t.B, t.A, *flip(m)
			}
			v := tare.MetricVerdict{Metric: figure, A: hi, B: lo, AValue: m.AMS, BValue: m.BMS, DivergencePct: m.DivergencePct,
				Tested: true, RatioLow: m.RatioLow, RatioHigh: m.RatioHigh, ConfidencePct: t.Requests.ConfidencePct,
				RequestsA: t.Requests.RequestsA, RequestsB: t.Requests.RequestsB}
			if t.A != hi {
				v.RequestsA, v.RequestsB = v.RequestsB, v.RequestsA
			}
			classify(&v, m.Significant, thresholdPct, floorMS)
			all = append(all, v)
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b tare.MetricVerdict) int {
		return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)), cmp.Compare(*b.DivergencePct, *a.DivergencePct))
	})
	return &all[0]
}

// classify sets the status of v, a divergence, and its detail in words.
func classify(v *tare.MetricVerdict, significant bool, thresholdPct, floorMS float64) {
	pct, diff := *v.DivergencePct, *v.AValue-*v.BValue
	switch {
	case pct <= thresholdPct:
		v.Status, v.Detail = tare.MetricWithin, fmt.Sprintf("%.1f%% apart: within %g%%", pct, thresholdPct)
	case diff <= floorMS:
		v.Status, v.Detail = tare.MetricBelowFloor, fmt.Sprintf("%.1f%% apart, but only %s: within the latency floor (%s), scheduler noise, not a host effect",
			pct, tare.MSText(diff), tare.MSText(floorMS))
	case !v.Tested:
		v.Status, v.Detail = tare.MetricDiverged, fmt.Sprintf("%.1f%% apart (untested: no raw records)", pct)
	case !significant:
		v.Status, v.Detail = tare.MetricTooLittleData, fmt.Sprintf("%.1f%% apart, but %s includes no difference: too little data to tell", pct, interval(v))
	default:
		v.Status, v.Detail = tare.MetricDiverged, fmt.Sprintf("%.1f%% apart, beyond noise: %s", pct, interval(v))
	}
}

// interval is v's interval in words.
func interval(v *tare.MetricVerdict) string {
	return fmt.Sprintf("its %.3g%% interval ×%.3g … ×%.3g on %s and %s requests", v.ConfidencePct, *v.RatioLow, *v.RatioHigh,
		thousands(v.RequestsA), thousands(v.RequestsB))
}

// untestedVerdict judges figure between the two runs furthest apart, on
// the threshold and the floor alone.
func untestedVerdict(c *tare.Comparison, figure string, thresholdPct, floorMS float64) *tare.MetricVerdict {
	pct := map[string]*float64{"avg": c.DivergencePct.Avg, "p50": c.DivergencePct.P50, "p95": c.DivergencePct.P95, "p99": c.DivergencePct.P99}[figure]
	if pct == nil {
		return nil
	}
	var hi, lo *tare.ComparedRun
	for i := range c.Runs {
		r := &c.Runs[i]
		v := latencyOf(r.Latency, figure)
		if v == nil {
			return nil
		}
		if hi == nil || *v > *latencyOf(hi.Latency, figure) {
			hi = r
		}
		if lo == nil || *v < *latencyOf(lo.Latency, figure) {
			lo = r
		}
	}
	a, b := latencyOf(hi.Latency, figure), latencyOf(lo.Latency, figure)
	v := tare.MetricVerdict{Metric: figure, A: groupName(*hi), B: groupName(*lo), AValue: a, BValue: b, DivergencePct: pct}
	classify(&v, false, thresholdPct, floorMS)
	return &v
}

func latencyOf(l tare.LatencyMS, figure string) *float64 {
	switch figure {
	case "avg":
		return l.Avg
	case "p50":
		return l.P50
	case "p95":
		return l.P95
	case "p99":
		return l.P99
	}
	return nil
}

// need is how many requests a window would tell the figures judged too
// little data from chance, needPower of the time if the differences are
// what they seemed (stats.RequestsToResolve), at least twice n (what was
// run did not tell). nil when no figure was judged too little data.
func need(c *tare.Comparison, verdicts []tare.MetricVerdict) *tare.DataNeed {
	best := 0
	var figure string
	for _, v := range verdicts {
		if v.Status != tare.MetricTooLittleData || v.RatioLow == nil || v.RatioHigh == nil || v.AValue == nil || v.BValue == nil {
			continue
		}
		m, rt := pairTest(c, v.A, v.B, v.Metric)
		if m == nil || m.Ratio == nil {
			continue
		}
		n := min(rt.RequestsA, rt.RequestsB)
		want, ok := stats.RequestsToResolve(n, *m.Ratio, *v.RatioLow, *v.RatioHigh, rt.ConfidencePct, needPower)
		if !ok {
			continue
		}
		if w := roundUp(max(want, 2*float64(n))); w > best {
			best, figure = w, v.Metric
		}
	}
	if best == 0 {
		return nil
	}
	d := &tare.DataNeed{RequestsPerWindow: best}
	d.Detail = fmt.Sprintf("about %s requests a window", thousands(best))
	if r := offeredRate(c.Runs); r > 0 {
		s := math.Ceil(float64(best) / r)
		d.Seconds = tare.Float(s)
		d.Detail += fmt.Sprintf(" (about %s at %s/s, as many one-second ticks)", seconds(s), trimFloat(r))
	}
	d.Detail += fmt.Sprintf(": enough to tell a %s difference like this one from chance %d times in %d", figure, 4, 5)
	return d
}

// offeredRate is the median offered rate of the runs, 0 when none says.
func offeredRate(runs []tare.ComparedRun) float64 {
	var rates []float64
	for _, r := range runs {
		if r.OfferedPerS != nil && *r.OfferedPerS > 0 {
			rates = append(rates, *r.OfferedPerS)
		}
	}
	if len(rates) == 0 {
		return 0
	}
	return stats.Median(rates)
}

// roundUp rounds n up to two significant figures.
func roundUp(n float64) int {
	if n < 100 {
		return int(math.Ceil(n))
	}
	p := math.Pow(10, math.Floor(math.Log10(n))-1)
	return int(math.Ceil(n/p) * p)
}

// thousands formats n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func seconds(s float64) string {
	if s >= 120 {
		return fmt.Sprintf("%.0f min", math.Ceil(s/60))
	}
	return fmt.Sprintf("%.0f s", s)
}

func trimFloat(v float64) string {
	return fmt.Sprintf("%.3g", v)
}
