package stats

import (
	"math/rand/v2"
	"time"

	"github.com/tare-dev/tare"
)

// SampleSize is how many requests the recorder keeps, with their tick, for
// the verdict's test of latency moving from tick to tick (tare.Tick.Sample):
// every request of a run up to that size, a uniform sample of a larger one.
// 8,192 values of 12 bytes: 96 KB, whatever the run's length.
const SampleSize = 8192

// sampled is one request of the sample: its tick and its value.
type sampled struct {
	tick  int32
	value time.Duration
}

// reservoir is a uniform random sample of fixed size over a stream of
// unknown length (Vitter's algorithm R): the i-th value replaces a kept
// one with probability SampleSize / i. Its generator has a fixed seed, so
// the same results in the same order keep the same sample.
type reservoir struct {
	seen  int
	items []sampled
	rng   *rand.Rand
}

func (r *reservoir) add(tick int, v time.Duration) {
	r.seen++
	if len(r.items) < SampleSize {
		if r.rng == nil {
			r.rng = rand.New(rand.NewPCG(0x7a4e, 0x5a4d))
		}
		r.items = append(r.items, sampled{int32(tick), v})
		return
	}
	if j := r.rng.IntN(r.seen); j < SampleSize {
		r.items[j] = sampled{int32(tick), v}
	}
}

// byTick returns the sampled values of ticks from to to (exclusive), one
// slice per tick, all cut from one allocation.
func (r *reservoir) byTick(from, to int) [][]time.Duration {
	out := make([][]time.Duration, to-from)
	count := make([]int, to-from)
	for _, s := range r.items {
		if k := int(s.tick); k >= from && k < to {
			count[k-from]++
		}
	}
	all := make([]time.Duration, 0, len(r.items))
	for i, n := range count {
		out[i] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for _, s := range r.items {
		if k := int(s.tick); k >= from && k < to {
			out[k-from] = append(out[k-from], s.value)
		}
	}
	return out
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
