package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tare-dev/tare"
)

// TestPairedRatio: the paired ratio is the geometric mean of the pairs'
// ratios, and noise that falls on both sides of a pair alike (the host
// three times slower in one pair than in another) leaves its interval
// as narrow as the pairs' own disagreement.
func TestPairedRatio(t *testing.T) {
	tests := []struct {
		name      string
		a, b      []float64
		ratio     float64
		maxWidth  float64 // hi − lo at most
		wantErr   error
		wantNoErr bool
	}{
		{name: "B 10% slower under host noise that hits both alike",
			a: []float64{10, 30, 12, 25, 11, 40}, b: []float64{11, 33, 13.2, 27.5, 12.1, 44},
			ratio: 1.1, maxWidth: 1e-9, wantNoErr: true},
		{name: "the same, pairs disagreeing a little",
			a: []float64{10, 30, 12, 25, 14, 22, 18, 16}, b: []float64{10.2, 29.4, 12.1, 25, 14.1, 21.8, 18.1, 16},
			ratio: 1.0, maxWidth: 0.08, wantNoErr: true},
		{name: "one pair", a: []float64{1}, b: []float64{2}, wantErr: ErrTooFew},
		{name: "a latency of 0", a: []float64{1, 0}, b: []float64{2, 2}, wantErr: ErrTooFew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, lo, hi, err := PairedRatio(tt.a, tt.b, 95, 2000, 1)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r-tt.ratio) > 0.01 {
				t.Errorf("ratio %.4f, want %.4f", r, tt.ratio)
			}
			if !(lo <= r && r <= hi) || hi-lo > tt.maxWidth {
				t.Errorf("interval [%.4f, %.4f] around %.4f, want at most %g wide", lo, hi, r, tt.maxWidth)
			}
		})
	}
	// Identical services beside a hog switched on and off: it was on in
	// B's trial of four pairs of six and in neither of two. Which side
	// ran while it was on is the order's chance, and four of six is
	// chance (p = 8/64): no difference. A bootstrap of the six took it
	// for one (B +108 %, 95 % CI +23 to +252 %).
	if _, lo, hi, err := PairedRatio([]float64{10, 10, 10, 10, 10, 10}, []float64{30, 30, 30, 30, 10, 10}, 95, 2000, 1); err != nil || !(lo <= 1 && 1 <= hi) {
		t.Errorf("a hog in B's trial of 4 pairs of 6: interval [%g, %g], %v; want it to hold 1", lo, hi, err)
	}
	// Five pairs cannot bound it at 95 %: 2 sign patterns in 32.
	if _, lo, hi, _ := PairedRatio([]float64{10, 10, 10, 10, 10}, []float64{20, 20, 20, 20, 20}, 95, 2000, 1); lo != 0 || !math.IsInf(hi, 1) {
		t.Errorf("5 pairs all twice as slow: interval [%g, %g], want unbounded", lo, hi)
	}
	if _, _, _, err := PairedRatio([]float64{1, 2}, []float64{1}, 95, 10, 1); err == nil {
		t.Error("2 values of A and 1 of B: no error")
	}
}

// TestPairedRatioCovers: from 8 pairs, the 95% interval of two identical
// variants holds 1 about 95% of the time: at least 92% over 600
// simulated A/B runs whose pairs' log ratios are normal around 0.
func TestPairedRatioCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const runs, pairs = 600, 8
	covered := 0
	for i := range runs {
		a, b := make([]float64, pairs), make([]float64, pairs)
		for k := range a {
			host := 1 + 2*rng.Float64() // the host's noise, on both sides
			a[k] = 10 * host * math.Exp(0.05*rng.NormFloat64())
			b[k] = 10 * host * math.Exp(0.05*rng.NormFloat64())
		}
		_, lo, hi, err := PairedRatio(a, b, 95, 1000, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if lo <= 1 && 1 <= hi {
			covered++
		}
	}
	if share := float64(covered) / runs; share < 0.92 || share > 0.985 {
		t.Errorf("the 95%% interval held 1 in %.1f%% of %d runs of %d pairs, want about 95%%", 100*share, runs, pairs)
	}
}

// TestABRatiosAndNoise: ratios per metric over the pairs that have it on
// both sides, the pairs' own ratios, and the pairs where interference hit
// one side only.
func TestABRatiosAndNoise(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	trial := func(p50, p95 float64, hit bool) tare.ABTrial {
		return tare.ABTrial{Latency: tare.LatencyMS{P50: f(p50), P95: f(p95)}, Hit: hit, PollutedTicksPct: f(map[bool]float64{true: 40}[hit])}
	}
	pairs := []tare.ABPair{
		{N: 1, A: trial(10, 20, false), B: trial(12, 22, false)},
		{N: 2, A: trial(20, 40, true), B: trial(24, 44, false)},
		{N: 3, A: trial(10, 20, true), B: trial(12, 22, true)},
	}
	// Only pair 3 had the scheduler probe: its latencies less each
	// request's outside wait.
	pairs[2].A.Unwaited = &tare.PercentilesMS{P50: f(8), P95: f(16)}
	pairs[2].B.Unwaited = &tare.PercentilesMS{P50: f(10), P95: f(16)}
	for i := range pairs {
		pairs[i].Ratios = PairRatios(&pairs[i])
	}
	if r := pairs[2].Ratios["unwaited_p50"]; r == nil || *r != 1.25 {
		t.Errorf("pair 3's unwaited_p50 ratio %v, want 1.25", r)
	}
	if _, ok := pairs[0].Ratios["unwaited_p50"]; ok {
		t.Error("an unwaited_p50 ratio for trials without the probe")
	}
	if r := pairs[1].Ratios["p95"]; r == nil || *r != 1.1 {
		t.Errorf("pair 2's p95 ratio %v, want 1.1", r)
	}
	if _, ok := pairs[0].Ratios["ttft_p95"]; ok {
		t.Error("a ttft_p95 ratio for trials without a model")
	}
	got := map[string]tare.ABRatio{}
	for _, r := range ABRatios(pairs, 95, 1) {
		got[r.Metric] = r
	}
	if r := got["p50"]; r.Ratio == nil || *r.Ratio != 1.2 || *r.DiffPct != 20 || r.Pairs != 3 {
		t.Errorf("p50: %+v, want ratio 1.2 (+20%%) over 3 pairs", r)
	}
	if r := got["unwaited_p50"]; r.Pairs != 1 || r.Ratio != nil {
		t.Errorf("unwaited_p50: %+v, want 1 pair with it, too few for a ratio", r)
	}
	if r, ok := got["p99"]; ok {
		t.Errorf("p99, which no trial has: %+v, want none", r)
	}
	n := ABNoise(pairs)
	if n.HitA != 2 || n.HitB != 1 || n.OneSided != 1 {
		t.Errorf("noise %+v, want A hit twice, B once, one pair one-sided", n)
	}
	if n.PollutedTicksPctA == nil || *n.PollutedTicksPctA != 26.7 {
		t.Errorf("A's polluted ticks %v, want 26.7", n.PollutedTicksPctA)
	}
}
