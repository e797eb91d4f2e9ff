package judge

import (
	"fmt"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// What tells a slow tick that no outside wait overlapped from the host's
// doing, where the probe saw every wait of the measured threads.
const (
	// outsideFloor is the outside wait, in percent of one CPU, under which
	// a tick overlapped none: a wake-up's stray microseconds, not a
	// neighbour.
	outsideFloor = 1.0
	// cpuFactor: the service used at least this many times its usual CPU
	// per request in the slow ticks: it was on CPU, doing more.
	cpuFactor = 1.5
	// slowerFactor: tare's fixed work took at least this many times its
	// usual time: the CPU itself was slower.
	slowerFactor = 1.5
	// ioRise: the host's I/O pressure rose by at least this many points
	// in the slow ticks, and to at least this share of the tick.
	ioRise = 10.0
)

// evidence is what the slow ticks' host readings say of latency that
// moved without more work.
type evidence struct {
	codes   bool   // the code's own: a finding, not the host
	unmoved bool   // the host's, but it moved the run's tail too little to matter
	text    string // why, in words
}

// evidenceOf weighs the slow ticks against the usual ones: whether
// outside waits (other processes, steal) overlapped them
// enough to explain them; if not, whether the service was on CPU doing
// more per request or off CPU (a lock, a sleep, I/O) and whether the
// host's I/O pressure rose meanwhile; and whether the CPU itself ran
// slower. Only what those leave unexplained stays suspect. usualP95 is
// the median tick's p95, which the slow ticks exceed.
//
// Where the probe measured enough whole requests, what the slowest of
// them overlapped outranks the ticks' means (tailCleared): steal spread
// over every CPU, or a neighbour's waits that fell on fast requests,
// raise a tick's outside wait without holding up its slow requests; and
// waits they did overlap, that moved the run's tail too little to matter
// (tailUnmoved), leave the figures the code's.
func evidenceOf(s *tare.Summary, slow, usual []tare.Tick, usualP95 time.Duration, th Thresholds) evidence {
	vcpus := s.Env.VCPUs
	clear := "the outside waits that overlapped those ticks, if any, were too few to explain them (the probe saw every wait of the service's threads)"
	if w := outsideOf(slow, usual, vcpus, usualP95); w.explains {
		if moved := tailUnmoved(s, th); moved != "" {
			return evidence{unmoved: true, text: fmt.Sprintf("outside waits overlapped those ticks, %.1f%% of a CPU on average against %.1f%% in the others (other processes or steal), enough to explain them, but %s",
				w.slow, w.usual, moved)}
		}
		cleared, ok := tailCleared(s, th)
		if !ok {
			return evidence{text: fmt.Sprintf("outside waits overlapped those ticks, %.1f%% of a CPU on average against %.1f%% in the others (other processes or steal), enough to explain them: it points at the host (the tail signal names whom)",
				w.slow, w.usual)}
		}
		clear = fmt.Sprintf("outside waits overlapped those ticks, %.1f%% of a CPU on average against %.1f%% in the others (other processes or steal), but %s", w.slow, w.usual, cleared)
	}
	if f := ratio(fixedWork(slow), fixedWork(usual)); f >= slowerFactor {
		return evidence{text: fmt.Sprintf("%s, but tare's fixed work took %.1f× its usual time in them: the CPU itself ran slower (a shared physical core, memory bandwidth, or a hypervisor that reports no steal), which no counter shows", clear, f)}
	}
	if c := ratio(cpuPerRequest(slow, vcpus), cpuPerRequest(usual, vcpus)); c >= cpuFactor {
		return evidence{codes: true, text: fmt.Sprintf("%s, and the service used %.1f× its usual CPU per request in them: the code's own (more work per request: a cache refill, a garbage collection, a recycled worker warming up)", clear, c)}
	}
	slowIO, usualIO := ioPressure(slow), ioPressure(usual)
	if slowIO >= ioRise && slowIO-usualIO >= ioRise {
		return evidence{text: fmt.Sprintf("%s, but the service was off CPU while the host's I/O pressure rose to %.0f%% of the tick (from %.0f%%)%s: held up by the host's I/O", clear, slowIO, usualIO, ioNames(slow))}
	}
	return evidence{codes: true, text: fmt.Sprintf("%s, and the service was off CPU in them, not doing more: the code's own (blocked on a lock, a sleep, a pause, or a call it made)", clear)}
}

// tailCleared says, in words, why the run's slowest requests clear the
// host, where the probe measured enough of them whole: none of the
// slowest slices overlapped outside waits more than requests drawn at
// random do, and neither bursts of steal nor a crowd moved them
// (tickMarks). ok is false where per-request blame was not
// measured, or did not clear the host.
func tailCleared(s *tare.Summary, th Thresholds) (text string, ok bool) {
	t := s.Tail
	if t == nil || t.Requests < minTailRequests {
		return "", false
	}
	if best, _ := bestSlice(s, t, th); best >= 0 || len(tickMarks(s, t, th)) > 0 {
		return "", false
	}
	return fmt.Sprintf("the run's slowest requests overlapped them no more than requests drawn at random (%d of all %d requests measured overlapped outside waits; per-request blame, which outranks a tick's mean: steal spread over every CPU, or waits that fell on fast requests, hold up no slow one)",
		t.Overlapped, t.Requests), true
}

// tailUnmoved says, in words, why the outside waits the run's slowest
// requests overlapped beyond chance changed too little to matter, where
// the probe measured enough of them whole: without them no slice's
// percentile would have been th.TailFactor lower, and neither bursts of
// steal nor a crowd moved it (the tail signal's own measure). A
// neighbour's blip that doubled one tick's p95 yet moved the p99 ×1.1
// does not make the run's figures the host's. Empty where the tail was
// not measured, did not overlap beyond chance (tailCleared's), or moved.
func tailUnmoved(s *tare.Summary, th Thresholds) string {
	t := s.Tail
	if t == nil || t.Requests < minTailRequests || len(tickMarks(s, t, th)) > 0 {
		return ""
	}
	best, moved := bestSlice(s, t, th)
	if best < 0 || moved >= th.TailFactor {
		return ""
	}
	sl := t.Slowest[best]
	return fmt.Sprintf("without the outside wait each request overlapped, the %s would have been %s rather than %s (×%.2f, threshold ×%g): too little to change what the figures say",
		sl.Quantile(), tare.MSText(*t.Unwaited.At(sl)), tare.MSText(*t.Latency(s, sl)), moved, th.TailFactor)
}

// outside compares the outside waits of the slow ticks with the others'.
type outside struct {
	slow, usual float64 // mean outside wait, % of one CPU
	explains    bool
}

// outsideOf says whether outside waits explain the slow ticks: at least
// outsideFloor of a CPU, twice what the other ticks had and more (spread
// alike over every tick, a busy host's background slowed none of them in
// particular), and enough time to hold a request up by a quarter of how
// far the slow ticks' p95 rose above the usual (a neighbour's 20 ms a
// second cannot make a 200 ms stall).
func outsideOf(slow, usual []tare.Tick, vcpus int, usualP95 time.Duration) outside {
	var o outside
	var rise, held []float64
	for _, t := range slow {
		w := outsideWait(t.Host, vcpus)
		o.slow += w / float64(len(slow))
		rise = append(rise, float64(t.P95-usualP95))
		if h := t.Host; h != nil {
			// A request runs on one CPU at a time: the steal that can
			// hold it up is one CPU's, not the sum over every CPU.
			one := w - h.CPU.Steal*float64(max(vcpus, 1)) + h.MaxCPUSteal()
			held = append(held, one/100*float64(h.End.Sub(h.Start)))
		}
	}
	for _, t := range usual {
		o.usual += outsideWait(t.Host, vcpus) / float64(max(len(usual), 1))
	}
	o.explains = o.slow >= outsideFloor && o.slow >= 2*o.usual && len(held) > 0 && stats.Median(held) >= stats.Median(rise)/4
	return o
}

// outsideWait is the tick's wait behind outside owners in percent of one
// CPU, with the steal of its CPUs: 0 without a host sample.
func outsideWait(h *tare.HostSample, vcpus int) float64 {
	if h == nil {
		return 0
	}
	secs := h.End.Sub(h.Start).Seconds()
	w := h.CPU.Steal * float64(max(vcpus, 1))
	if h.Blame != nil && secs > 0 {
		for _, x := range h.Blame.Waits {
			if x.Outside() {
				w += 100 * x.Waited.Seconds() / secs
			}
		}
	}
	return w
}

// fixedWork is the median of the ticks' timed fixed work.
func fixedWork(ticks []tare.Tick) float64 {
	return medianOf(ticks, func(h *tare.HostSample) *float64 { return h.FixedWorkUS })
}

// ioPressure is the median of the ticks' I/O pressure (some).
func ioPressure(ticks []tare.Tick) float64 {
	return medianOf(ticks, func(h *tare.HostSample) *float64 { return h.PSIIOSome })
}

// cpuPerRequest is the median over the ticks of the service's CPU time per
// completion, in CPU-seconds.
func cpuPerRequest(ticks []tare.Tick, vcpus int) float64 {
	var v []float64
	for _, t := range ticks {
		if t.Host == nil || t.Host.CPUBy == nil || t.Completions == 0 {
			continue
		}
		secs := t.Host.End.Sub(t.Host.Start).Seconds()
		v = append(v, t.Host.CPUBy.SystemUnderTest/100*float64(max(vcpus, 1))*secs/float64(t.Completions))
	}
	if len(v) == 0 {
		return 0
	}
	return stats.Median(v)
}

// medianOf is the median of a figure of the ticks' host samples, 0 where
// no tick has it.
func medianOf(ticks []tare.Tick, figure func(*tare.HostSample) *float64) float64 {
	var v []float64
	for _, t := range ticks {
		if t.Host != nil {
			if f := figure(t.Host); f != nil {
				v = append(v, *f)
			}
		}
	}
	if len(v) == 0 {
		return 0
	}
	return stats.Median(v)
}

// ioNames names who did the most I/O in the ticks, where /proc said.
func ioNames(ticks []tare.Tick) string {
	bytes := map[tare.ProcessIO]int64{}
	var top tare.ProcessIO
	for _, t := range ticks {
		if t.Host == nil {
			continue
		}
		for _, p := range t.Host.IOBy {
			k := tare.ProcessIO{Name: p.Name, PID: p.PID}
			bytes[k] += p.Bytes
			if bytes[k] > bytes[top] {
				top = k
			}
		}
	}
	if bytes[top] == 0 {
		return ""
	}
	return fmt.Sprintf("; `%s` (pid %d) did the most I/O, %.1f MB", top.Name, top.PID, float64(bytes[top])/1e6)
}

// ratio is a/b, 0 when either is unknown.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}
