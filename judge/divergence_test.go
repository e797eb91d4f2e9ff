package judge

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// tested is a comparison of two windows whose requests were tested: p95
// a ms in peak and b ms in offpeak, its interval lo … hi, on n requests
// each; the other figures agree.
func tested(a, b, lo, hi float64, n int) *tare.Comparison {
	f := tare.Float
	same := func(metric string) tare.MetricTest {
		return tare.MetricTest{Metric: metric, AMS: f(10), BMS: f(10), Ratio: f(1), RatioLow: f(0.95), RatioHigh: f(1.05), DivergencePct: f(0)}
	}
	p95 := tare.MetricTest{Metric: "p95", AMS: f(a), BMS: f(b), Ratio: f(a / b), RatioLow: f(lo), RatioHigh: f(hi),
		DivergencePct: f(math.Round(1000*(max(a, b)/min(a, b)-1)) / 10), Significant: lo > 1 || hi < 1}
	return &tare.Comparison{
		Runs: []tare.ComparedRun{
			{ID: "r1", Window: "peak", Records: n, OfferedPerS: f(50), Latency: tare.LatencyMS{P95: f(a)}},
			{ID: "r2", Window: "offpeak", Records: n, OfferedPerS: f(50), Latency: tare.LatencyMS{P95: f(b)}},
		},
		DivergencePct: tare.Divergence{P95: p95.DivergencePct, Throughput: f(0)},
		Tests: []tare.WindowTest{{A: "peak", B: "offpeak", Requests: &tare.RequestTest{RequestsA: n, RequestsB: n, ConfidencePct: 98.75,
			Metrics: []tare.MetricTest{same("avg"), same("p50"), p95, same("p99")}}}},
	}
}

// TestProtocolLevels: a divergence counts only above the threshold, above
// the latency floor and beyond noise; above threshold and floor but not
// beyond noise, the verdict is inconclusive with what to run.
func TestProtocolLevels(t *testing.T) {
	tests := []struct {
		name   string
		c      *tare.Comparison
		floor  time.Duration
		runs   []tare.Summary
		level  tare.CompareLevel
		status string
		advice string
	}{
		{"35 % beyond noise", tested(13.5, 10, 1.3, 1.4, 3000), 0, nil,
			tare.HostVariable, tare.MetricDiverged, "Latency p95 is 1.35× higher in peak than in offpeak (13.5ms against 10.0ms), 35.0% apart (threshold 30%) and beyond noise: its 98.8% interval ×1.3 … ×1.4 on 3,000 and 3,000 requests"},
		{"lower in peak: the pair turned round", tested(10, 13.5, 0.71, 0.77, 3000), 0, nil,
			tare.HostVariable, tare.MetricDiverged, "Latency p95 is 1.35× higher in offpeak than in peak"},
		{"300 % of sub-millisecond figures", tested(0.8, 0.2, 0.9, 4.5, 300), 0, nil,
			tare.Reproducible, tare.MetricBelowFloor, "Latency p95 differs by 300.0% between peak and offpeak, but by 0.60ms only, within the latency floor (1.00ms)"},
		{"300 % of milliseconds on a few hundred requests", tested(8, 2, 0.9, 4.5, 300), 0, nil,
			tare.Inconclusive, tare.MetricTooLittleData, "Too little data to tell whether the host is the variable: latency p95 is 4× higher in peak than in offpeak (8.00ms against 2.00ms), but its 98.8% interval ×0.9 … ×4.5 on 300 and 300 requests includes no difference."},
		{"within the threshold, beyond noise", tested(12, 10, 1.15, 1.25, 3000), 0, nil,
			tare.Reproducible, tare.MetricWithin, "The runs agree within 30%"},
		{"the runs' own latency floor", tested(13.5, 10, 1.3, 1.4, 3000), 0,
			[]tare.Summary{{Thresholds: map[string]float64{"latency_floor_ms": 5}}, {Thresholds: map[string]float64{"latency_floor_ms": 2}}},
			tare.Reproducible, tare.MetricBelowFloor, "within the latency floor (5.00ms)"},
		{"a floor given", tested(13.5, 10, 1.3, 1.4, 3000), 4 * time.Millisecond, nil,
			tare.Reproducible, tare.MetricBelowFloor, "within the latency floor (4.00ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := tt.runs
			if runs == nil {
				runs = make([]tare.Summary, len(tt.c.Runs))
			}
			Protocol(tt.c, runs, ProtocolRules{LatencyFloor: tt.floor})
			v := tt.c.Verdict
			var p95 tare.MetricVerdict
			for _, m := range v.Metrics {
				if m.Metric == "p95" {
					p95 = m
				}
			}
			all := strings.Join(v.Advice, "\n")
			if v.Level != tt.level || p95.Status != tt.status || !strings.Contains(all, tt.advice) {
				t.Errorf("level %s, p95 %s (%s), advice:\n%s\nwant %s, %s, %q", v.Level, p95.Status, p95.Detail, all, tt.level, tt.status, tt.advice)
			}
			if (v.Level == tare.HostVariable) != (len(v.Diverged) > 0) {
				t.Errorf("level %s with diverged %v", v.Level, v.Diverged)
			}
			if (v.Level == tare.Inconclusive) != (v.Need != nil) {
				t.Errorf("level %s with need %+v", v.Level, v.Need)
			}
			neverScaleUp(t, v.Advice)
		})
	}
}

