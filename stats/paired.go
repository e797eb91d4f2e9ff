package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	moremath "github.com/aclements/go-moremath/stats"

	"github.com/tare-dev/tare"
)

// PairedResamples is how many bootstrap resamples of the pairs an A/B
// interval draws.
const PairedResamples = 4000

// PairRatios are B/A of one pair, per metric that both sides have above
// 0 (a metric of tare.ABMetrics that neither side has is left out).
func PairRatios(p *tare.ABPair) map[string]*float64 {
	r := map[string]*float64{}
	for _, m := range tare.ABMetrics {
		a, b := p.A.Value(m), p.B.Value(m)
		switch {
		case a == nil && b == nil:
		case a == nil || b == nil || !(*a > 0) || !(*b > 0):
			r[m] = nil
		default:
			r[m] = round(*b / *a, 4)
		}
	}
	return r
}

// PairedRatio is B against A over n paired trials, a[i] and b[i] a
// figure of pair i: the geometric mean of the pairs' ratios bᵢ/aᵢ, with
// its interval at confidence (%). Pairing is what cancels the host's
// noise: a neighbour that slows both trials of a pair leaves their ratio
// alone, so the interval is as wide as the noise that fell on one side
// only. The log makes B twice as slow and B twice as fast weigh the same.
//
// The interval is the randomisation test's, inverted: which side ran
// first in a pair was drawn at random, so where B is A shifted by δ
// (log), each pair's log ratio less δ is as likely to have either sign,
// and δ is in the interval when the mean's size is no more than chance
// (every one of the 2ⁿ signs, or resamples of them drawn from seed past
// 12 pairs) makes it at 1 − confidence. It holds its confidence whatever
// the noise's shape: a hog that is on in one trial and off in the other
// makes a few pairs far off, which a bootstrap of six pairs took for a
// difference in a quarter of the runs of identical services. With few
// pairs no signs can be rare enough (five pairs: 2/32 > 5 %), and a side
// of the interval is unbounded: ±Inf. Fewer than two pairs, or a figure
// that is not positive, is an error wrapping ErrTooFew.
func PairedRatio(a, b []float64, confidence float64, resamples int, seed uint64) (ratio, lo, hi float64, err error) {
	if len(a) != len(b) {
		return 0, 0, 0, fmt.Errorf("paired ratio of %d and %d values: not pairs", len(a), len(b))
	}
	if len(a) < 2 {
		return 0, 0, 0, fmt.Errorf("paired ratio of %d pairs: %w", len(a), ErrTooFew)
	}
	if !(confidence > 0 && confidence < 100) || resamples < 1 {
		return 0, 0, 0, fmt.Errorf("paired ratio: confidence %g%% or %d resamples out of range", confidence, resamples)
	}
	logs := make([]float64, len(a))
	for i := range a {
		if !(a[i] > 0) || !(b[i] > 0) {
			return 0, 0, 0, fmt.Errorf("paired ratio: pair %d has %g and %g, not both positive: %w", i+1, a[i], b[i], ErrTooFew)
		}
		logs[i] = math.Log(b[i] / a[i])
	}
	mean := moremath.Mean(logs)
	alpha := (100 - confidence) / 100
	signs := signsOf(len(logs), resamples, seed)
	rejected := func(d float64) bool { return signs.p(logs, d) < alpha }
	lo, hi = 0, math.Inf(1) // unbounded, until a shift far enough is rejected
	spread := slices.Max(logs) - slices.Min(logs) + 1
	if below := slices.Min(logs) - spread; rejected(below) {
		lo = math.Exp(bisect(below, mean, rejected))
	}
	if above := slices.Max(logs) + spread; rejected(above) {
		hi = math.Exp(bisect(above, mean, rejected))
	}
	return math.Exp(mean), lo, hi, nil
}

// signFlips are the sign patterns the randomisation test compares the
// pairs' own with: all 2ⁿ, or the pairs' own and resamples drawn.
type signFlips struct {
	n     int
	drawn [][]bool // nil: every pattern
}

// maxExactPairs is the most pairs whose every sign pattern is counted.
const maxExactPairs = 12

func signsOf(n, resamples int, seed uint64) signFlips {
	s := signFlips{n: n}
	if n <= maxExactPairs {
		return s
	}
	rng := rand.New(rand.NewPCG(seed, 0x74617265706169)) // "tarepai"
	s.drawn = make([][]bool, resamples)
	for i := range s.drawn {
		s.drawn[i] = make([]bool, n)
		for k := range n {
			s.drawn[i][k] = rng.IntN(2) == 1
		}
	}
	return s
}

