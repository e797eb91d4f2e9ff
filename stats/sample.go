package stats

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// SampleSize is how many finished requests the recorder keeps, with their
// tick and their span, for the verdict's test of latency moving from tick
// to tick (tare.Tick.Sample): every request of a run up to that size, a
// uniform sample of a larger one. 8,192 of 32 bytes: 256 KB, whatever the
// run's length.
const SampleSize = 8192

// sampled is one finished request of the sample.
type sampled struct {
	from, to time.Duration // Scheduled and Done, from the run's start
	value    time.Duration // latency, per output token for a model call
	tick     int32         // the tick it finished in
	ok       bool          // it succeeded: failed ones only share the system
}

// reservoirOf is a uniform random sample of fixed size over a stream of
// unknown length (Vitter's algorithm R): the i-th request replaces a kept
// one with probability SampleSize / i. Its generator has a fixed seed, so
// the same results in the same order keep the same sample.
type reservoirOf[T any] struct {
	seen  int
	items []T
	rng   *rand.Rand
}

// reservoir is the sample the latency signal shuffles.
type reservoir struct{ reservoirOf[sampled] }

func (r *reservoirOf[T]) add(s T) {
	r.seen++
	if len(r.items) < SampleSize {
		if r.rng == nil {
			r.rng = rand.New(rand.NewPCG(0x7a4e, 0x5a4d))
		}
		r.items = append(r.items, s)
		return
	}
	if j := r.rng.IntN(r.seen); j < SampleSize {
		r.items[j] = s
	}
}

// byTick returns the values of the sampled requests that succeeded in
// ticks from to to (exclusive), one slice per tick, each divided by the
// number of requests that shared the system with it (sharedBy): what the
// request cost once the work it shared the system with is taken out.
func (r *reservoir) byTick(from, to int) [][]time.Duration {
	shared := r.sharedBy()
	out := make([][]time.Duration, to-from)
	count := make([]int, to-from)
	for _, s := range r.items {
		if k := int(s.tick); s.ok && k >= from && k < to {
			count[k-from]++
		}
	}
	all := make([]time.Duration, 0, len(r.items))
	for i, n := range count {
		out[i] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for i, s := range r.items {
		if k := int(s.tick); s.ok && k >= from && k < to {
			out[k-from] = append(out[k-from], time.Duration(float64(s.value)/shared[i]))
		}
	}
	return out
}

// sharedBy returns, for each sampled request, how many requests shared
// the system with it over its life, itself included, as the slowdown a
// CPU shared equally among them gives: the harmonic mean of their number
// over its life,
//
//	Hᵢ = (doneᵢ − scheduledᵢ) / ∫ dt / N(t)    from scheduledᵢ to doneᵢ
//
// A request that had the system to itself has 1; one that shared a CPU
// with two others all its life, 3, and its latency was three times its
// cost: latency that such work explains is not latency moving on its own.
// N(t) counts the sampled requests, the others scaled up to all the run's
// when the sample is part of it (then an estimate): 1 + (seen/kept) ·
// (sampled others). One sweep over the sorted ends of the sampled spans,
// the integral read at each end.
func (r *reservoir) sharedBy() []float64 {
	type end struct {
		at    time.Duration
		item  int
		start bool
	}
	ends := make([]end, 0, 2*len(r.items))
	for i, s := range r.items {
		ends = append(ends, end{s.from, i, true}, end{s.to, i, false})
	}
	slices.SortFunc(ends, func(a, b end) int { return cmp.Compare(a.at, b.at) })
	scale := float64(max(r.seen, 1)) / float64(max(len(r.items), 1))
	atStart := make([]float64, len(r.items)) // the integral up to the request's start
	shared := make([]float64, len(r.items))
	integral, n := 0.0, 0 // ∫ dt / N(t) from the first end; N(t) while n ≥ 1
	for k, e := range ends {
		if k > 0 && n > 0 {
			integral += float64(e.at-ends[k-1].at) / (1 + scale*float64(n-1))
		}
		if e.start {
			atStart[e.item] = integral
			n++
			continue
		}
		n--
		shared[e.item] = 1
		s := r.items[e.item]
		if life, alone := float64(s.to-s.from), integral-atStart[e.item]; life > 0 && alone > 0 {
			shared[e.item] = max(life/alone, 1)
		}
	}
	return shared
}

// perToken is the value a request gives the sample: its latency, per
// output token for a model call, so that long answers are not mistaken
// for slow ticks.
func perToken(res *tare.Result) time.Duration {
	lat := res.Latency()
	if res.OutputTokens > 0 {
		return lat / time.Duration(res.OutputTokens)
	}
	return lat
}