// TestNeed: what to run grows with the square of the interval's width
// over the difference seen, and is at least twice what was run.
func TestNeed(t *testing.T) {
	c := tested(8, 2, 0.5, 32, 300)
	Protocol(c, make([]tare.Summary, 2), ProtocolRules{})
	n := c.Verdict.Need
	// h = ln(64)/2 = 2.079, z(98.75 %) = 2.498, L = ln 4 = 1.386,
	// n' = 300 · (2.079/2.498 · (2.498 + 0.842)/1.386)² = 1,206 → 1,300.
	if n == nil || n.RequestsPerWindow != 1300 || n.Seconds == nil || *n.Seconds != 26 {
		t.Fatalf("need %+v; want 1,300 requests a window, 26 s at 50/s", n)
	}
	if !strings.Contains(n.Detail, "about 1,300 requests a window (about 26 s at 50/s, as many one-second ticks)") {
		t.Errorf("detail %q", n.Detail)
	}
	c = tested(8, 2, 0.99, 4.2, 300) // nearly told: twice what was run
	Protocol(c, make([]tare.Summary, 2), ProtocolRules{})
	if n := c.Verdict.Need; n == nil || n.RequestsPerWindow != 600 {
		t.Errorf("need %+v; want 600, twice the 300 run", n)
	}
}

// TestUntested: runs without records (summary files) are judged on the
// threshold and the floor alone.
func TestUntested(t *testing.T) {
	f := tare.Float
	c := &tare.Comparison{
		Runs: []tare.ComparedRun{
			{ID: "a", Source: "a.json", Latency: tare.LatencyMS{P95: f(0.9), P99: f(40)}},
			{ID: "b", Source: "b.json", Latency: tare.LatencyMS{P95: f(0.3), P99: f(10)}},
		},
		DivergencePct: tare.Divergence{P95: f(200), P99: f(300)},
	}
	Protocol(c, make([]tare.Summary, 2), ProtocolRules{})
	got := map[string]tare.MetricVerdict{}
	for _, m := range c.Verdict.Metrics {
		got[m.Metric] = m
	}
	if got["p95"].Status != tare.MetricBelowFloor || got["p99"].Status != tare.MetricDiverged || got["p99"].Tested ||
		got["p99"].A != "a.json" || c.Verdict.Level != tare.HostVariable {
		t.Errorf("p95 %+v, p99 %+v, level %s; want p95 below the floor, p99 diverged untested between a.json and b.json", got["p95"], got["p99"], c.Verdict.Level)
	}
}