// p is how often a sign pattern makes the sum of logs less d as large as
// the pairs' own: the randomisation test's p-value of a shift d.
func (s signFlips) p(logs []float64, d float64) float64 {
	own := 0.0
	for _, x := range logs {
		own += x - d
	}
	own = math.Abs(own) * (1 - 1e-12) // ties count as large
	sum := func(neg func(k int) bool) float64 {
		t := 0.0
		for k, x := range logs {
			if neg(k) {
				t -= x - d
			} else {
				t += x - d
			}
		}
		return math.Abs(t)
	}
	if s.drawn == nil {
		hits := 0
		for m := range 1 << s.n {
			if sum(func(k int) bool { return m&(1<<k) != 0 }) >= own {
				hits++
			}
		}
		return float64(hits) / float64(int(1)<<s.n)
	}
	hits := 1 // the pairs' own pattern
	for _, flip := range s.drawn {
		if sum(func(k int) bool { return flip[k] }) >= own {
			hits++
		}
	}
	return float64(hits) / float64(len(s.drawn)+1)
}

// bisect is the edge of the shifts rejected between out, rejected, and
// in, not: the last shift not rejected, to within float precision.
func bisect(out, in float64, rejected func(float64) bool) float64 {
	for range 60 {
		mid := (out + in) / 2
		if rejected(mid) {
			out = mid
		} else {
			in = mid
		}
	}
	return in
}

// ABRatios are B against A over the pairs for each of tare.ABMetrics that
// some pair has: PairedRatio over the pairs with it on both sides, its
// figures nil where fewer than two pairs have it.
func ABRatios(pairs []tare.ABPair, confidence float64, seed uint64) []tare.ABRatio {
	var out []tare.ABRatio
	for i, m := range tare.ABMetrics {
		var a, b []float64
		seen := false
		for k := range pairs {
			va, vb := pairs[k].A.Value(m), pairs[k].B.Value(m)
			seen = seen || va != nil || vb != nil
			if va != nil && vb != nil && *va > 0 && *vb > 0 {
				a, b = append(a, *va), append(b, *vb)
			}
		}
		if !seen {
			continue
		}
		r := tare.ABRatio{Metric: m, Pairs: len(a)}
		if ratio, lo, hi, err := PairedRatio(a, b, confidence, PairedResamples, seed+uint64(i)); err == nil {
			r.Ratio, r.DiffPct = round(ratio, 4), round(100*(ratio-1), 1)
			if lo > 0 && !math.IsInf(hi, 1) {
				// Else too few pairs bound it: no interval.
				r.RatioLow, r.RatioHigh = round(lo, 4), round(hi, 4)
				r.DiffLowPct, r.DiffHighPct = round(100*(lo-1), 1), round(100*(hi-1), 1)
			}
		}
		out = append(out, r)
	}
	return out
}

// ABTrialOf is the A/B trial a run's summary describes: its figures, its
// verdict and its side of the whose-CPU ledger.
func ABTrialOf(s *tare.Summary) tare.ABTrial {
	t := tare.ABTrial{
		RunID: s.Run.ID, StartedAt: s.Run.StartedAt,
		Requests: s.Requests.Total, Errors: s.Requests.Errors,
		Latency: s.Latency, Verdict: s.Verdict.Level, Hit: s.Verdict.Level == tare.Polluted,
		PollutedTicksPct: s.Host.PollutedTicksPct, NeighbourWaitPct: s.Host.NeighbourWaitPct,
		StealPct: s.Host.Steal.Mean, CPUBy: s.Host.CPUBy,
	}
	if m := s.Model; m != nil {
		t.TTFTP95MS, t.TPOTP95MS = m.TTFT.P95, m.TPOT.P95
	}
	if tl := s.Tail; tl != nil {
		t.Overlapped, t.Probed, t.Unwaited = &tl.Overlapped, &tl.Requests, &tl.Unwaited
	}
	return t
}

// ABNoise counts the trials the interference polluted, on each side, and
// the pairs where it hit one side only, with the mean polluted-tick
// share of each side's trials. Its Detail is left for judge to say.
func ABNoise(pairs []tare.ABPair) tare.ABNoise {
	var n tare.ABNoise
	var sumA, sumB float64
	var nA, nB int
	for _, p := range pairs {
		if p.A.Hit {
			n.HitA++
		}
		if p.B.Hit {
			n.HitB++
		}
		if p.A.Hit != p.B.Hit {
			n.OneSided++
		}
		if v := p.A.PollutedTicksPct; v != nil {
			sumA, nA = sumA+*v, nA+1
		}
		if v := p.B.PollutedTicksPct; v != nil {
			sumB, nB = sumB+*v, nB+1
		}
	}
	if nA > 0 {
		n.PollutedTicksPctA = round(sumA/float64(nA), 1)
	}
	if nB > 0 {
		n.PollutedTicksPctB = round(sumB/float64(nB), 1)
	}
	return n
}
