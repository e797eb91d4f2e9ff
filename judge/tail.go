package judge

import (
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// tail judges the slowest requests by what each of them overlapped
// (tare.Tail, where the scheduler probe measured the waits). It fires
// when the slowest 1 % (or 5 %) overlapped outside waits more often than
// requests drawn at random from the run do (p below th.TailChance), or,
// where most requests overlapped some, for a larger share of their
// lives than the rest (beyondChance), and
// those waits moved the percentile users read by th.TailFactor or more:
// the p99 (p95) of every request the probe measured whole, against the
// p99 (p95) of their latencies less the outside wait each overlapped. A
// neighbour that moved the tail is pollution even when its mean share is small; one whose
// waits fell on fast and slow requests alike moved nothing.
func tail(s *tare.Summary, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalTail, Threshold: th.TailFactor}
	t := s.Tail
	if t == nil {
		sig.Detail = "the scheduler probe did not measure the waits, so which requests overlapped outside interference is not known: the neighbours signal judges the run's mean wait instead"
		return sig
	}
	if t.Requests < minTailRequests {
		sig.Value = tare.Float(0)
		sig.Detail = fmt.Sprintf("only %d requests were measured whole: too few to tell the slowest from the rest (%d at least)", t.Requests, minTailRequests)
		return sig
	}
	best, moved := bestSlice(s, t, th)
	if best < 0 || moved < th.TailFactor {
		if marks := tickMarks(s, t, th); len(marks) > 0 {
			var texts []string
			most := 0.0
			for _, m := range marks {
				most = max(most, m.moved)
				texts = append(texts, m.text)
			}
			sig.Fired, sig.Value, sig.Detail = true, roundTo(most, 2), strings.Join(texts, "; and, in the same run, ")
			return sig
		}
	}
	if best < 0 {
		sig.Value = tare.Float(0)
		sl := t.Slowest[0]
		sig.Detail = fmt.Sprintf("%s; no more than chance gives requests drawn at random (p %s%s, threshold %g): no outside wait moved the tail",
			t.Sentence(sl), stats.PText(sl.P, leastTailP), shareText(sl), th.TailChance)
		if p50, p99 := s.Latency.P50, s.Latency.P99; 2*sl.Overlapped <= sl.Requests && p50 != nil && p99 != nil && *p99 >= spikeFactor**p50 {
			// The tail users read, and nothing outside in it: the code's.
			sig.Fired, sig.Finding = true, true
			sig.Detail += fmt.Sprintf("; the p99 (%s) is %.1f× the p50 (%s), and its slowest requests overlapped no outside wait: the code's own spikes (a pause, a lock, a collection, a slow path)",
				tare.MSText(*p99), *p99 / *p50, tare.MSText(*p50))
		}
		return sig
	}
	sl := t.Slowest[best]
	sig.Value = roundTo(moved, 2)
	q := sl.Quantile()
	text := fmt.Sprintf("%s, %s; without the outside wait each overlapped, the %s would have been %s rather than %s (×%.2f, threshold ×%g)",
		t.Sentence(sl), chanceText(sl, th), q, tare.MSText(*t.Unwaited.At(sl)), tare.MSText(*t.Latency(s, sl)), moved, th.TailFactor)
	if moved >= th.TailFactor {
		sig.Fired = true
		sig.Detail = text
		return sig
	}
	sig.Detail = text + ": too little to change what the figures say"
	return sig
}

// tickMarks is what the ticks the slowest requests lived in say moved
// the tail, where the outside waits they overlapped did not: bursts of
// steal (stolenTail), a crowd (crowdedTail), or both. Both is common: a
// hog that keeps every vCPU of a VM busy draws the hypervisor's steal
// too, and naming only the steal hides the neighbour a user can stop.
func tickMarks(s *tare.Summary, t *tare.Tail, th Thresholds) []marked {
	var marks []marked
	if m, ok := stolenTail(s, t, th); ok {
		marks = append(marks, m)
	}
	if m, ok := crowdedTail(s, t, th); ok {
		marks = append(marks, m)
	}
	return marks
}

