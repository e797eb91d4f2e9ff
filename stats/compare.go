package stats

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	moremath "github.com/aclements/go-moremath/stats"

	"github.com/tare-dev/tare"
)

// Defaults of the statistical backing of a comparison.
const (
	// MinTestTicks is the fewest ticks with completions, in each of the
	// two groups, for a Mann-Whitney test worth reading; fewer still get
	// one, with a warning.
	MinTestTicks = 10
	// BootstrapResamples is how many resamples the confidence interval of
	// a comparison draws.
	BootstrapResamples = 2000
	// Confidence is the level of the bootstrap interval, in percent.
	Confidence = 95.0
	// bootstrapSeed makes a comparison's intervals reproducible: the same
	// runs give the same interval every time.
	bootstrapSeed = 1
)

// ErrTooFew is wrapped by the tests when a sample is too small to test at
// all.
var ErrTooFew = errors.New("too few values")

func errTooFew(what string, nx, ny int) error {
	return fmt.Errorf("%s of %d and %d values: %w", what, nx, ny, ErrTooFew)
}

// CompareInput is one run to compare: its summary, and its per-tick
// timeline and its requests' latencies when they are known (a summary
// file has neither).
type CompareInput struct {
	Summary tare.Summary
	Ticks   []tare.Tick
	// Latencies are the latencies of its raw records, in ms (Latencies
	// collects them); nil when the records are not at hand.
	Latencies []float64
	Source    string // "store", or the summary file it was read from
}

// Compare puts runs side by side: their figures, the divergence of each
// metric, and, between every two windows (or runs, outside the protocol),
// a Mann-Whitney test on per-tick p95 with a bootstrap interval for the
// difference of their medians, and a test on every request's latency
// (RequestTest) with an interval for the ratio of each figure; those
// intervals hold together at FamilyConfidence. Capacity and the verdict
// are the judge's: they are left zero.
//
// Runs of the same window are pooled for the tests: several days of the
// protocol make one sample per window.
func Compare(in []CompareInput) tare.Comparison {
	c := tare.Comparison{Schema: tare.CompareSchema, Runs: make([]tare.ComparedRun, 0, len(in)), Tests: []tare.WindowTest{}}
	protocols := map[string]bool{}
	for _, r := range in {
		c.Runs = append(c.Runs, comparedRun(r))
		protocols[r.Summary.Run.Protocol] = true
	}
	if len(protocols) == 1 {
		c.Protocol = in[0].Summary.Run.Protocol
	}
	metric := func(f func(*tare.ComparedRun) *float64) *float64 {
		vals := make([]*float64, len(c.Runs))
		for i := range c.Runs {
			vals[i] = f(&c.Runs[i])
		}
		return DivergencePct(vals)
	}
	c.DivergencePct = tare.Divergence{
		Avg:        metric(func(r *tare.ComparedRun) *float64 { return r.Latency.Avg }),
		P50:        metric(func(r *tare.ComparedRun) *float64 { return r.Latency.P50 }),
		P95:        metric(func(r *tare.ComparedRun) *float64 { return r.Latency.P95 }),
		P99:        metric(func(r *tare.ComparedRun) *float64 { return r.Latency.P99 }),
		Throughput: metric(func(r *tare.ComparedRun) *float64 { return r.AchievedPerS }),
	}

	groups, noTicks, noRecords := tickGroups(in)
	if len(noTicks) > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("no per-tick timeline or raw records for %s (a summary file keeps neither): their divergence is not tested, and counts on the threshold and the latency floor alone; compare stored runs for a test", joinNames(noTicks)))
	}
	if len(noRecords) > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("no raw records for %s: no test on requests for them", joinNames(noRecords)))
	}
	tested := 0
	for i := range groups {
		for j := i + 1; j < len(groups); j++ {
			if groups[i].lat != nil && groups[j].lat != nil {
				tested++
			}
		}
	}
	confidence := familyConfidence(tested * len(TestedFigures))
	for i := range groups {
		for j := i + 1; j < len(groups); j++ {
			c.Tests = append(c.Tests, windowTest(groups[i], groups[j], confidence))
		}
	}
	return c
}

