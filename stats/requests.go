package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	moremath "github.com/aclements/go-moremath/stats"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tare-dev/tare"
)

// Defaults of the test on requests.
const (
	// MaxTestedRequests is the most latencies of one run a comparison
	// keeps for its tests: a longer run is thinned to every k-th request
	// in arrival order, which keeps its spread over time (and makes the
	// intervals a little wider than all the requests would).
	MaxTestedRequests = 100_000
	// RequestResamples is how many bootstrap resamples each interval of
	// the test on requests draws: Bonferroni puts its bounds far out in
	// the tails (99.6 % for three windows), where 2,000 would leave a
	// handful of resamples beyond each bound.
	RequestResamples = 10_000
	// FamilyConfidence is the confidence, in percent, that every
	// interval of a comparison's tests on requests holds at once.
	FamilyConfidence = 95.0
)

// TestedFigures are the figures the test on requests compares, in order.
var TestedFigures = []string{"avg", "p50", "p95", "p99"}

// Latencies collects the latencies of a run's raw records, in ms, for the
// test on requests: every request that was sent and finished, failed ones
// included, as the summary counts them.
type Latencies struct {
	every, seen int
	records     int // every record added, those without a latency too
	vals        []float64
}

// NewLatencies collects up to MaxTestedRequests latencies of a run of
// total arrivals.
func NewLatencies(total int) *Latencies {
	every := 1
	if total > MaxTestedRequests {
		every = (total + MaxTestedRequests - 1) / MaxTestedRequests
	}
	return &Latencies{every: every, vals: []float64{}}
}

// Add takes one raw record; it fits tare.Store.StreamResults.
func (l *Latencies) Add(r *tare.Result) error {
	l.records++
	if r.Dropped || r.Done.IsZero() {
		return nil
	}
	if l.seen%l.every == 0 {
		l.vals = append(l.vals, ms(r.Latency()))
	}
	l.seen++
	return nil
}

// Values are the latencies collected, in arrival order: nil when no
// record came at all (the run kept none), empty when none had a latency.
func (l *Latencies) Values() []float64 {
	if l.records == 0 {
		return nil
	}
	return l.vals
}

// familyConfidence is the confidence of each of n intervals that together
// hold at FamilyConfidence (Bonferroni).
func familyConfidence(n int) float64 {
	return 100 - (100-FamilyConfidence)/float64(max(n, 1))
}

// RequestTest compares the latencies of a with those of b (ms): a
// Mann-Whitney U test, and for avg, p50, p95 and p99 the ratio a / b with
// an interval at confidence (percent).
//
// Requests are taken as independent draws. A neighbour that slowed a few
// seconds of one window slows a run of requests together: the test counts
// that as a real difference, which it is (it is what the host did in that
// window), but it says nothing of how often the host does it.
//
// The percentiles are the order statistic x₍ₖ₎, k = ⌈q·n⌉ (what an HDR
// histogram reports). Their intervals are percentile bootstraps drawn
// without resampling: the k-th smallest of n draws from the sorted sample
// x₍₁₎…x₍ₙ₎ is x₍⌊n·U⌋₊₁₎ with U the k-th smallest of n uniforms, which is
// Beta(k, n−k+1); one Beta draw a side stands for a whole resample, so
// the test costs the same on a million requests as on a hundred. The
// mean's interval is the normal one of the log of the ratio (the delta
// method), exp(±z·√(s²ₐ/(nₐ·āₐ²) + s²ᵦ/(nᵦ·āᵦ²))): the means of thousands
// of requests are near normal even when the latencies are not, and on few
// requests its interval is wide anyway.
//
// Fewer than two latencies on either side, or a latency that is not
// positive, is an error wrapping ErrTooFew.
func RequestTest(a, b []float64, confidence float64, resamples int, seed uint64) (*tare.RequestTest, error) {
	if len(a) < 2 || len(b) < 2 {
		return nil, errTooFew("test on requests", len(a), len(b))
	}
	sa, sb := sortedCopy(a), sortedCopy(b)
	if !(sa[0] > 0) || !(sb[0] > 0) {
		return nil, errTooFew("test on requests: a latency that is not positive", len(a), len(b))
	}
	t := &tare.RequestTest{RequestsA: len(a), RequestsB: len(b), ConfidencePct: *round(confidence, 2), FamilyConfidencePct: FamilyConfidence}
	if mw, err := MannWhitneyU(sa, sb); err == nil {
		t.U, t.Z, t.PValue = round(mw.U, 1), round(mw.Z, 3), round(mw.P, 4)
		t.SlowerPct = round(100*mw.U/float64(len(a)*len(b)), 1)
	}
	alpha := 1 - confidence/100
	for i, figure := range TestedFigures {
		var m tare.MetricTest
		if figure == "avg" {
			m = meanRatio(sa, sb, alpha)
		} else {
			q := map[string]float64{"p50": 0.50, "p95": 0.95, "p99": 0.99}[figure]
			m = quantileRatio(sa, sb, q, alpha, resamples, seed+uint64(i))
		}
		m.Metric = figure
		t.Metrics = append(t.Metrics, m)
	}
	return t, nil
}

// metricTest fills the figures of a MetricTest, rounded.
func metricTest(a, b, lo, hi float64) tare.MetricTest {
	return tare.MetricTest{
		AMS: round(a, 3), BMS: round(b, 3),
		Ratio: round(a/b, 3), RatioLow: round(lo, 3), RatioHigh: round(hi, 3),
		DivergencePct: round(100*math.Abs(a-b)/min(a, b), 1),
		Significant:   lo > 1 || hi < 1,
	}
}

// meanRatio is āₐ / āᵦ with its delta-method interval.
func meanRatio(a, b []float64, alpha float64) tare.MetricTest {
	ma, va := moremath.Mean(a), moremath.Variance(a)
	mb, vb := moremath.Mean(b), moremath.Variance(b)
	se := math.Sqrt(va/(float64(len(a))*ma*ma) + vb/(float64(len(b))*mb*mb))
	z := moremath.StdNormal.InvCDF(1 - alpha/2)
	r := ma / mb
	return metricTest(ma, mb, r*math.Exp(-z*se), r*math.Exp(z*se))
}

// quantileRatio is the q-quantile of sorted a over that of sorted b, with
// its percentile bootstrap interval, each resample's order statistics
// drawn from their Beta distributions (see RequestTest).
func quantileRatio(a, b []float64, q, alpha float64, resamples int, seed uint64) tare.MetricTest {
	src := rand.NewPCG(seed, 0x7461726572657173) // "tarereqs"
	draw := func(x []float64) func() float64 {
		n := len(x)
		k := orderOf(q, n)
		beta := distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1), Src: src}
		return func() float64 {
			return x[min(int(float64(n)*beta.Rand()), n-1)]
		}
	}
	da, db := draw(a), draw(b)
	ratios := make([]float64, resamples)
	for i := range ratios {
		ratios[i] = da() / db()
	}
	s := moremath.Sample{Xs: ratios}
	s.Sort()
	return metricTest(a[orderOf(q, len(a))-1], b[orderOf(q, len(b))-1], s.Quantile(alpha/2), s.Quantile(1-alpha/2))
}

// orderOf is k of the q-quantile x₍ₖ₎ of n values: ⌈q·n⌉, at least 1.
func orderOf(q float64, n int) int {
	return min(max(int(math.Ceil(q*float64(n)-1e-9)), 1), n)
}

func sortedCopy(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}
