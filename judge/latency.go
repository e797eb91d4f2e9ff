package judge

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// permutations is how many shuffles the latency signal's test draws at
// most: its smallest p-value is 1/(permutations+1), 0.001.
const permutations = 999

// latencyAlone looks for ticks whose p95 jumps while the work in the
// system (the requests between their scheduled time and their answer:
// for a queue, the jobs queued and in service) stays flat: more work did
// not arrive, so the time went somewhere else.
//
// The p95 is of each request's latency (per output token for a model
// call) divided by the requests it shared the system with (tare.Tick's
// Sample): a tick of long answers, or of requests that shared one CPU,
// is not a slow tick. And ticks of a few requests jump by chance (the p95
// of four requests is the slowest of them), so the jumps count only when
// the ticks of flat work are slower than the run's own requests, shuffled
// at random into ticks of the same sizes, make them (a permutation test,
// tickVariation): at a p-value below th.LatencyChance.
func latencyAlone(s *tare.Summary, ticks []tare.Tick, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalLatencyAlone, Threshold: float64(th.LatencyTicks)}
	// Only the ticks up to the last arrival: after it, a queue drains,
	// its work falling while what finishes is what waited longest.
	window := len(ticks)
	for window > 0 && ticks[window-1].Arrivals == 0 {
		window--
	}
	if window == 0 { // ticks that do not count their arrivals
		window = len(ticks)
	}
	var p95s, latencies, works []float64
	var live []tare.Tick
	for _, t := range ticks[:window] {
		if len(t.Sample) == 0 {
			continue
		}
		live = append(live, t)
		p95s = append(p95s, float64(p95(t.Sample)))
		latencies = append(latencies, float64(t.P95))
		works = append(works, t.InSystem)
	}
	if len(live) < 3 {
		sig.Value = tare.Float(0)
		sig.Detail = fmt.Sprintf("only %d ticks of the arrivals had requests that succeeded: too few to compare latency with load", len(live))
		return sig
	}
	medP95, medLatency, medWork := median(p95s), median(latencies), median(works)
	flat := max(medWork*1.2, medWork+1)
	waiting, serverFlat := serverQueue(s, live)
	n := 0
	var flatTicks [][]time.Duration
	var slow, usual []tare.Tick
	for i, t := range live {
		if t.InSystem > flat || !serverFlat(t) {
			continue
		}
		flatTicks = append(flatTicks, t.Sample)
		if p95s[i] >= th.LatencyFactor*medP95 && float64(t.P95)-medLatency >= float64(th.LatencyFloor) {
			n++
			slow = append(slow, t)
		} else {
			usual = append(usual, t)
		}
	}
	share := 100 * float64(n) / float64(len(live))
	sig.Value = tare.Float(float64(n))
	per := "latency"
	if s.Model != nil {
		per = "latency per output token"
	}
	sig.Detail = fmt.Sprintf("%d of %d ticks had a p95 ≥ %g× the median tick's (%s: each request's %s, divided by the requests that shared the system with it) while the %s stayed within +20%% / +1 of their median (%.1f)",
		n, len(live), th.LatencyFactor, tare.MSText(medP95/1e6), per, workName(s, ticks), medWork)
	if waiting != nil {
		sig.Detail += fmt.Sprintf(" and the server's own queue within +20%% / +1 of its median (%.1f waiting)", *waiting)
	}
	if !(n >= th.LatencyTicks || share >= th.LatencyShare && n > 0) {
		return sig
	}
	v := tickVariation(flatTicks, permutations, th.LatencyChance)
	if v.p < th.LatencyChance {
		sig.Fired = true
		sig.Detail += fmt.Sprintf("; the same %d requests shuffled into ticks of the same sizes %s (p %s, threshold %g): latency moved without more work to do",
			v.requests, v.asSlow(), v.pText(), th.LatencyChance)
		if !Probed(s) {
			sig.Detail += ", which points at the host (the tick-level rule: the scheduler probe did not run, so whether outside waits overlapped the slow ticks is not known)"
			return sig
		}
		e := evidenceOf(slow, usual, s.Env.VCPUs, time.Duration(medLatency))
		sig.Detail += "; " + e.text
		sig.Finding = e.codes
		return sig
	}
	sig.Detail += fmt.Sprintf("; but the same %d requests shuffled into ticks of the same sizes %s (p %s, threshold %g): with few requests a tick, chance makes such ticks",
		v.requests, v.asSlow(), v.pText(), th.LatencyChance)
	return sig
}

