package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestAB: the result on the deciding metric from its interval against
// the tolerance, in words, and what --fail-on regression makes of it.
func TestAB(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	ratio := func(metric string, pairs int, r, lo, hi float64) tare.ABRatio {
		return tare.ABRatio{Metric: metric, Pairs: pairs, Ratio: f(r), RatioLow: f(lo), RatioHigh: f(hi),
			DiffPct: f(100 * (r - 1)), DiffLowPct: f(100 * (lo - 1)), DiffHighPct: f(100 * (hi - 1))}
	}
	tests := []struct {
		name      string
		on        string
		mode      string
		oneSided  int // pairs a neighbour hit on one side only
		ratios    []tare.ABRatio
		result    tare.ABResult
		words     string
		not       string // a phrase the verdict must not hold; "": none
		more      int    // 0: none
		regressed bool
		unsure    bool
	}{
		{name: "slower", on: "p95", ratios: []tare.ABRatio{ratio("p95", 20, 1.082, 1.049, 1.116)},
			result: tare.ABSlower, words: "B is slower: p95 +8.2 % (95 % CI +4.9 to +11.6 %)", unsure: true},
		{name: "slower beyond the tolerance", on: "p95", ratios: []tare.ABRatio{ratio("p95", 20, 1.2, 1.1, 1.3)},
			result: tare.ABSlower, words: "B is slower: p95 +20.0 %", regressed: true},
		{name: "faster", on: "p95", ratios: []tare.ABRatio{ratio("p95", 20, 0.9, 0.85, 0.95)},
			result: tare.ABFaster, words: "B is faster: p95 −10.0 % (95 % CI −15.0 to −5.0 %)"},
		{name: "same", on: "p95", ratios: []tare.ABRatio{ratio("p95", 20, 1.004, 0.979, 1.029)},
			result: tare.ABSame, words: "no difference larger than 3 % at this noise"},
		{name: "decided on p99, p95 slower", on: "p99",
			ratios: []tare.ABRatio{ratio("p95", 20, 1.2, 1.1, 1.3), ratio("p99", 20, 1.0, 0.98, 1.02)},
			result: tare.ABSame, words: "no difference larger than 2 % at this noise: p99"},
		{name: "inconclusive", on: "p95", mode: tare.ABDuet, oneSided: 2, ratios: []tare.ABRatio{ratio("p95", 10, 1.01, 0.95, 1.08), ratio("p50", 10, 1.02, 0.97, 1.07)},
			result: tare.ABInconclusive, words: "inconclusive: p95 +1.0 %", not: "--", more: 18, unsure: true},
		// On a noisy host the p50's interval is the narrower: a result a
		// tail leaves open, the p50 may decide.
		{name: "inconclusive, the p50 resolves", on: "p95", ratios: []tare.ABRatio{ratio("p95", 10, 1.01, 0.95, 1.08), ratio("p50", 10, 1.096, 1.04, 1.15)},
			result: tare.ABInconclusive, words: "would resolve 5 %; the p50 resolves (B is slower: +9.6 %, 95 % CI +4.0 to +15.0 %), and --on p50 decides on it", more: 18, unsure: true},
		{name: "inconclusive, interleaved trials hit on one side", on: "p95", mode: tare.ABInterleaved, oneSided: 3, ratios: []tare.ABRatio{ratio("p95", 10, 1.01, 0.95, 1.08)},
			result: tare.ABInconclusive, words: "; a neighbour hit one side only in 3 pairs: --mode duet runs A and B at once", more: 18, unsure: true},
		{name: "too few pairs to bound", on: "p95", ratios: []tare.ABRatio{{Metric: "p95", Pairs: 5, Ratio: f(2), DiffPct: f(100)}},
			result: tare.ABInconclusive, words: "inconclusive: p95 +100.0 % over 5 trial pairs, too few to bound at 95 %", unsure: true},
		{name: "too few pairs", on: "p95", ratios: []tare.ABRatio{{Metric: "p95", Pairs: 1}},
			result: tare.ABInconclusive, words: "1 trial pair with a p95 on both sides, at least 2", unsure: true},
		{name: "unwaited without the probe", on: "unwaited_p95", ratios: []tare.ABRatio{ratio("p95", 20, 1.2, 1.1, 1.3)},
			result: tare.ABInconclusive, words: "0 trial pairs with a unwaited_p95 on both sides, at least 2 are needed (the unwaited figures need the scheduler probe", unsure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ab := &tare.AB{On: tt.on, Mode: tt.mode, TolerancePct: 5, ConfidencePct: 95, Ratios: tt.ratios,
				Interference: tare.ABNoise{OneSided: tt.oneSided}}
			AB(ab)
			if ab.Result != tt.result || !strings.Contains(ab.Verdict, tt.words) {
				t.Errorf("result %s, %q; want %s, with %q", ab.Result, ab.Verdict, tt.result, tt.words)
			}
			if tt.not != "" && strings.Contains(ab.Verdict, tt.not) {
				t.Errorf("%q; want no %q in it", ab.Verdict, tt.not)
			}
			switch {
			case tt.more == 0 && ab.MorePairs != nil:
				t.Errorf("more pairs %d, want none", *ab.MorePairs)
			case tt.more != 0 && (ab.MorePairs == nil || *ab.MorePairs != tt.more):
				t.Errorf("more pairs %v, want %d", deref(ab.MorePairs), tt.more)
			}
			if regressed, unsure := ABRegression(ab, 5); regressed != tt.regressed || unsure != tt.unsure {
				t.Errorf("regression %t, unsure %t; want %t, %t", regressed, unsure, tt.regressed, tt.unsure)
			}
		})
	}
}

// TestPairsToResolve: the interval narrows as 1/√n; it resolves as the
// same once within ±tolerance, or as a difference once clear of 1.
func TestPairsToResolve(t *testing.T) {
	tests := []struct {
		name              string
		n                 int
		ratio, lo, hi, to float64
		want              int
	}{
		{"no effect, about twice too wide", 10, 1, 0.9, 1.1, 5, 43},
		{"an effect of 10%, the interval just holds 1", 10, 1.1, 0.99, 1.21, 5, 12},
		{"degenerate interval", 10, 1, 1, 1, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pairsToResolve(tt.n, tt.ratio, tt.lo, tt.hi, tt.to); got != tt.want {
				t.Errorf("pairsToResolve = %d, want %d", got, tt.want)
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