func comparedRun(in CompareInput) tare.ComparedRun {
	s := &in.Summary
	r := tare.ComparedRun{
		ID:           s.Run.ID,
		Source:       in.Source,
		Label:        s.Run.Label,
		Window:       s.Run.Window,
		StartedAt:    s.Run.StartedAt,
		Requests:     s.Requests.Total,
		Latency:      s.Latency,
		OfferedPerS:  s.Rate.Offered,
		AchievedPerS: s.Rate.Achieved,
		CPUBusyPct:   s.Host.CPUBusyPct,
		Steal:        s.Host.Steal,
		Verdict:      s.Verdict.Level,
		Ticks:        len(tickP95s(in.Ticks)),
		Records:      len(in.Latencies),

		VCPUs:            s.Env.VCPUs,
		CPUBy:            s.Host.CPUBy,
		NeighbourWaitPct: s.Host.NeighbourWaitPct,
		ThrottledPct:     s.Host.ThrottledPct,
		SendLag:          s.SendLag,
		GeneratorCPUPct:  s.Generator.CPUPct,
	}
	if s.Model != nil {
		r.TokensPerS = s.Model.TokensPerS
	}
	// The system under test's share of a core over completions a
	// second is its CPU time per request.
	if s.SUT != nil && s.SUT.CPUPct != nil && s.Rate.Achieved != nil && *s.Rate.Achieved > 0 {
		r.SUTCPUPerRequestMS = round(10**s.SUT.CPUPct / *s.Rate.Achieved, 3)
	}
	return r
}

// DivergencePct is the largest |a − b| / min(a, b) over every pair of the
// values, in percent, rounded to 0.1: with positive values that is
// (max − min) / min. It is nil when there are fewer than two values, or one
// is missing or not positive (no ratio to a zero means anything).
func DivergencePct(vals []*float64) *float64 {
	if len(vals) < 2 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v == nil || !(*v > 0) || math.IsInf(*v, 0) {
			return nil
		}
		lo, hi = min(lo, *v), max(hi, *v)
	}
	return round(100*(hi-lo)/lo, 1)
}

// group is one window (or one run) of a comparison: the per-tick p95 and
// the latencies of its runs, pooled, in ms. lat is nil when a run of it
// has no raw records.
type group struct {
	name string
	p95  []float64
	lat  []float64
}

// tickGroups pools the per-tick p95 and the latencies of runs by window,
// or by run when a run has no window, in order of first appearance. Runs
// without a timeline are named in noTicks, and runs with one but without
// raw records in noRecords.
func tickGroups(in []CompareInput) (groups []group, noTicks, noRecords []string) {
	index := map[string]int{}
	for _, r := range in {
		if r.Ticks == nil {
			noTicks = append(noTicks, RunName(r.Summary.Run, r.Source))
			continue
		}
		name := r.Summary.Run.Window
		if name == "" {
			name = RunName(r.Summary.Run, r.Source)
		}
		i, ok := index[name]
		if !ok {
			i = len(groups)
			index[name] = i
			groups = append(groups, group{name: name, lat: []float64{}})
		}
		g := &groups[i]
		g.p95 = append(g.p95, tickP95s(r.Ticks)...)
		switch {
		case r.Latencies == nil:
			noRecords = append(noRecords, RunName(r.Summary.Run, r.Source))
			g.lat = nil
		case g.lat != nil:
			g.lat = append(g.lat, r.Latencies...)
		}
	}
	return groups, noTicks, noRecords
}

// RunName is how a comparison names a run that carries no window: its
// summary file's base name, else its id.
func RunName(r tare.Run, source string) string {
	if source != "" && source != "store" {
		return filepath.Base(source)
	}
	if r.ID != "" {
		return r.ID
	}
	return "?"
}

func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " and " + names[len(names)-1]
}

// tickP95s is the p95 of every tick with completions, in ms.
func tickP95s(ticks []tare.Tick) []float64 {
	var out []float64
	for _, t := range ticks {
		if t.Completions > 0 {
			out = append(out, ms(t.P95))
		}
	}
	return out
}

