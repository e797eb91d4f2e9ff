package stats

import (
	"fmt"
	"math"
	"math/rand/v2"

	moremath "github.com/aclements/go-moremath/stats"
	"gonum.org/v1/gonum/stat/distuv"

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
// the percentile bootstrap interval of that mean at confidence (%),
// resampling whole pairs. Pairing is what cancels the host's noise: a
// neighbour that slows both trials of a pair leaves their ratio alone,
// so the interval is as wide as the noise that fell on one side only.
// The log makes B twice as slow and B twice as fast weigh the same. The
// draws come from a PCG generator seeded from seed alone. Fewer than two
// pairs, or a figure that is not positive, is an error wrapping ErrTooFew.
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
	rng := rand.New(rand.NewPCG(seed, 0x74617265706169)) // "tarepai"
	means := make([]float64, resamples)
	for i := range means {
		sum := 0.0
		for range logs {
			sum += logs[rng.IntN(len(logs))]
		}
		means[i] = sum / float64(len(logs))
	}
	s := moremath.Sample{Xs: means}
	s.Sort()
	alpha := (100 - confidence) / 100
	mean := moremath.Mean(logs)
	// The percentile bootstrap of a mean of few values is too narrow (it
	// is as wide as z·σ/√n with σ the plug-in deviation): widened by
	// √(n/(n−1))·t/z about the mean (in the spirit of Hesterberg's
	// expanded percentile interval), it holds its confidence from a
	// handful of pairs (TestPairedRatioCovers).
	n := float64(len(logs))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(1 - alpha/2)
	z := distuv.UnitNormal.Quantile(1 - alpha/2)
	widen := math.Sqrt(n/(n-1)) * t / z
	lo, hi = mean+widen*(s.Quantile(alpha/2)-mean), mean+widen*(s.Quantile(1-alpha/2)-mean)
	return math.Exp(mean), math.Exp(lo), math.Exp(hi), nil
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
			r.Ratio, r.RatioLow, r.RatioHigh = round(ratio, 4), round(lo, 4), round(hi, 4)
			r.DiffPct, r.DiffLowPct, r.DiffHighPct = round(100*(ratio-1), 1), round(100*(lo-1), 1), round(100*(hi-1), 1)
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
		t.Overlapped, t.Probed = &tl.Overlapped, &tl.Requests
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