// marked is what stolenTail or crowdedTail found: how many times the
// ticks they mark (stolen, crowded) moved a percentile, in words.
type marked struct {
	moved  float64
	text   string
	stolen bool // by bursts of steal; by a crowd otherwise
}

// markedMoved is how many times the slice's percentile over every
// request (all) is the same percentile over the requests of the unmarked
// ticks (other, from unmarked), when the slowest lived in marked ticks
// more than requests drawn at random do (p below th.TailChance) and that
// moved it th.TailFactor or more; all zero otherwise.
func markedMoved(s *tare.Summary, sl tare.TailSlice, unmarked tare.PercentilesMS, p float64, th Thresholds) (moved float64, all, other float64) {
	a, o := s.Tail.Latency(s, sl), unmarked.At(sl)
	if p >= th.TailChance || a == nil || o == nil || *o <= 0 || *a / *o < th.TailFactor {
		return 0, 0, 0
	}
	return *a / *o, *a, *o
}

// stolenTail judges the slowest requests by the ticks they lived in: a
// burst of steal (tare.StolenShare of one CPU or more) stalls whichever
// request ran on that CPU, by up to what was taken, yet spread over the
// tick's requests it is a fraction of a millisecond each. It fires when
// the slowest lived in stolen ticks more than chance gives and that
// moved the percentile (markedMoved), and the most taken from one CPU in
// such a tick could have held a request up by a quarter of that
// percentile or more (a few milliseconds of steal do not make a 200 ms
// stall, whatever tick it fell in).
func stolenTail(s *tare.Summary, t *tare.Tail, th Thresholds) (marked, bool) {
	for _, sl := range t.Slowest {
		moved, all, other := markedMoved(s, sl, t.Unstolen, sl.StolenP, th)
		if moved == 0 || sl.StealMS == nil || *sl.StealMS < all/4 {
			continue
		}
		q := sl.Quantile()
		return marked{moved: moved, stolen: true, text: fmt.Sprintf("the %s tail: %d of %d requests lived in ticks in which the hypervisor took a CPU away for %g%% of the tick or more (up to %s from one CPU; of all %d requests measured, %d did), more than chance gives requests drawn at random (p %s, threshold %g): the hypervisor's steal, in bursts that stall whatever ran on that CPU; over the requests of the other ticks the %s was %s rather than %s (×%.2f, threshold ×%g)",
			q, sl.Stolen, sl.Requests, 100*tare.StolenShare, tare.MSText(*sl.StealMS), t.Requests, t.Stolen, stats.PText(sl.StolenP, leastTailP), th.TailChance, q, tare.MSText(other), tare.MSText(all), moved, th.TailFactor)}, true
	}
	return marked{}, false
}

// crowdedTail judges the slowest requests by the CPU other processes
// used in the ticks they lived in (tare.CrowdedShare of one CPU or more):
// a neighbour that takes a CPU slows the service without its threads
// waiting behind it, when they wait behind each other, or tare, on the
// CPUs left, or share a physical core with it. It fires when the slowest
// lived in crowded ticks more than chance gives and that moved the
// percentile (markedMoved), naming the busiest neighbour of those ticks.
// A neighbour busy all run long makes every tick crowded and is the
// neighbours signal's to judge.
func crowdedTail(s *tare.Summary, t *tare.Tail, th Thresholds) (marked, bool) {
	for _, sl := range t.Slowest {
		moved, all, other := markedMoved(s, sl, t.Uncrowded, sl.CrowdedP, th)
		if moved == 0 || len(sl.CrowdedBy) == 0 {
			continue
		}
		q := sl.Quantile()
		return marked{moved: moved, text: fmt.Sprintf("the %s tail: %d of %d requests lived in ticks in which other processes used %g%% of a CPU or more, busiest %s (of all %d requests measured, %d did), more than chance gives requests drawn at random (p %s, threshold %g): a neighbour that takes a CPU slows the service though its threads waited behind it too little to show (they wait behind each other and tare on the CPUs left, or share a physical core with it); over the requests of the other ticks the %s was %s rather than %s (×%.2f, threshold ×%g)",
			q, sl.Crowded, sl.Requests, 100*tare.CrowdedShare, tare.OwnerNames(sl.CrowdedBy), t.Requests, t.Crowded, stats.PText(sl.CrowdedP, leastTailP), th.TailChance, q, tare.MSText(other), tare.MSText(all), moved, th.TailFactor)}, true
	}
	return marked{}, false
}