// windowTest tests a against b: their per-tick p95, and their requests'
// latencies with intervals at confidence.
func windowTest(a, b group, confidence float64) (t tare.WindowTest) {
	t = tare.WindowTest{A: a.name, B: b.name, TicksA: len(a.p95), TicksB: len(b.p95), ConfidencePct: Confidence}
	var warnings []string
	defer func() { t.Warning = strings.Join(warnings, "; ") }()
	if a.lat != nil && b.lat != nil {
		rt, err := RequestTest(a.lat, b.lat, confidence, RequestResamples, bootstrapSeed)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s vs %s: %v: no test on requests", a.name, b.name, err))
		}
		t.Requests = rt
	}
	mw, err := MannWhitneyU(a.p95, b.p95)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("%s vs %s: %v: no test on ticks", a.name, b.name, err))
		return t
	}
	t.U, t.Z, t.PValue = round(mw.U, 1), round(mw.Z, 3), round(mw.P, 4)
	diff, lo, hi, err := BootstrapMedianDiff(a.p95, b.p95, Confidence, BootstrapResamples, bootstrapSeed)
	if err == nil {
		t.DiffMS, t.CILowMS, t.CIHighMS = round(diff, 3), round(lo, 3), round(hi, 3)
	}
	if n := min(len(a.p95), len(b.p95)); n < MinTestTicks {
		warnings = append(warnings, fmt.Sprintf("only %d ticks with completions in %s: the test on ticks has little power (want %d or more in each); run longer", n, smaller(a, b), MinTestTicks))
	}
	return t
}

func smaller(a, b group) string {
	if len(a.p95) <= len(b.p95) {
		return a.name
	}
	return b.name
}

// MannWhitney is the outcome of a Mann-Whitney U test of two independent
// samples x and y.
type MannWhitney struct {
	U      float64 // U of x: the number of (x, y) pairs with x > y, ties counting one half
	Z      float64 // standardised U, continuity- and tie-corrected; 0 when every value ties
	P      float64 // two-sided p-value: exact for small samples, else of the normal approximation
	NX, NY int
}

// MannWhitneyU tests whether values of x tend to be larger or smaller than
// values of y, without assuming any distribution: per-tick p95 is far from
// normal (a few polluted ticks make a long right tail).
//
// U and the p-value are go-moremath's (the test benchstat runs): the exact
// distribution of U, ties included, while both samples have at most
// moremath.MannWhitneyExactLimit values (50; 25 with ties), where the
// normal approximation is rough; beyond, the normal approximation with the
// tie and continuity corrections. Z is U standardised that way at every
// size, a figure to read beside p (with the values of both samples ranked
// together, n = nx+ny and t the size of each group of tied values):
//
//	μ  = nx·ny/2
//	σ² = nx·ny/12 · ((n+1) − Σ(t³−t) / (n(n−1)))
//	z  = (U − μ ∓ ½) / σ     the ½ towards μ: continuity correction
//
// When every value ties, U is nx·ny/2, z 0 and p 1: no evidence either way.
// Either sample empty is an error wrapping ErrTooFew.
func MannWhitneyU(x, y []float64) (MannWhitney, error) {
	nx, ny := len(x), len(y)
	r := MannWhitney{P: 1, NX: nx, NY: ny}
	res, err := moremath.MannWhitneyUTest(x, y, moremath.LocationDiffers)
	switch {
	case nx == 0 || ny == 0 || errors.Is(err, moremath.ErrSampleSize):
		return MannWhitney{}, fmt.Errorf("mann-whitney of %d and %d values: %w", nx, ny, ErrTooFew)
	case errors.Is(err, moremath.ErrSamplesEqual):
		r.U = float64(nx*ny) / 2
		return r, nil
	case err != nil:
		return MannWhitney{}, fmt.Errorf("mann-whitney of %d and %d values: %w", nx, ny, err)
	}
	r.U, r.P = res.U, res.P
	r.Z = standardU(x, y, res.U)
	return r, nil
}

// standardU is z of U, as MannWhitneyU gives it.
func standardU(x, y []float64, u float64) float64 {
	all := append(slices.Clone(x), y...)
	slices.Sort(all)
	var tieTerm float64
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j] == all[i] {
			j++
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	fx, fy, n := float64(len(x)), float64(len(y)), float64(len(all))
	variance := fx * fy / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if !(variance > 0) {
		return 0
	}
	d := u - fx*fy/2
	switch {
	case d > 0.5:
		d -= 0.5
	case d < -0.5:
		d += 0.5
	default:
		d = 0
	}
	return d / math.Sqrt(variance)
}

