package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	moremath "github.com/aclements/go-moremath/stats"

	"github.com/tare-dev/tare"
)

// lognormal is n latencies in ms, log-normal about median with the given
// spread of their log, from seed.
func lognormal(n int, median, sigma float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = median * math.Exp(sigma*r.NormFloat64())
	}
	return out
}

func metricOf(t *testing.T, rt *tare.RequestTest, figure string) tare.MetricTest {
	t.Helper()
	for _, m := range rt.Metrics {
		if m.Metric == figure {
			return m
		}
	}
	t.Fatalf("no %s in %+v", figure, rt.Metrics)
	return tare.MetricTest{}
}

// TestRequestTest: two windows 35 % apart on thousands of requests differ
// beyond noise in every figure, each interval around the true ratio; two
// windows drawn from one distribution do not, however many requests.
func TestRequestTest(t *testing.T) {
	slower := lognormal(3000, 13.5, 0.4, 1)
	base := lognormal(3000, 10, 0.4, 2)
	rt, err := RequestTest(slower, base, familyConfidence(4), RequestResamples, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rt.RequestsA != 3000 || rt.RequestsB != 3000 || rt.ConfidencePct != 98.75 || rt.FamilyConfidencePct != 95 {
		t.Errorf("requests %d / %d at %g%% (%g%% together); want 3000 / 3000 at 98.75%% (95%%)", rt.RequestsA, rt.RequestsB, rt.ConfidencePct, rt.FamilyConfidencePct)
	}
	if rt.PValue == nil || *rt.PValue > 1e-4 || *rt.SlowerPct < 65 {
		t.Errorf("p %v slower %v%%; want a tiny p and a request of A slower than one of B well over half the time", fmtPtr(rt.PValue), fmtPtr(rt.SlowerPct))
	}
	for _, figure := range TestedFigures {
		m := metricOf(t, rt, figure)
		if !m.Significant || !(*m.RatioLow < 1.35 && 1.35 < *m.RatioHigh) || *m.RatioLow < 1.15 || *m.RatioHigh > 1.6 {
			t.Errorf("%s: ratio %v (%v … %v), significant %v; want an interval around 1.35 that excludes 1", figure,
				fmtPtr(m.Ratio), fmtPtr(m.RatioLow), fmtPtr(m.RatioHigh), m.Significant)
		}
		if d := *m.DivergencePct; math.Abs(d-100*(*m.Ratio-1)) > 0.2 {
			t.Errorf("%s: divergence %g%%, ratio %g", figure, d, *m.Ratio)
		}
	}

	same, err := RequestTest(lognormal(3000, 10, 0.4, 3), base, familyConfidence(4), RequestResamples, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range same.Metrics {
		if m.Significant || *m.RatioLow > 1 || *m.RatioHigh < 1 {
			t.Errorf("one distribution: %s ratio %v (%v … %v) called significant", m.Metric, fmtPtr(m.Ratio), fmtPtr(m.RatioLow), fmtPtr(m.RatioHigh))
		}
	}

	// The same inputs give the same intervals.
	again, _ := RequestTest(slower, base, familyConfidence(4), RequestResamples, 1)
	for i := range again.Metrics {
		if *again.Metrics[i].RatioLow != *rt.Metrics[i].RatioLow || *again.Metrics[i].RatioHigh != *rt.Metrics[i].RatioHigh {
			t.Errorf("%s: the same inputs gave another interval", again.Metrics[i].Metric)
		}
	}

	for _, bad := range [][]float64{{1}, {0, 1, 2}} {
		if _, err := RequestTest(bad, base, 95, 100, 1); !errors.Is(err, ErrTooFew) {
			t.Errorf("%v: %v, want ErrTooFew", bad, err)
		}
	}
}

// TestQuantileRatioIsABootstrap: the interval drawn from the order
// statistics' Beta distributions is the one a plain bootstrap gives
// (resample both sides with replacement, take the quantile of each, their
// ratio), to within the noise of the two bootstraps.
func TestQuantileRatioIsABootstrap(t *testing.T) {
	// Enough requests that p99 is not a handful of them: on 200, the
	// bootstrap's quantiles sit on atoms 7 % apart, and either method
	// lands on either.
	a, b := sortedCopy(lognormal(600, 12, 0.6, 4)), sortedCopy(lognormal(500, 10, 0.6, 5))
	const resamples, alpha = 5000, 0.05
	qs := []float64{0.5, 0.95, 0.99}
	r := rand.New(rand.NewPCG(9, 9))
	sa, sb := make([]float64, len(a)), make([]float64, len(b))
	ratios := make([][]float64, len(qs))
	for range resamples {
		for _, s := range []struct{ to, from []float64 }{{sa, a}, {sb, b}} {
			for i := range s.to {
				s.to[i] = s.from[r.IntN(len(s.from))]
			}
			slices.Sort(s.to)
		}
		for i, q := range qs {
			ratios[i] = append(ratios[i], sa[orderOf(q, len(sa))-1]/sb[orderOf(q, len(sb))-1])
		}
	}
	for i, q := range qs {
		plain := moremath.Sample{Xs: ratios[i]}
		plain.Sort()
		lo, hi := plain.Quantile(alpha/2), plain.Quantile(1-alpha/2)
		m := quantileRatio(a, b, q, alpha, resamples, 1)
		if math.Abs(*m.RatioLow/lo-1) > 0.05 || math.Abs(*m.RatioHigh/hi-1) > 0.05 {
			t.Errorf("q %g: interval ×%.3f … ×%.3f; a plain bootstrap gives ×%.3f … ×%.3f", q, *m.RatioLow, *m.RatioHigh, lo, hi)
		}
		if want := a[orderOf(q, len(a))-1] / b[orderOf(q, len(b))-1]; math.Abs(*m.Ratio-want) > 0.001 {
			t.Errorf("q %g: ratio %g, want %g", q, *m.Ratio, want)
		}
	}
}

// TestMeanRatio: the delta-method interval of the ratio of means is that
// of a plain bootstrap of the means, on a skewed sample of a few hundred.
func TestMeanRatio(t *testing.T) {
	a, b := lognormal(500, 12, 0.7, 6), lognormal(400, 10, 0.7, 7)
	r := rand.New(rand.NewPCG(3, 3))
	mean := func(x []float64) float64 {
		s := 0.0
		for range x {
			s += x[r.IntN(len(x))]
		}
		return s / float64(len(x))
	}
	ratios := make([]float64, 20000)
	for i := range ratios {
		ratios[i] = mean(a) / mean(b)
	}
	plain := moremath.Sample{Xs: ratios}
	plain.Sort()
	m := meanRatio(a, b, 0.05)
	if lo, hi := plain.Quantile(0.025), plain.Quantile(0.975); math.Abs(*m.RatioLow/lo-1) > 0.03 || math.Abs(*m.RatioHigh/hi-1) > 0.03 {
		t.Errorf("interval ×%.3f … ×%.3f; a plain bootstrap gives ×%.3f … ×%.3f", *m.RatioLow, *m.RatioHigh, lo, hi)
	}
}

func TestLatencies(t *testing.T) {
	none := NewLatencies(0)
	if none.Values() != nil {
		t.Errorf("no record: %v, want nil (no records at hand)", none.Values())
	}
	l := NewLatencies(3)
	l.Add(result(0, 1, 9))
	l.Add(&tare.Result{Scheduled: sec(0.1), Dropped: true})
	l.Add(&tare.Result{Scheduled: sec(0.2), Sent: sec(0.2)}) // never done
	if got := l.Values(); !slices.Equal(got, []float64{10}) {
		t.Errorf("latencies %v, want [10]: dropped and unfinished requests have none", got)
	}
	only := NewLatencies(1)
	only.Add(&tare.Result{Dropped: true})
	if got := only.Values(); got == nil || len(got) != 0 {
		t.Errorf("records without a latency: %v, want empty, not nil", got)
	}

	// A run longer than MaxTestedRequests keeps every k-th, spread over it.
	n := 2*MaxTestedRequests + 10
	long := NewLatencies(n)
	for i := range n {
		long.Add(result(float64(i)/1000, 0, float64(i%7+1)))
	}
	got := long.Values()
	if want := (n + 2) / 3; len(got) != want || got[1] != float64(3%7+1) {
		t.Errorf("kept %d, the second %g; want %d, every third", len(got), got[1], want)
	}
}

// TestCompareRequests: stored runs with records get a test on requests
// between windows, intervals widened for the three pairs; a run without
// records leaves its pairs untested, with a warning.
func TestCompareRequests(t *testing.T) {
	run := func(id, window string, median float64, seed uint64) CompareInput {
		return CompareInput{
			Summary:   tare.Summary{Run: tare.Run{ID: id, Window: window}},
			Ticks:     timeline(12, func(i int) float64 { return median }),
			Latencies: lognormal(1000, median, 0.3, seed),
			Source:    "store",
		}
	}
	c := Compare([]CompareInput{run("r1", "peak", 20, 1), run("r2", "offpeak", 10, 2), run("r3", "mid", 11, 3)})
	if len(c.Tests) != 3 {
		t.Fatalf("%d tests, want 3", len(c.Tests))
	}
	for _, wt := range c.Tests {
		rt := wt.Requests
		if rt == nil || rt.ConfidencePct != 99.58 || rt.RequestsA != 1000 {
			t.Fatalf("%s vs %s: %+v; want a test on 1000 requests at 99.58%% (95%% over 12 intervals)", wt.A, wt.B, rt)
		}
		p95 := metricOf(t, rt, "p95")
		peak := wt.A == "peak"
		if p95.Significant != peak {
			t.Errorf("%s vs %s: p95 ×%v significant %v; want %v", wt.A, wt.B, *p95.Ratio, p95.Significant, peak)
		}
	}
	c = Compare([]CompareInput{run("r1", "peak", 20, 1), {Summary: tare.Summary{Run: tare.Run{ID: "r2", Window: "offpeak"}}, Ticks: timeline(12, func(int) float64 { return 10 }), Source: "store"}})
	if c.Tests[0].Requests != nil || len(c.Warnings) != 1 || c.Warnings[0] != "no raw records for r2: no test on requests for them" {
		t.Errorf("requests %+v warnings %q; want no test on requests, and a warning naming r2", c.Tests[0].Requests, c.Warnings)
	}
}

// BenchmarkRequestTest: a test on requests costs about the same on a
// million latencies a side as on a thousand, past sorting them.
func BenchmarkRequestTest(b *testing.B) {
	for _, n := range []int{1000, MaxTestedRequests} {
		x, y := lognormal(n, 12, 0.5, 1), lognormal(n, 10, 0.5, 2)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				if _, err := RequestTest(x, y, 99.6, RequestResamples, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
