package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestMannWhitneyU checks the test against small cases worked by hand:
// U by counting pairs, σ² from the tie groups, z with the continuity
// correction towards the mean, and p from the exact distribution of U (all
// the ways to place x's values among the pooled ranks, equally likely).
func TestMannWhitneyU(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		u, z float64
		p    float64
	}{
		{
			// U = 0 (no x above any y); μ = 4.5; σ² = 9/12·7 = 5.25;
			// z = (0 − 4.5 + 0.5)/√5.25. One of the C(6,3) = 20
			// placements gives U = 0, one U = 9: p = 2/20. (The normal
			// approximation said 0.0809.)
			name: "separated", x: []float64{1, 2, 3}, y: []float64{4, 5, 6},
			u: 0, z: -4 / math.Sqrt(5.25), p: 0.1,
		},
		{
			// Ranks 1, 3, 3 | 3, 5: R = 7, U = 1; ties 1, 3, 1 give
			// Σ(t³−t) = 24; σ² = 6/12·(6 − 24/20) = 2.4; z = −1.5/√2.4.
			// Of the C(5,3) = 10 placements over ranks 1, 3, 3, 3, 5,
			// three give U = 1, four U = 3, three U = 5: p = 2·3/10.
			// (The normal approximation said 0.3329.)
			name: "ties", x: []float64{1, 2, 2}, y: []float64{2, 3},
			u: 1, z: -1.5 / math.Sqrt(2.4), p: 0.6,
		},
		{
			// Every x above every y: U = 8; μ = 4; σ² = 8/12·7; z = 3.5/σ.
			// One of C(6,2) = 15 placements gives U = 8: p = 2/15.
			// (The normal approximation said 0.1052.)
			name: "x larger, unequal sizes", x: []float64{10, 20, 30, 40}, y: []float64{1, 2},
			u: 8, z: 3.5 / math.Sqrt(8.0/12*7), p: 2.0 / 15,
		},
		{
			// U = μ: the distribution is symmetric about it; p = 1.
			name: "interleaved", x: []float64{1, 4}, y: []float64{2, 3},
			u: 2, z: 0, p: 1,
		},
		{
			name: "every value ties", x: []float64{5, 5}, y: []float64{5, 5, 5},
			u: 3, z: 0, p: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MannWhitneyU(tt.x, tt.y)
			if err != nil {
				t.Fatal(err)
			}
			if !closeTo(got.U, tt.u, 1e-12) || !closeTo(got.Z, tt.z, 1e-12) || !closeTo(got.P, tt.p, 1e-12) {
				t.Errorf("U %g z %g p %g; want U %g z %g p %g", got.U, got.Z, got.P, tt.u, tt.z, tt.p)
			}
			// Swapping the samples mirrors U and z and keeps p.
			sw, _ := MannWhitneyU(tt.y, tt.x)
			if !closeTo(sw.U, float64(len(tt.x)*len(tt.y))-tt.u, 1e-12) || !closeTo(sw.Z, -tt.z, 1e-12) || !closeTo(sw.P, tt.p, 1e-12) {
				t.Errorf("swapped: U %g z %g p %g", sw.U, sw.Z, sw.P)
			}
		})
	}
	if _, err := MannWhitneyU(nil, []float64{1}); !errors.Is(err, ErrTooFew) {
		t.Errorf("empty sample: %v, want ErrTooFew", err)
	}
}