// p95 is the nearest-rank 95th percentile of v, which is not empty.
func p95(v []time.Duration) time.Duration {
	sorted := slices.Sorted(slices.Values(v))
	return sorted[int(math.Ceil(0.95*float64(len(sorted))))-1]
}

// serverQueue is, for a model target whose server's metrics gave its
// waiting requests every tick (Tick.QueueDepth), their median and whether
// a tick's stayed flat (within +20 % / +1 of it): latency that moved while
// the server's own queue grew is the server's queueing, not the host's.
// For other targets the median is nil and every tick is flat.
func serverQueue(s *tare.Summary, live []tare.Tick) (*float64, func(tare.Tick) bool) {
	all := func(tare.Tick) bool { return true }
	if !modelTarget(s) {
		return nil, all
	}
	waits := make([]float64, 0, len(live))
	for _, t := range live {
		if t.QueueDepth == nil {
			return nil, all
		}
		waits = append(waits, *t.QueueDepth)
	}
	med := median(waits)
	flat := max(med*1.2, med+1)
	return &med, func(t tare.Tick) bool { return *t.QueueDepth <= flat }
}

// workName says what the work in the system is, for the detail.
func workName(s *tare.Summary, ticks []tare.Tick) string {
	if modelTarget(s) {
		return "requests in flight"
	}
	for _, t := range ticks {
		if t.QueueDepth != nil {
			return "jobs in the system (queued and in service)"
		}
	}
	return "requests in flight"
}

// variation is the outcome of tickVariation.
type variation struct {
	p              float64 // the p-value: (1 + shuffles as slow) / (1 + shuffles)
	hits, shuffles int     // shuffles as slow as the run, of those drawn
	stopped        bool    // before all were drawn: the answer was known
	requests       int     // the requests compared
	ticks          int     // the ticks they were in, those with one or more
}

// asSlow words how often the shuffles were as slow as the run.
func (v variation) asSlow() string {
	switch {
	case v.hits == 0:
		return fmt.Sprintf("were never as slow in %d tries", v.shuffles)
	case v.stopped:
		return fmt.Sprintf("were as slow in %d of the first %d tries", v.hits, v.shuffles)
	}
	return fmt.Sprintf("were as slow in %d of %d tries", v.hits, v.shuffles)
}

// pText is the p-value in words: "= 0.31", "< 0.0005" when no shuffle
// varied as much.
func (v variation) pText() string {
	if v.hits == 0 {
		return fmt.Sprintf("< %.2g", 1/float64(v.shuffles))
	}
	return fmt.Sprintf("= %.2g", v.p)
}

// tickVariation tests whether some of groups (the sampled requests of
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
// Each costs one pass over the values, at most stats.SampleSize of them.
func tickVariation(groups [][]time.Duration, shuffles int, alpha float64) variation {
	var values []time.Duration
	var sizes []int
	for _, g := range groups {
		if len(g) > 0 {
			values = append(values, g...)
			sizes = append(sizes, len(g))
		}
	}
	v := variation{requests: len(values), ticks: len(sizes), p: 1}
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
	for v.shuffles < shuffles {
		shuffle(ranks, rng)
		v.shuffles++
		if spread(ranks, sizes) >= observed-tie {
			v.hits++
			if v.hits >= enough && v.shuffles < shuffles {
				v.stopped = true
				break
			}
		}
	}
	v.p = float64(v.hits+1) / float64(v.shuffles+1)
	return v
}

// shuffle is Fisher and Yates's, each index drawn by Lemire's multiply
// from 32 bits of the generator: its bias, under n/2³² (2·10⁻⁶ at
// stats.SampleSize), is far below what a p-value of two figures shows,
// and it costs a third of rand.Shuffle's time.
func shuffle(v []float64, rng *rand.PCG) {
	for i := len(v) - 1; i > 0; i-- {
		j := int(uint64(uint32(rng.Uint64())) * uint64(i+1) >> 32)
		v[i], v[j] = v[j], v[i]
	}
}

// midRanks returns the ranks of values, 1 for the smallest, ties sharing
// the mean of their ranks.
func midRanks(values []time.Duration) []float64 {
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
