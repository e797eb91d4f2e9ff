package judge

import (
	"fmt"

	"github.com/tare-dev/tare"
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
	codes bool   // the code's own: a finding, not the host
	text  string // why, in words
}

// evidenceOf weighs the slow ticks against the usual ones: whether any
// outside wait (other processes, kernel threads, steal) overlapped them;
// if none did, whether the service was on CPU doing more per request or
// off CPU (a lock, a sleep, I/O) and whether the host's I/O pressure
// rose meanwhile; and whether the CPU itself ran slower. Only what
// those leave unexplained stays suspect.
func evidenceOf(slow, usual []tare.Tick, vcpus int) evidence {
	outside, overlapped := 0.0, 0
	for _, t := range slow {
		w := outsideWait(t.Host, vcpus)
		outside += w
		if w >= outsideFloor {
			overlapped++
		}
	}
	if overlapped > 0 {
		return evidence{text: fmt.Sprintf("%d of those %d ticks overlapped outside waits (%.1f%% of a CPU on average: other processes, kernel threads or steal), which points at the host (the tail signal names whom)",
			overlapped, len(slow), outside/float64(len(slow)))}
	}
	clear := fmt.Sprintf("no outside wait overlapped those ticks (under %g%% of a CPU each: the probe saw every wait of the service's threads)", outsideFloor)
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

// fixedWork is the median of the ticks' timed fixed work, 0 when none was
// timed.
func fixedWork(ticks []tare.Tick) float64 {
	var v []float64
	for _, t := range ticks {
		if t.Host != nil && t.Host.FixedWorkUS != nil {
			v = append(v, *t.Host.FixedWorkUS)
		}
	}
	if len(v) == 0 {
		return 0
	}
	return median(v)
}

// cpuPerRequest is the median over the ticks of the service's CPU time per
// completion, in CPU-seconds; 0 when unknown.
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
	return median(v)
}

// ioPressure is the median of the ticks' I/O pressure (some), 0 where
// unread.
func ioPressure(ticks []tare.Tick) float64 {
	var v []float64
	for _, t := range ticks {
		if t.Host != nil && t.Host.PSIIOSome != nil {
			v = append(v, *t.Host.PSIIOSome)
		}
	}
	if len(v) == 0 {
		return 0
	}
	return median(v)
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