// TestMannWhitneyULarge: past the exact limit (60 values a side, no ties)
// p is the normal approximation's, p = erfc(|z|/√2), the same z.
func TestMannWhitneyULarge(t *testing.T) {
	var x, y []float64
	for i := range 60 {
		x = append(x, float64(2*i))    // 0, 2, …, 118
		y = append(y, float64(2*i+41)) // 41, 43, …, 159
	}
	got, err := MannWhitneyU(x, y)
	if err != nil {
		t.Fatal(err)
	}
	// x above y: x = 2i > 2j+41 for j < i − 20, so Σ over i of max(0, i−20)
	// = 0 + … + 39 = 780 pairs.
	const u, mu = 780.0, 1800.0
	z := (u - mu + 0.5) / math.Sqrt(3600.0/12*121)
	if !closeTo(got.U, u, 1e-12) || !closeTo(got.Z, z, 1e-12) || !closeTo(got.P, math.Erfc(math.Abs(z)/math.Sqrt2), 1e-12) {
		t.Errorf("U %g z %g p %g; want U %g z %g p %g", got.U, got.Z, got.P, u, z, math.Erfc(math.Abs(z)/math.Sqrt2))
	}
}

func TestBootstrapMedianDiff(t *testing.T) {
	x := []float64{110, 120, 95, 130, 105, 118, 122, 99, 101, 125}
	y := []float64{50, 55, 48, 60, 52, 58, 49, 51, 57, 53}
	diff, lo, hi, err := BootstrapMedianDiff(x, y, 95, 2000, 7)
	if err != nil {
		t.Fatal(err)
	}
	// Medians: x (110+118)/2 = 114, y (52+53)/2 = 52.5.
	if diff != 61.5 || !(lo <= diff && diff <= hi) || lo <= 0 {
		t.Errorf("diff %g CI [%g, %g]; want 61.5 inside a CI above 0", diff, lo, hi)
	}
	d2, lo2, hi2, _ := BootstrapMedianDiff(x, y, 95, 2000, 7)
	if d2 != diff || lo2 != lo || hi2 != hi {
		t.Errorf("same seed, different interval: [%g, %g] then [%g, %g]", lo, hi, lo2, hi2)
	}
	if _, _, _, err := BootstrapMedianDiff([]float64{1}, y, 95, 10, 1); !errors.Is(err, ErrTooFew) {
		t.Errorf("one value: %v, want ErrTooFew", err)
	}
	// Two samples from one distribution: the interval covers 0.
	_, lo, hi, _ = BootstrapMedianDiff(x[:5], x[5:], 95, 2000, 1)
	if lo > 0 || hi < 0 {
		t.Errorf("same distribution: CI [%g, %g] does not cover 0", lo, hi)
	}
}

// TestDivergenceSeed: the seed's two runs diverge by 100 % (avg), 140.9 %
// (p95) and 304.5 % (p99).
func TestDivergenceSeed(t *testing.T) {
	f := tare.Float
	tests := []struct {
		name string
		vals []*float64
		want *float64
	}{
		{"avg", []*float64{f(1840), f(920)}, f(100)},
		{"p95", []*float64{f(4120), f(1710)}, f(140.9)},
		{"p99", []*float64{f(9870), f(2440)}, f(304.5)},
		{"order does not matter", []*float64{f(2440), f(9870)}, f(304.5)},
		{"largest pair of three", []*float64{f(100), f(130), f(90)}, f(44.4)},
		{"equal", []*float64{f(5), f(5)}, f(0)},
		{"missing", []*float64{f(5), nil}, nil},
		{"zero", []*float64{f(0), f(5)}, nil},
		{"one run", []*float64{f(5)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DivergencePct(tt.vals)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("got %v, want %v", fmtPtr(got), fmtPtr(tt.want))
			}
		})
	}
}

// timeline is n one-second ticks whose p95 is p95(i) ms.
func timeline(n int, p95 func(i int) float64) []tare.Tick {
	var out []tare.Tick
	for i := range n {
		out = append(out, tare.Tick{Start: t0.Add(time.Duration(i) * time.Second), Completions: 10, P95: msd(p95(i))})
	}
	return out
}

