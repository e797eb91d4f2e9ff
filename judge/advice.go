package judge

import (
	"fmt"

	"github.com/tare-dev/tare"
)

// advise turns the fired signals into lines a person can act on. A
// polluted run never yields a recommendation to scale: it says what would
// make the measurement valid instead.
func advise(s *tare.Summary, v tare.Verdict, th Thresholds) []string {
	fired := make(map[string]bool)
	for _, sig := range v.Signals {
		fired[sig.Name] = sig.Fired
	}
	var a []string
	switch v.Level {
	case tare.Polluted:
		a = append(a, "Do not scale up (or down) on these figures: they describe the host, not your code.")
	case tare.Suspect:
		a = append(a, "Treat these figures with care: something besides your code moved them.")
	default:
		a = append(a, "No interference signal fired: these figures describe the system under test.")
	}
	if fired[SignalSteal] {
		a = append(a, "Rerun when the host is quiet (tare check says whether now is), or run the three-window protocol (tare protocol) to get capacity as a range; for a single number to plan on, use a dedicated or non-burstable host.")
	}
	if fired[SignalThrottling] {
		a = append(a, "Raise the cgroup's CPU quota (cpu.max, or cpu.cfs_quota_us on cgroup v1) or give the container more CPUs; if production runs with this limit, the limit is your capacity.")
	}
	if fired[SignalGenerator] {
		a = append(a, "Give tare its own CPU: lower the rate, pin it away from the system under test (taskset), or run it on another host.")
	}
	if fired[SignalRunDelay] {
		a = append(a, "Stop other work on this machine, or pin the system under test to its own cores, then rerun.")
	}
	if fired[SignalLatencyAlone] {
		a = append(a, "Rerun the same load at another hour and compare the two (tare compare): if the curve moves, the host is the variable.")
	}
	if len(v.SLO) == 0 {
		return a
	}
	if !Met(v.SLO) {
		var missed []string
		for _, c := range v.SLO {
			if !c.Met {
				missed = append(missed, describe(c))
			}
		}
		switch v.Level {
		case tare.Clean:
			a = append(a, fmt.Sprintf("The SLO failed on a quiet host (%v): the problem is the code or its capacity, and a scaling decision from this run is valid.", missed))
		default:
			a = append(a, fmt.Sprintf("The SLO failed (%v), but on a host that was not quiet: rerun in a quiet window before deciding; if it still fails off-peak, the problem is the code.", missed))
		}
	}
	if st := s.Host.Steal; st.Max != nil && (*st.Max > th.Steal || (st.Mean != nil && *st.Mean >= 1)) {
		a = append(a, fmt.Sprintf("A shared host cannot guarantee a hard SLO: steal reached %.0f%% in a tick of this run. Only dedicated CPU makes the SLO a promise.", *st.Max))
	}
	return a
}