// BootstrapMedianDiff estimates median(x) − median(y) and a percentile
// bootstrap interval for it at the given confidence (percent): resamples of
// x and of y, each drawn with replacement and at its own size, give the
// distribution of the difference, and the interval is its α/2 and 1 − α/2
// quantiles. Medians and quantiles are go-moremath's Sample.Quantile
// (Hyndman and Fan's R8, the median as usual). The draws come from a PCG
// generator seeded from seed alone, so the interval is the same every time.
// Fewer than two values in either sample is an error wrapping ErrTooFew.
func BootstrapMedianDiff(x, y []float64, confidence float64, resamples int, seed uint64) (diff, lo, hi float64, err error) {
	if len(x) < 2 || len(y) < 2 {
		return 0, 0, 0, fmt.Errorf("bootstrap of %d and %d values: %w", len(x), len(y), ErrTooFew)
	}
	if !(confidence > 0 && confidence < 100) || resamples < 1 {
		return 0, 0, 0, fmt.Errorf("bootstrap: confidence %g%% or %d resamples out of range", confidence, resamples)
	}
	rng := rand.New(rand.NewPCG(seed, 0x7461726562737472)) // "tarebstr"
	bx, by := make([]float64, len(x)), make([]float64, len(y))
	diffs := make([]float64, resamples)
	for i := range diffs {
		for k := range bx {
			bx[k] = x[rng.IntN(len(x))]
		}
		for k := range by {
			by[k] = y[rng.IntN(len(y))]
		}
		diffs[i] = median(bx) - median(by)
	}
	d := moremath.Sample{Xs: diffs}
	d.Sort()
	alpha := (100 - confidence) / 100
	return median(slices.Clone(x)) - median(slices.Clone(y)), d.Quantile(alpha / 2), d.Quantile(1 - alpha/2), nil
}

// Median is the median of v, go-moremath's (benchstat's), on a copy: v
// is left as it was.
func Median(v []float64) float64 {
	return median(slices.Clone(v))
}

// median sorts v in place and returns its median.
func median(v []float64) float64 {
	s := moremath.Sample{Xs: v}
	return s.Sort().Quantile(0.5)
}

// PText is a p-value in words, two significant figures: "= 0.31", or
// "< least" when p is below least, the smallest p-value the test can
// tell ("< 0.001" for a permutation test none of whose 999 shuffles
// was as extreme).
func PText(p, least float64) string {
	if p < least {
		return fmt.Sprintf("< %.2g", least)
	}
	return fmt.Sprintf("= %.2g", p)
}

// RequestsToResolve is how many requests a window would need to tell a
// ratio between two windows from chance at the given power (0..1), from
// the interval ratioLow … ratioHigh its test gave at the given confidence
// (percent) on n requests: the interval of the log of a ratio narrows as
// 1/√n, so from its half-width h at n requests, to resolve L = |ln ratio|
//
//	n' = n · (h / z₁₋α/₂)² · ((z₁₋α/₂ + z_power) / L)²
//
// ok is false when the ratio is 1 or the interval has no width: no number
// of requests follows.
func RequestsToResolve(n int, ratio, ratioLow, ratioHigh, confidencePct, power float64) (requests float64, ok bool) {
	z := moremath.StdNormal.InvCDF(1 - (1-confidencePct/100)/2)
	h := (math.Log(ratioHigh) - math.Log(ratioLow)) / 2
	l := math.Abs(math.Log(ratio))
	if !(l > 0) || !(h > 0) {
		return 0, false
	}
	zPower := moremath.StdNormal.InvCDF(power)
	return float64(n) * math.Pow(h/z*(z+zPower)/l, 2), true
}

// Permutations is how many shuffles TickVariation draws at most for the
// latency signal: its smallest p-value is 1/(Permutations+1), 0.001.
const Permutations = 999