func TestCompare(t *testing.T) {
	f := tare.Float
	summary := func(id, window string, p95 float64) tare.Summary {
		return tare.Summary{
			Run:     tare.Run{ID: id, Window: window, Protocol: "p1"},
			Latency: tare.LatencyMS{Avg: f(p95 / 2), P50: f(p95 / 3), P95: f(p95), P99: f(2 * p95)},
			Rate:    tare.Rate{Achieved: f(10)},
		}
	}
	slowFast := func(base float64) func(int) float64 {
		return func(i int) float64 { return base + float64(i%5) }
	}
	c := Compare([]CompareInput{
		{Summary: summary("r1", "peak", 400), Ticks: timeline(20, slowFast(400)), Latencies: lognormal(200, 400, 0.3, 1), Source: "store"},
		{Summary: summary("r2", "offpeak", 100), Ticks: timeline(20, slowFast(100)), Latencies: lognormal(200, 100, 0.3, 2), Source: "store"},
		{Summary: summary("r3", "offpeak", 110), Ticks: timeline(5, slowFast(110)), Latencies: lognormal(50, 110, 0.3, 3), Source: "store"},
		{Summary: summary("", "mid", 200), Source: "mid.json"},
	})
	if c.Schema != tare.CompareSchema || c.Protocol != "p1" || len(c.Runs) != 4 {
		t.Fatalf("schema %q protocol %q runs %d", c.Schema, c.Protocol, len(c.Runs))
	}
	if d := c.DivergencePct; *d.P95 != 300 || *d.Avg != 300 || *d.Throughput != 0 {
		t.Errorf("divergence p95 %v avg %v throughput %v; want 300, 300, 0", fmtPtr(d.P95), fmtPtr(d.Avg), fmtPtr(d.Throughput))
	}
	// Two windows with timelines (offpeak pooled from two runs): one test.
	if len(c.Tests) != 1 {
		t.Fatalf("tests %+v, want peak vs offpeak only", c.Tests)
	}
	w := c.Tests[0]
	if w.A != "peak" || w.B != "offpeak" || w.TicksA != 20 || w.TicksB != 25 {
		t.Errorf("test %s vs %s with %d and %d ticks; want peak vs offpeak, 20 and 25", w.A, w.B, w.TicksA, w.TicksB)
	}
	if w.PValue == nil || *w.PValue > 0.001 || *w.DiffMS < 250 || *w.CILowMS > *w.DiffMS || *w.CIHighMS < *w.DiffMS {
		t.Errorf("test %+v: want a tiny p-value and a difference near 300 ms inside its interval", w)
	}
	if w.Warning != "" {
		t.Errorf("20 and 25 ticks: unexpected warning %q", w.Warning)
	}
	// The offpeak runs' requests pooled: 250 of them.
	if r := w.Requests; r == nil || r.RequestsA != 200 || r.RequestsB != 250 || !metricOf(t, r, "p50").Significant {
		t.Errorf("test on requests %+v: want 200 against 250, p50 beyond noise", r)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "mid.json") {
		t.Errorf("warnings %q: want one naming mid.json, which has no timeline", c.Warnings)
	}
}

