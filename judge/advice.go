package judge

import (
	"fmt"

	"github.com/tare-dev/tare"
)

// advise turns the fired signals into lines a person can act on. A
// polluted run never yields a recommendation to scale: it says what would
// make the measurement valid instead. The lines come in three parts: what
// the level means, what to do about each signal that fired, and what the
// SLO's outcome means.
func advise(s *tare.Summary, v tare.Verdict, th Thresholds, late lateSends) []string {
	a := levelAdvice(s, v)
	a = append(a, signalAdvice(s, v, th, late)...)
	return append(a, sloAdvice(s, v, th)...)
}

// firedSignals are the signals of v that fired, by name.
func firedSignals(v tare.Verdict) map[string]tare.Signal {
	fired := make(map[string]tare.Signal)
	for _, sig := range v.Signals {
		if sig.Fired {
			fired[sig.Name] = sig
		}
	}
	return fired
}

// levelAdvice says what the level means for the figures.
func levelAdvice(s *tare.Summary, v tare.Verdict) []string {
	_, saturated := firedSignals(v)[SignalSaturation]
	var a []string
	// A window with no load of tare's own (tare watch) has no figures of
	// its own: what it judges is the load tool's.
	figures := "these figures"
	if s.Requests.Total == 0 && s.Latency.P50 == nil {
		figures = "the load tool's figures from this window"
	}
	switch v.Level {
	case tare.Polluted:
		a = append(a, fmt.Sprintf("Do not scale up (or down) on %s: interference from outside the test shaped them, so they describe the host, not your code.", figures))
	case tare.Suspect:
		if !NoService(v) { // said below, more to the point
			a = append(a, fmt.Sprintf("Treat %s with care: tare cannot tell whether something besides your code moved them.", figures))
		}
	case tare.Clean:
		if saturated {
			a = append(a, "No interference from outside the test: these figures describe the system under test, which ran out of capacity at this load.")
		} else {
			a = append(a, fmt.Sprintf("No interference from outside the test: %s describe the system under test.", figures))
		}
	}
	return a
}

// signalAdvice says what to do about each signal that fired.
func signalAdvice(s *tare.Summary, v tare.Verdict, th Thresholds, late lateSends) []string {
	fired := firedSignals(v)
	_, saturated := fired[SignalSaturation]
	var a []string
	if sig, ok := fired[SignalFailures]; ok {
		if sig.Finding {
			a = append(a, "Most requests failed: find out why (the error kinds above) before reading the latency as the service's or planning capacity on it.")
		} else {
			a = append(a, "Check the target before reading any figure: no request succeeded, so these figures time failures, not your code (a wrong URL or port, the service down or not ready, every request rejected); then rerun.")
		}
	}
	_, stole := fired[SignalSteal]
	_, starved := fired[SignalGenerator]
	if stole || starved && late.stolen > 0 {
		a = append(a, "Rerun when the host is quiet (tare check says whether now is), or run the three-window protocol (tare protocol) to get capacity as a range; for a single number to plan on, use a dedicated or non-burstable host.")
	}
	if _, ok := fired[SignalThrottling]; ok {
		a = append(a, "Raise the cgroup's CPU quota (cpu.max, or cpu.cfs_quota_us on cgroup v1) or give the container more CPUs; if production runs with this limit, the limit is your capacity.")
	}
	if _, ok := fired[SignalNeighbours]; ok {
		a = append(a, neighbourAdvice(s))
	}
	if starved && !late.byTheHypervisor() {
		a = append(a, "Give tare its own CPU: lower the rate, pin tare and the system under test to different cores (taskset -c), or run tare on another host.")
	}
	if _, ok := fired[SignalRunDelay]; ok {
		a = append(a, "Let tare read /proc of every process (a /proc mounted with hidepid hides them), or name the system under test with --pid, so a neighbour can be told from the service's own load.")
	}
	if sig, ok := fired[SignalTail]; ok {
		_, both := fired[SignalNeighbours]
		switch {
		case sig.Finding:
			a = append(a, "The slowest requests were the code's own, not the host's: profile the slow path (the tail's requests, not the average) before adding capacity for it.")
		case !both:
			a = append(a, tailAdvice(s, th))
		}
	}
	if sig, ok := fired[SignalLatencyAlone]; ok {
		if sig.Finding {
			a = append(a, "The slow ticks were the code's own, not the host's: look for what the service does now and then (a garbage collection, a recycled worker, a lock, a sleep, a cache refill) at the moments the timeline shows.")
		} else {
			a = append(a, "Rerun the same load at another hour and compare the two (tare compare): if the curve moves, the host is the variable.")
		}
	}
	if saturated && v.Level != tare.Polluted {
		a = append(a, "The system under test saturated: to serve this load, make each request cheaper or give the service more CPUs (or find what else limits it); tare sweep finds the highest rate that meets the SLO.")
	}
	return a
}

