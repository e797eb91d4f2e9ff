package judge

import (
	"fmt"
	"math"
	"strings"

	"github.com/tare-dev/tare"
)

// DefaultABTolerance is the difference of B against A, in %, below which
// an A/B run calls them the same, and above which --fail-on regression
// fails.
const DefaultABTolerance = 5.0

// ABRatioOn is the ratio of ab on metric; nil when ab has none.
func ABRatioOn(ab *tare.AB, metric string) *tare.ABRatio {
	for i := range ab.Ratios {
		if ab.Ratios[i].Metric == metric {
			return &ab.Ratios[i]
		}
	}
	return nil
}

// AB decides ab's result on ab.On from the interval of B/A the pairs
// gave, against ab.TolerancePct, and says it in words: B slower or
// faster when the interval is clear of 1; the same when it lies within
// ±tolerance; inconclusive otherwise, with about how many more pairs
// would resolve the tolerance (ab.MorePairs).
func AB(ab *tare.AB) {
	ab.MorePairs = nil
	r := ABRatioOn(ab, ab.On)
	if r != nil && r.Ratio != nil && r.RatioLow == nil {
		ab.Result = tare.ABInconclusive
		ab.Verdict = fmt.Sprintf("inconclusive: %s %s %% over %d trial %s, too few to bound at %g %% whatever they show (the order within a pair is what is random: %d pairs give one sign pattern in %d)",
			ab.On, signed(*r.DiffPct), r.Pairs, plural(r.Pairs, "pair", "pairs"), ab.ConfidencePct, r.Pairs, 1<<min(r.Pairs, 30))
		return
	}
	if r == nil || r.Ratio == nil {
		ab.Result = tare.ABInconclusive
		n := 0
		if r != nil {
			n = r.Pairs
		}
		ab.Verdict = fmt.Sprintf("inconclusive: %d trial %s with a %s on both sides, at least 2 are needed", n, plural(n, "pair", "pairs"), ab.On)
		if n == 0 && strings.HasPrefix(ab.On, "unwaited_") {
			ab.Verdict += " (the unwaited figures need the scheduler probe, which measured no trial whole: see --sched-probe)"
		}
		return
	}
	tol := ab.TolerancePct / 100
	lo, hi := *r.RatioLow, *r.RatioHigh
	figure := fmt.Sprintf("%s %s %% (%g %% CI %s to %s %%)", ab.On, signed(*r.DiffPct), ab.ConfidencePct, signed(*r.DiffLowPct), signed(*r.DiffHighPct))
	switch {
	case lo > 1:
		ab.Result, ab.Verdict = tare.ABSlower, "B is slower: "+figure
	case hi < 1:
		ab.Result, ab.Verdict = tare.ABFaster, "B is faster: "+figure
	case lo >= 1-tol && hi <= 1+tol:
		within := math.Ceil(100*max(1-lo, hi-1) - 1e-9) // 2.0000000000000018 is 2
		ab.Result = tare.ABSame
		ab.Verdict = fmt.Sprintf("no difference larger than %g %% at this noise: %s", max(within, 1), figure)
	default:
		ab.Result = tare.ABInconclusive
		ab.Verdict = "inconclusive: " + figure
		if need := pairsToResolve(r.Pairs, *r.Ratio, lo, hi, ab.TolerancePct); need > r.Pairs {
			more := need - r.Pairs
			ab.MorePairs = &more
			ab.Verdict += fmt.Sprintf("; about %d more trial %s would resolve %g %%", more, plural(more, "pair", "pairs"), ab.TolerancePct)
		}
		ab.Verdict += noisyHint(ab, tol)
	}
}