func TestCompareFewTicks(t *testing.T) {
	in := []CompareInput{
		{Summary: tare.Summary{Run: tare.Run{ID: "a"}}, Ticks: timeline(4, func(i int) float64 { return 10 })},
		{Summary: tare.Summary{Run: tare.Run{ID: "b"}}, Ticks: timeline(12, func(i int) float64 { return 20 })},
		{Summary: tare.Summary{Run: tare.Run{ID: "c"}}, Ticks: []tare.Tick{}},
	}
	c := Compare(in)
	if len(c.Tests) != 3 {
		t.Fatalf("tests %+v: want a, b, c pairwise", c.Tests)
	}
	if w := c.Tests[0]; !strings.Contains(w.Warning, "only 4 ticks with completions in a") || w.PValue == nil {
		t.Errorf("a vs b: %+v; want a p-value and a warning about 4 ticks", w)
	}
	if w := c.Tests[1]; w.PValue != nil || !strings.Contains(w.Warning, "no test") {
		t.Errorf("a vs c (no ticks): %+v; want no test and a warning", w)
	}
}

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func fmtPtr(p *float64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// TestTickVariation checks the permutation test on cases worked out by
// hand: groups that are each other's shuffles are not varied; groups
// sorted apart are as varied as values can be, so no shuffle of them
// matches (p below 1/(shuffles+1)); ties share their mid rank.
func TestTickVariation(t *testing.T) {
	d := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	var apart, alike [][]time.Duration
	for k := range 10 {
		apart = append(apart, d(10*k+1, 10*k+2, 10*k+3, 10*k+4))
		alike = append(alike, d(k+1, k+11, k+21, k+31))
	}
	v := TickVariation(apart, Permutations, 0.01)
	if v.Hits != 0 || v.Shuffles != Permutations || v.Requests != 40 || v.Ticks != 10 || v.PText() != "< 0.001" {
		t.Errorf("groups sorted apart: %+v (%s), want no shuffle as varied of %d, p < 0.001", v, v.PText(), Permutations)
	}
	v = TickVariation(alike, Permutations, 0.01)
	if !v.Stopped || v.P < 0.5 {
		t.Errorf("groups alike: %+v, want an early stop at a large p", v)
	}
	if got := midRanks(d(5, 1, 5, 3, 5)); !slices.Equal(got, []float64{4, 1, 4, 2, 4}) {
		t.Errorf("midRanks = %v, want [4 1 4 2 4]", got)
	}
	if v := TickVariation([][]time.Duration{d(1, 2, 3), nil}, Permutations, 0.01); v.Ticks != 1 || v.P != 1 {
		t.Errorf("one group: %+v, want p = 1: nothing to compare", v)
	}
}

// BenchmarkTickVariation is the test's worst case: a full sample of
// SampleSize requests over 1,000 ticks, so varied that every
// shuffle is drawn.
func BenchmarkTickVariation(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	groups := make([][]time.Duration, 1000)
	for i := range 8192 {
		k := i % 1000
		groups[k] = append(groups[k], time.Duration(float64(time.Millisecond)*(1+float64(k)/100)*math.Exp(0.5*rng.NormFloat64())))
	}
	for b.Loop() {
		if v := TickVariation(groups, Permutations, 0.01); v.Hits != 0 {
			b.Fatalf("want a significant case: %+v", v)
		}
	}
}

// TestPText: the smallest p-value a test tells is said as a bound.
func TestPText(t *testing.T) {
	for _, tt := range []struct {
		p, least float64
		want     string
	}{
		{0.31, 1e-4, "= 0.31"},
		{5e-5, 1e-4, "< 0.0001"},
		{1e-4, 1e-4, "= 0.0001"},
		{0.001, 1.0 / 999, "< 0.001"},
		{0.002, 1.0 / 999, "= 0.002"},
	} {
		if got := PText(tt.p, tt.least); got != tt.want {
			t.Errorf("PText(%g, %g) = %q, want %q", tt.p, tt.least, got, tt.want)
		}
	}
}

// TestRequestsToResolve: a ratio of 1.1 whose 95 % interval on 1,000
// requests was ×0.95 … ×1.27 needs n·(h/z·(z+z₀.₈)/L)² requests; a ratio
// of 1 or an interval of no width needs no number.
func TestRequestsToResolve(t *testing.T) {
	got, ok := RequestsToResolve(1000, 1.1, 0.95, 1.27, 95, 0.8)
	h := (math.Log(1.27) - math.Log(0.95)) / 2
	want := 1000 * math.Pow(h/1.959964*(1.959964+0.841621)/math.Log(1.1), 2)
	if !ok || math.Abs(got-want) > want*1e-5 {
		t.Errorf("RequestsToResolve = %g, %v, want %g", got, ok, want)
	}
	if _, ok := RequestsToResolve(1000, 1, 0.95, 1.27, 95, 0.8); ok {
		t.Error("a ratio of 1: want no number")
	}
	if _, ok := RequestsToResolve(1000, 1.1, 1.1, 1.1, 95, 0.8); ok {
		t.Error("an interval of no width: want no number")
	}
}