// sloAdvice says what the SLO's outcome means, given the level.
func sloAdvice(s *tare.Summary, v tare.Verdict, th Thresholds) []string {
	var a []string
	if len(v.SLO) == 0 {
		return a
	}
	if !Met(v.SLO) && !NoService(v) { // with nothing served, the check of the target above is the advice
		var missed []string
		for _, c := range v.SLO {
			if !c.Met {
				missed = append(missed, describe(c))
			}
		}
		switch v.Level {
		case tare.Clean:
			a = append(a, fmt.Sprintf("The SLO failed on a quiet host (%v): the problem is the code or its capacity, and a scaling decision from this run is valid.", missed))
		case tare.Suspect:
			a = append(a, fmt.Sprintf("The SLO failed (%v) on a run tare cannot fully vouch for: rerun in a quiet window; if it still fails, the problem is the code.", missed))
		default:
			a = append(a, fmt.Sprintf("The SLO failed (%v), but interference shaped the figures: measure again on a quiet host before deciding; if it still fails off-peak, the problem is the code.", missed))
		}
	}
	if st := s.Host.Steal; st.Max != nil && (*st.Max > th.Steal || (st.Mean != nil && *st.Mean >= 1)) {
		a = append(a, fmt.Sprintf("A shared host cannot guarantee a hard SLO: steal reached %.0f%% in a tick of this run. Only dedicated CPU makes the SLO a promise.", *st.Max))
	}
	return a
}

// neighbourAdvice names the neighbour to stop, or the cores to pin.
func neighbourAdvice(s *tare.Summary) string {
	by := s.Host.CPUBy
	pin := "pin the system under test and tare to cores nothing else uses (taskset -c, cpuset)"
	if Probed(s) {
		return measuredNeighbourAdvice(s.Blame, by, s.Env.VCPUs, pin)
	}
	if by != nil && len(by.TopOthers) > 0 && by.TopOthers[0].CPUPct >= by.Unattributed {
		if c := by.TopOthers[0].Container; c != nil {
			return fmt.Sprintf("Stop %s during the test (%s), or %s; then rerun.", c, stopHint(c), pin)
		}
		return fmt.Sprintf("Stop %s or move it elsewhere during the test, or %s; then rerun.", by.TopOthers[0].Who(), pin)
	}
	return fmt.Sprintf("Something no visible process accounts for (another container, short-lived processes) used the CPUs: run the test on a dedicated host, or %s; then rerun.", pin)
}

// tailAdvice says what to do about the owner the slowest requests
// waited behind most.
func tailAdvice(s *tare.Summary, th Thresholds) string {
	pin := "pin the system under test and tare to cores nothing else uses (taskset -c, cpuset)"
	// The tail signal fired on the ticks' steal when the outside waits
	// moved too little (judge's tail).
	// Whom the slowest waited behind; where the tail signal fired on the
	// ticks instead (judge's tail), the hypervisor or the neighbour busy
	// in them.
	owners := func(sl tare.TailSlice) []tare.TailOwner { return sl.Behind }
	also := "" // the steal's advice, beside a neighbour's
	if _, moved := bestSlice(s, s.Tail, th); moved < th.TailFactor {
		marks := tickMarks(s, s.Tail, th)
		if len(marks) == 1 && marks[0].stolen {
			return stealTailAdvice
		}
		if len(marks) > 0 {
			owners = func(sl tare.TailSlice) []tare.TailOwner { return sl.CrowdedBy }
		}
		if len(marks) == 2 {
			also = " " + stealTailAdvice
		}
	}
	var top *tare.TailOwner
	for _, sl := range s.Tail.Slowest {
		if o := owners(sl); len(o) > 0 && (top == nil || o[0].Requests > top.Requests) {
			top = &o[0]
		}
	}
	switch {
	case top == nil:
	case top.Owner == tare.OwnerSteal:
		return stealTailAdvice
	case top.Owner == tare.OwnerOther && top.Name != "":
		return fmt.Sprintf("Stop %s or move it elsewhere during the test, or %s; then rerun. Even a job niced to 19 holds a CPU for milliseconds at a time, and the slowest requests are the ones that waited.%s", top.Who(), pin, also)
	}
	return fmt.Sprintf("Something outside the test held the CPU while the slowest requests waited: %s, or run on a dedicated host; then rerun.%s", pin, also)
}

// stealTailAdvice is the advice when the hypervisor held up the slowest requests.
const stealTailAdvice = "The hypervisor took the CPU from the slowest requests: rerun when the host is quiet (tare check says whether now is), or on a dedicated or non-burstable host."

// stopHint is how a container is stopped, in its runtime's own words.
func stopHint(c *tare.Container) string {
	ref := c.Name
	if ref == "" || ref == c.ID {
		ref = c.ShortID()
	}
	switch {
	case c.Pod != "":
		return "move the pod, or the test, to another node"
	case c.Runtime == "docker" || c.Runtime == "podman":
		return c.Runtime + " stop " + ref
	case c.Runtime == "containerd":
		return "nerdctl stop " + ref
	case c.Runtime == "systemd-nspawn":
		return "machinectl stop " + ref
	case c.Runtime == "libvirt":
		return "shut the guest down, or give it CPUs of its own"
	case c.Runtime == "kubernetes" || c.Runtime == "cri-o":
		return "it runs in a Kubernetes pod: move the pod, or the test, to another node"
	}
	return "with the runtime that started it"
}
