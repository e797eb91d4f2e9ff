package judge

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

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
// stats.TickVariation): at a p-value below th.LatencyChance.
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
	medP95, medLatency, medWork := stats.Median(p95s), stats.Median(latencies), stats.Median(works)
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
	v := stats.TickVariation(flatTicks, stats.Permutations, th.LatencyChance)
	if v.P < th.LatencyChance {
		sig.Fired = true
		sig.Detail += fmt.Sprintf("; the same %d requests shuffled into ticks of the same sizes %s (p %s, threshold %g): latency moved without more work to do",
			v.Requests, asSlow(v), v.PText(), th.LatencyChance)
		if !Probed(s) {
			sig.Detail += ", which points at the host (the tick-level rule: the scheduler probe did not run, so whether outside waits overlapped the slow ticks is not known)"
			return sig
		}
		e := evidenceOf(s, slow, usual, time.Duration(medLatency), th)
		sig.Detail += "; " + e.text
		sig.Fired, sig.Finding = !e.unmoved, e.codes
		return sig
	}
	sig.Detail += fmt.Sprintf("; but the same %d requests shuffled into ticks of the same sizes %s (p %s, threshold %g): with few requests a tick, chance makes such ticks",
		v.Requests, asSlow(v), v.PText(), th.LatencyChance)
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
	med := stats.Median(waits)
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

// asSlow words how often the shuffles were as slow as the run.
func asSlow(v stats.Variation) string {
	switch {
	case v.Hits == 0:
		return fmt.Sprintf("were never as slow in %d tries", v.Shuffles)
	case v.Stopped:
		return fmt.Sprintf("were as slow in %d of the first %d tries", v.Hits, v.Shuffles)
	}
	return fmt.Sprintf("were as slow in %d of %d tries", v.Hits, v.Shuffles)
}