// Variation is the outcome of TickVariation.
type Variation struct {
	P              float64 // the p-value: (1 + shuffles as slow) / (1 + shuffles)
	Hits, Shuffles int     // shuffles as slow as the run, of those drawn
	Stopped        bool    // before all were drawn: the answer was known
	Requests       int     // the requests compared
	Ticks          int     // the ticks they were in, those with one or more
}

// PText is the p-value in words: "= 0.31", "< 0.001" when no shuffle
// varied as much.
func (v Variation) PText() string {
	return PText(v.P, 1/float64(v.Shuffles))
}

// TickVariation tests whether some of groups (the sampled requests of
// each tick) are slower than chance makes groups of their sizes. The
// statistic is how far the slower groups' requests rank above the middle
// of all of them, Kruskal and Wallis's spread of mean ranks taken on its
// slow side only:
//
//	H = Σₖ nₖ · max(0, R̄ₖ − (N+1)/2)²    R̄ₖ: group k's mean rank among all N values
//
// Ranks, so one enormous request counts as one slow request, not as a slow
// tick; the slow side only, so ticks faster than the rest (which chance
// makes too) do not dilute the slow ones: against a stall of 3 ticks in
// 30, it halves the p-value's spread. Its distribution under chance is
// drawn, not assumed: the ranks are shuffled among the groups, sizes kept,
// up to shuffles times with a fixed seed (the same run gives the same p).
// Once more shuffles than alpha allows have been as varied, the answer is
// known and it stops: a run of no significance costs a few dozen shuffles.
// Each costs one pass over the values, at most SampleSize of them.
func TickVariation(groups [][]time.Duration, shuffles int, alpha float64) Variation {
	var values []time.Duration
	var sizes []int
	for _, g := range groups {
		if len(g) > 0 {
			values = append(values, g...)
			sizes = append(sizes, len(g))
		}
	}
	v := Variation{Requests: len(values), Ticks: len(sizes), P: 1}
	if len(sizes) < 2 {
		return v
	}
	ranks := midRanks(values)
	observed := spread(ranks, sizes)
	// Float sums of the same ranks in another order may differ in the
	// last bits: a shuffle within that of the observed is as varied.
	tie := observed * 1e-9
	rng := rand.NewPCG(0x1a7e, 0x5ca1e)
	enough := int(math.Ceil(alpha * float64(shuffles+1)))
	for v.Shuffles < shuffles {
		shuffle(ranks, rng)
		v.Shuffles++
		if spread(ranks, sizes) >= observed-tie {
			v.Hits++
			if v.Hits >= enough && v.Shuffles < shuffles {
				v.Stopped = true
				break
			}
		}
	}
	v.P = float64(v.Hits+1) / float64(v.Shuffles+1)
	return v
}

// shuffle is Fisher and Yates's, each index drawn by Lemire's multiply
// from 32 bits of the generator: its bias, under n/2³² (2·10⁻⁶ at
// SampleSize), is far below what a p-value of two figures shows, and it
// costs a third of rand.Shuffle's time.
func shuffle(v []float64, rng *rand.PCG) {
	for i := len(v) - 1; i > 0; i-- {
		j := int(uint64(uint32(rng.Uint64())) * uint64(i+1) >> 32)
		v[i], v[j] = v[j], v[i]
	}
}

// midRanks returns the ranks of values, 1 for the smallest, ties sharing
// the mean of their ranks.
func midRanks[T cmp.Ordered](values []T) []float64 {
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(values[a], values[b]) })
	ranks := make([]float64, len(values))
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && values[order[j]] == values[order[i]] {
			j++
		}
		mid := float64(i+j+1) / 2 // ranks i+1 .. j
		for k := i; k < j; k++ {
			ranks[order[k]] = mid
		}
		i = j
	}
	return ranks
}

// spread is H over consecutive groups of ranks of the given sizes.
func spread(ranks []float64, sizes []int) float64 {
	h, at := 0.0, 0
	middle := float64(len(ranks)+1) / 2
	for _, n := range sizes {
		s := 0.0
		for _, r := range ranks[at : at+n] {
			s += r
		}
		d := max(s/float64(n)-middle, 0)
		h += float64(n) * d * d
		at += n
	}
	return h
}