// StealMovedTail reports whether the hypervisor's bursts of steal moved
// s's tail, as the tail signal judges it (stolenTail): a run whose
// tail is the host's, not the code's, whatever else it says.
func StealMovedTail(s *tare.Summary, th Thresholds) bool {
	if s.Tail == nil {
		return false
	}
	_, ok := stolenTail(s, s.Tail, th)
	return ok
}

// beyondChance reports whether the slice's requests overlapped outside
// waits more than chance gives: more of them did than of requests drawn
// at random (P), or, where most requests overlapped some, they waited
// for more of their lives than the rest (ShareP).
func beyondChance(sl tare.TailSlice, th Thresholds) bool {
	return sl.P < th.TailChance || sl.ShareP != nil && *sl.ShareP < th.TailChance
}

// chanceText says how the slice's requests overlapped outside waits
// beyond chance (beyondChance).
func chanceText(sl tare.TailSlice, th Thresholds) string {
	if sl.P < th.TailChance {
		return fmt.Sprintf("more than chance gives requests drawn at random (p %s, threshold %g)", stats.PText(sl.P, leastTailP), th.TailChance)
	}
	return fmt.Sprintf("not more often than chance gives requests drawn at random (p %s), but for more of their lives: their outside wait, as a share of their latency, ranked above the other requests' (Mann-Whitney, p %s, threshold %g)",
		stats.PText(sl.P, leastTailP), stats.PText(*sl.ShareP, leastTailP), th.TailChance)
}

// shareText is the slice's ShareP, for a sentence that gives its P: ""
// where it was not worked out.
func shareText(sl tare.TailSlice) string {
	if sl.ShareP == nil {
		return ""
	}
	return fmt.Sprintf("; by the share of their latency they waited, p %s", stats.PText(*sl.ShareP, leastTailP))
}

// bestSlice is the slowest slice that overlapped outside waits more than
// chance gives (beyondChance) and whose waits moved its percentile most,
// and how many times; -1 when none did more than chance.
func bestSlice(s *tare.Summary, t *tare.Tail, th Thresholds) (best int, moved float64) {
	best = -1
	for i, sl := range t.Slowest {
		m := MovedBy(s, t, sl)
		if beyondChance(sl, th) && m > moved {
			best, moved = i, m
		}
	}
	return best, moved
}

// spikeFactor: a p99 this many times the p50 is a tail worth a finding,
// when nothing outside overlapped it.
const spikeFactor = 2

// minTailRequests is the fewest measured requests the tail signal judges:
// the slowest 1 % of fewer is one or two requests.
const minTailRequests = 200

// MovedBy is how many times the run's latency percentile of the slowest
// pct % is the same percentile without the outside waits; 0 when either
// is missing.
func MovedBy(s *tare.Summary, t *tare.Tail, sl tare.TailSlice) float64 {
	all, without := t.Latency(s, sl), t.Unwaited.At(sl)
	if all == nil || without == nil || *without <= 0 {
		return 0
	}
	return *all / *without
}

// leastTailP is the smallest tail p-value the detail tells apart.
const leastTailP = 1e-4
