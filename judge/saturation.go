package judge

import (
	"fmt"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// saturation says whether the system under test fell behind its load:
// work outstanding (queue depth, or requests in flight) grew through the
// arrival window while completions fell behind arrivals. It is a finding
// about the code, or the host's size, never about interference: it never
// raises the level. It says at what arrival rate it began and how much CPU
// the service had, so a failed SLO can be read as the capacity it is.
func saturation(s *tare.Summary, ticks []tare.Tick) tare.Signal {
	sig := tare.Signal{Name: SignalSaturation, Finding: true}
	var window []tare.Tick // the ticks with arrivals: the load as offered
	for _, t := range ticks {
		if t.Arrivals > 0 {
			window = append(window, t)
		}
	}
	if len(window) < 4 {
		sig.Detail = fmt.Sprintf("only %d ticks with arrivals: too few to tell whether work piled up", len(window))
		return sig
	}
	arrivals, completions := 0, 0
	for _, t := range window {
		arrivals += t.Arrivals
		completions += t.Completions
	}
	// Piled up: over the last third of the arrivals, at least twice the work
	// outstanding of the first third (and 5 more), with completions at most
	// 95 % of arrivals. A steady service holds rate × latency in flight
	// however slow it is (Little's law); only one that falls behind grows.
	// A drop at the in-flight cap is work that could not even be outstanding.
	depth := outstanding(s)
	third := len(window) / 3
	first := stats.Median(depths(window[:third], depth))
	last := stats.Median(depths(window[len(window)-third:], depth))
	bar := max(2*first, first+5)
	grew := last > bar && float64(completions) <= 0.95*float64(arrivals)
	sig.Value = tare.Float(last)
	sig.Threshold = bar
	if !grew && s.Requests.Dropped == 0 {
		sig.Detail = fmt.Sprintf("the system under test kept up: %.0f outstanding late in the arrivals, %.0f early on, %d of %d arrivals completed within them", last, first, completions, arrivals)
		return sig
	}
	sig.Fired = true
	served, offered := sustainedRate(ticks, first, bar, depth)
	sig.Detail = fmt.Sprintf("the system under test fell behind, sustaining about %s/s against %s arrivals/s once work piled up: work outstanding grew from %.0f to %.0f during the arrivals", perS(served), perS(offered), first, depth(window[len(window)-1]))
	if a := s.Rate.Achieved; a != nil && s.Rate.Offered != nil {
		sig.Detail += fmt.Sprintf(", achieved %.1f/s of %.1f/s offered over the run", *a, *s.Rate.Offered)
	}
	sig.Detail += "; " + cpuOfService(s)
	return sig
}

// cpuOfService says how much of the machine the service had while it
// saturated: whether CPU was its limit.
func cpuOfService(s *tare.Summary) string {
	by := s.Host.CPUBy
	vcpus := float64(max(s.Env.VCPUs, 1))
	switch {
	case by == nil:
		return "how much CPU it used was not measured"
	case s.Host.ThrottledPct != nil && *s.Host.ThrottledPct > 5:
		return fmt.Sprintf("its cgroup was throttled %.0f%% of the time: its limit was the CPU quota, not the host", *s.Host.ThrottledPct)
	case by.Neighbours() > by.SystemUnderTest:
		return fmt.Sprintf("other processes had more of the CPUs (%.0f%%) than the service (%.0f%%): this is not its capacity, only what the neighbours left it", by.Neighbours(), by.SystemUnderTest)
	case s.SUT == nil:
		return fmt.Sprintf("the host's CPUs were %.0f%% idle; the system under test was not found, so its own CPU is not known", by.Idle)
	case by.Idle < 15:
		return fmt.Sprintf("it used %.1f of %.0f CPUs (tare %.1f, idle %.0f%%): it ran out of CPU, so this is its capacity on this host", by.SystemUnderTest*vcpus/100, vcpus, by.Tare*vcpus/100, by.Idle)
	}
	return fmt.Sprintf("it used %.1f of %.0f CPUs with %.0f%% idle: its limit is not CPU (a lock, a pool, I/O, a connection limit)", by.SystemUnderTest*vcpus/100, vcpus, by.Idle)
}

// sustainedRate is what the service completed without failing, and what
// arrived, per second, while it was behind: from the tick with arrivals
// where work outstanding first passed bar, the mark of piling up (the
// first tick with arrivals when none did), or its first completion after, to
// the last tick with arrivals or with more outstanding than that early
// level (first). The drain after the last arrival counts: a model
// server's requests of many seconds finish after the arrivals end, at
// the rate it serves. The arrival rate alone
// would name a rate it never served (a server that served 2.1/s "fell
// behind from about 4 arrivals/s"); requests that failed (timed out)
// were not served.
func sustainedRate(ticks []tare.Tick, first, bar float64, depth func(tare.Tick) float64) (served, offered float64) {
	firstArrival, lastArrival := -1, -1
	for i, t := range ticks {
		if t.Arrivals > 0 {
			lastArrival = i
			if firstArrival < 0 {
				firstArrival = i
			}
		}
	}
	if firstArrival < 0 {
		return 0, 0
	}
	from := firstArrival
	for i := firstArrival; i <= lastArrival; i++ {
		if ticks[i].Arrivals > 0 && depth(ticks[i]) > bar {
			from = i
			break
		}
	}
	to := lastArrival
	for i := lastArrival + 1; i < len(ticks) && depth(ticks[i]) > first; i++ {
		to = i
	}
	arrived, arriving := 0, 0.0
	for _, t := range ticks[from : lastArrival+1] {
		arrived += t.Arrivals
		arriving += t.End.Sub(t.Start).Seconds()
	}
	// Served from its first completion on: until then it was busy with
	// requests that had not finished, not idle.
	for from < to && ticks[from].Completions == 0 {
		from++
	}
	done, busy := 0, 0.0
	for _, t := range ticks[from : to+1] {
		done += t.Completions - t.Errors
		busy += t.End.Sub(t.Start).Seconds()
	}
	if busy <= 0 || arriving <= 0 {
		return 0, 0
	}
	return float64(done) / busy, float64(arrived) / arriving
}

// perS words a rate per second: whole above 10, one decimal below.
func perS(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

func depths(ticks []tare.Tick, depth func(tare.Tick) float64) []float64 {
	out := make([]float64, len(ticks))
	for i, t := range ticks {
		out[i] = depth(t)
	}
	return out
}

// outstanding is how the run's ticks count work outstanding: a queue's
// depth when it was sampled, requests in flight otherwise. A model
// server's waiting requests (a model target's QueueDepth, from its
// metrics) are only part of its work: a server without a cap on running
// requests queues none and slows them all, so its work is the requests in
// flight, which hold those it keeps waiting.
func outstanding(s *tare.Summary) func(tare.Tick) float64 {
	if modelTarget(s) {
		return inFlight
	}
	return depth
}

// depth is a tick's work outstanding: queue depth when the queue was
// sampled, requests in flight otherwise.
func depth(t tare.Tick) float64 {
	if t.QueueDepth != nil {
		return *t.QueueDepth
	}
	return float64(t.InFlight)
}

func inFlight(t tare.Tick) float64 { return float64(t.InFlight) }

// modelTarget reports whether the run loaded a model endpoint itself, not
// a queue whose workers call one (the demo's topology).
func modelTarget(s *tare.Summary) bool { return s.Model != nil && s.Queue == nil }