// noisyHint says, of a result inconclusive on another metric, what the
// pairs' p50 shows when its interval resolves, since on a noisy host the
// median's interval is the narrower by far (docs/verdict.md); and, of
// interleaved trials a neighbour hit on one side only, that duet runs
// both sides through the same moments. "" when neither applies.
func noisyHint(ab *tare.AB, tol float64) string {
	var hint string
	if r := ABRatioOn(ab, "p50"); ab.On != "p50" && r != nil && r.RatioLow != nil {
		lo, hi := *r.RatioLow, *r.RatioHigh
		says := ""
		switch {
		case lo > 1:
			says = "B is slower"
		case hi < 1:
			says = "B is faster"
		case lo >= 1-tol && hi <= 1+tol:
			says = "no difference"
		}
		if says != "" {
			hint += fmt.Sprintf("; the p50 resolves (%s: %s %%, %g %% CI %s to %s %%), and --on p50 decides on it",
				says, signed(*r.DiffPct), ab.ConfidencePct, signed(*r.DiffLowPct), signed(*r.DiffHighPct))
		}
	}
	if ab.Mode == tare.ABInterleaved && ab.Interference.OneSided > 0 {
		hint += fmt.Sprintf("; a neighbour hit one side only in %d %s: --mode duet runs A and B at once, through the same moments",
			ab.Interference.OneSided, plural(ab.Interference.OneSided, "pair", "pairs"))
	}
	return hint
}

// ABRegression says what --fail-on regression makes of ab on ab.On with
// tolerance (%): regressed when the whole interval of B/A lies above
// 1 + tolerance; unsure when it reaches past 1 + tolerance but not
// wholly (the measurement cannot tell: exit 3); neither when it stays
// within (B is no slower than the tolerance allows).
func ABRegression(ab *tare.AB, tolerance float64) (regressed, unsure bool) {
	r := ABRatioOn(ab, ab.On)
	if r == nil || r.RatioLow == nil {
		return false, true
	}
	limit := 1 + tolerance/100
	switch {
	case *r.RatioLow > limit:
		return true, false
	case *r.RatioHigh > limit:
		return false, true
	}
	return false, false
}

// ABNoiseDetail says how the interference fell on the trials: how many
// of each side's trials it polluted, and in how many pairs only one side
// was hit, the noise pairing cancels only when it falls on both alike.
func ABNoiseDetail(n tare.ABNoise, pairs int) string {
	if n.HitA+n.HitB == 0 {
		return fmt.Sprintf("no trial of the %d %s was polluted", pairs, plural(pairs, "pair", "pairs"))
	}
	s := fmt.Sprintf("%d of A's and %d of B's %d trials were polluted", n.HitA, n.HitB, pairs)
	switch n.OneSided {
	case 0:
		s += ": always both trials of a pair alike, which pairing cancels"
	default:
		s += fmt.Sprintf("; in %d %s one side was hit and the other not: the interval is wider for it", n.OneSided, plural(n.OneSided, "pair", "pairs"))
	}
	return s
}

// signed is a difference with its sign: +8.2, −3.1.
func signed(v float64) string {
	if v < 0 {
		return fmt.Sprintf("−%.1f", -v)
	}
	return fmt.Sprintf("+%.1f", v)
}

// pairsToResolve is about how many pairs in all would resolve a paired
// ratio to tolerance (%), from n pairs whose interval is [lo, hi] around
// ratio: the interval's half-width shrinks as 1/√n, and it resolves once
// it lies either within ±tolerance of no difference (same) or clear of no
// difference (a difference), whichever needs the fewer pairs. 0 when the
// interval is degenerate or the ratio not known.
func pairsToResolve(n int, ratio, lo, hi, tolerance float64) int {
	if n < 1 || !(ratio > 0) || !(lo > 0) || !(hi > lo) || !(tolerance > 0) {
		return 0
	}
	half := (math.Log(hi) - math.Log(lo)) / 2
	effect := math.Abs(math.Log(ratio))
	// Same: the interval within ±tol needs a half-width of tol − |effect|;
	// different: one of less than |effect|.
	want := max(math.Log(1+tolerance/100)-effect, effect)
	if want <= 0 {
		return 0
	}
	return int(math.Ceil(float64(n) * (half / want) * (half / want)))
}
