package judge

import (
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
)

// SignalBusy is the signal of tare check: other processes keep the CPUs
// busy now, so a run now would wait behind them.
const SignalBusy = "busy"

// Check completes the verdict of a moment with no load of tare's own (tare
// check). Nothing of the test waited, so the neighbours signal cannot
// fire: what tells whether now is a good time is how much CPU other
// processes use, and who they are.
func Check(s *tare.Summary, th Thresholds) tare.Verdict {
	v := s.Verdict
	sig := tare.Signal{Name: SignalBusy, Threshold: th.Steal}
	by := s.Host.CPUBy
	if by == nil {
		sig.Detail = "who uses the CPUs was not measured (the processes could not be read)"
	} else {
		sig.Value = tare.Float(by.Neighbours())
		sig.Fired = by.Neighbours() > th.Steal
		sig.Detail = fmt.Sprintf("other processes used %.0f%% of the host's CPU time (threshold %g%%)", by.Neighbours(), th.Steal)
		if len(by.TopOthers) > 0 {
			sig.Detail += "; busiest: " + busiest(by, s.Env.VCPUs)
		}
	}
	v.Signals = append(v.Signals, sig)
	switch {
	case sig.Fired && *sig.Value > checkBusyPolluted:
		v.Level = Raise(v.Level, tare.Polluted) // a run now would mostly wait behind them
	case sig.Fired:
		v.Level = Raise(v.Level, tare.Suspect)
	}
	return v
}

// checkBusyPolluted is the share of the host's CPU time (%) other processes
// use above which tare check calls now a bad time: more than half the
// machine is taken before the test starts.
const checkBusyPolluted = 50

// busiest lists the busiest other processes in shares of one CPU.
func busiest(by *tare.CPUBy, vcpus int) string {
	var parts []string
	for _, p := range by.TopOthers {
		if p.CPUPct*float64(max(vcpus, 1)) < 1 {
			break // busiest first: the rest are idle
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%% of a CPU", p.Who(), p.CPUPct*float64(max(vcpus, 1))))
	}
	return strings.Join(parts, ", ")
}
