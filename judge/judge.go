package judge

import (
	"fmt"
	"time"

	"github.com/tare-dev/tare"
)

// Signal names, as they appear in verdicts.
const (
	SignalSteal        = "steal"
	SignalThrottling   = "throttling"
	SignalNeighbours   = "neighbours"
	SignalRunDelay     = "run_delay"
	SignalLatencyAlone = "latency_without_queue"
	SignalGenerator    = "generator_starved"
	SignalSaturation   = "saturation"
	SignalTail         = "tail"
)

// Thresholds are the limits the signals test against. Shares are percent.
type Thresholds struct {
	// Steal is the polluted-tick threshold (recorded as "steal_pct"): a
	// tick whose steal, throttling or wait behind neighbours exceeds it is
	// polluted (tare.HostSample.Polluted), NeighbourTicks counts the ticks
	// whose wait exceeds it, the busy check other processes' CPU above it,
	// and the mean steal, a tick's steal, or one CPU's mean steal above it
	// fires the steal signal (tare.DefaultPollutedThreshold, 10).
	Steal          float64
	StealTicks     float64       // share of ticks above Steal that fires (10)
	ThrottledTicks float64       // share of ticks with any throttling that fires (5)
	Neighbours     float64       // mean share of wall time the measured processes waited behind neighbours (5)
	NeighbourTicks float64       // or the share of ticks, two at least, in which that wait exceeded Steal (10)
	RunDelay       float64       // run delay of the measured processes that no ledger explains, share of wall time (5)
	LatencyFactor  float64       // a tick's p95 at least this many times the median tick p95 (2)
	LatencyTicks   int           // that many such ticks fire (3)
	LatencyShare   float64       // or that share of ticks (10)
	LatencyFloor   time.Duration // and the tick's p95 exceeds the median by at least this (1ms): below it, scheduler noise on a fast service is not a signal
	LatencyChance  float64       // and the ticks' latencies differ more than chance gives ticks of their sizes, at a p-value below this (0.01)
	SendLagP99     time.Duration // generator send-lag p99 above this fires (10ms)
	TailFactor     float64       // the slowest requests' outside waits moved the p99 (or p95) at least this many times (1.3)
	TailChance     float64       // and the slowest overlapped them more than chance gives, at a p-value below this (0.01)
}

// DefaultThresholds returns the default thresholds, those docs/verdict.md
// explains.
func DefaultThresholds() Thresholds {
	return Thresholds{
		Steal:          tare.DefaultPollutedThreshold,
		StealTicks:     10,
		ThrottledTicks: 5,
		Neighbours:     5,
		NeighbourTicks: 10,
		RunDelay:       5,
		LatencyFactor:  2,
		LatencyTicks:   3,
		LatencyShare:   10,
		LatencyFloor:   time.Millisecond,
		LatencyChance:  0.01,
		SendLagP99:     10 * time.Millisecond,
		TailFactor:     1.3,
		TailChance:     0.01,
	}
}

// named is each threshold of t by the name the summary records it under:
// a *float64 (a share or a factor), an *int (a count) or a *time.Duration
// (recorded in milliseconds). Map and ThresholdsOf both read it.
func (t *Thresholds) named() map[string]any {
	return map[string]any{
		tare.PollutedThresholdKey: &t.Steal,
		"steal_ticks_pct":         &t.StealTicks,
		"throttled_ticks_pct":     &t.ThrottledTicks,
		"neighbour_wait_pct":      &t.Neighbours,
		"neighbour_ticks_pct":     &t.NeighbourTicks,
		"run_delay_pct":           &t.RunDelay,
		"latency_factor":          &t.LatencyFactor,
		"latency_ticks":           &t.LatencyTicks,
		"latency_ticks_pct":       &t.LatencyShare,
		"send_lag_p99_ms":         &t.SendLagP99,
		"latency_floor_ms":        &t.LatencyFloor,
		"latency_p":               &t.LatencyChance,
		"tail_factor":             &t.TailFactor,
		"tail_p":                  &t.TailChance,
	}
}

// Map returns the thresholds by name, for the summary's record of what the
// verdict used.
func (t Thresholds) Map() map[string]float64 {
	m := make(map[string]float64)
	for name, p := range t.named() {
		switch p := p.(type) {
		case *float64:
			m[name] = *p
		case *int:
			m[name] = float64(*p)
		case *time.Duration:
			m[name] = ms(*p)
		}
	}
	return m
}

// ThresholdsOf undoes Map: the thresholds a stored verdict used, the
// defaults for any it does not name (a run stored before the name was).
func ThresholdsOf(m map[string]float64) Thresholds {
	t := DefaultThresholds()
	for name, p := range t.named() {
		v, ok := m[name]
		if !ok {
			continue
		}
		switch p := p.(type) {
		case *float64:
			*p = v
		case *int:
			*p = int(v)
		case *time.Duration:
			*p = time.Duration(v * float64(time.Millisecond))
		}
	}
	return t
}

// Judge returns the verdict on a run from its summary and timeline. slo may
// be nil.
//
// The level answers one question: do these figures describe the code?
// Interference from outside the test (steal, throttling, neighbours, a
// generator that could not send on time) makes the run polluted; run
// delay that tare cannot attribute, or latency moving on its own, makes it
// suspect, and so does a run in which no request succeeded: its figures
// describe no service. The system under test's own load never does:
// saturation, and failures that dominate but not wholly, are reported
// beside the level, findings about the code. The failures signal comes
// first: when it fires, nothing else matters as much.
func Judge(s *tare.Summary, ticks []tare.Tick, th Thresholds, slo SLO) tare.Verdict {
	host := hostTicks(ticks)
	late := lateSendsOf(ticks, th)
	signals := []tare.Signal{
		failures(s),
		steal(s, host, th),
		throttling(host, th),
		neighbours(s, host, th),
		tail(s, th),
		generator(s, late, th),
		runDelay(s, th),
		latencyAlone(s, ticks, th),
		saturation(s, ticks),
	}
	v := tare.Verdict{Level: tare.Clean, Signals: signals}
	for _, sig := range signals {
		if sig.Fired {
			v.Level = Raise(v.Level, LevelOf(sig))
		}
	}
	v.SLO = slo.Check(s)
	v.Advice = advise(s, v, th, late)
	v.Warnings = warnings(s, v, th)
	return v
}

// LevelOf is the level a fired signal gives a run. A finding (saturation,
// failures that did not take every request) is about the code: it never
// changes the level.
func LevelOf(sig tare.Signal) tare.Level {
	if sig.Finding {
		return tare.Clean
	}
	switch sig.Name {
	case SignalSteal, SignalThrottling, SignalNeighbours, SignalTail, SignalGenerator:
		return tare.Polluted
	case SignalRunDelay, SignalLatencyAlone, SignalFailures:
		return tare.Suspect
	}
	return tare.Clean // saturation: a finding about the code, never about the host
}

// Raise returns the worse of two levels.
func Raise(a, b tare.Level) tare.Level {
	rank := map[tare.Level]int{tare.Clean: 0, tare.Suspect: 1, tare.Polluted: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// Fired returns the signals of v that fired.
func Fired(v tare.Verdict) []tare.Signal {
	var out []tare.Signal
	for _, s := range v.Signals {
		if s.Fired {
			out = append(out, s)
		}
	}
	return out
}

func hostTicks(ticks []tare.Tick) []*tare.HostSample {
	var out []*tare.HostSample
	for i := range ticks {
		if ticks[i].Host != nil {
			out = append(out, ticks[i].Host)
		}
	}
	return out
}

func steal(s *tare.Summary, host []*tare.HostSample, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalSteal, Threshold: th.Steal}
	mean := s.Host.Steal.Mean
	if mean == nil || len(host) == 0 {
		sig.Detail = "steal was not measured (/proc/stat unavailable)"
		return sig
	}
	sig.Value = tare.Float(*mean)
	above := 0
	perCPU := make(map[int]float64)
	for _, h := range host {
		if h.CPU.Steal > th.Steal {
			above++
		}
		for _, c := range h.PerCPU {
			perCPU[c.CPU] += c.Steal
		}
	}
	abovePct := 100 * float64(above) / float64(len(host))
	worstCPU, worstMean := -1, 0.0
	for cpu, sum := range perCPU {
		if m := sum / float64(len(host)); m > worstMean || (m == worstMean && cpu < worstCPU) {
			worstCPU, worstMean = cpu, m
		}
	}
	switch {
	case *mean > th.Steal:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("steal averaged %.1f%% (threshold %g%%): the hypervisor ran other tenants on this VM's CPUs during the test", *mean, th.Steal)
	case abovePct > th.StealTicks:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("steal exceeded %g%% in %.0f%% of ticks (%d of %d; threshold %g%% of ticks): the host was busy in bursts", th.Steal, abovePct, above, len(host), th.StealTicks)
	case worstMean > th.Steal:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("CPU %d alone averaged %.1f%% steal (threshold %g%%): one starved vCPU the aggregate hides", worstCPU, worstMean, th.Steal)
	default:
		sig.Detail = fmt.Sprintf("steal averaged %.1f%%, above %g%% in %d of %d ticks", *mean, th.Steal, above, len(host))
	}
	return sig
}

func throttling(host []*tare.HostSample, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalThrottling, Threshold: th.ThrottledTicks}
	measured, throttled := 0, 0
	for _, h := range host {
		if h.Throttled == nil {
			continue
		}
		measured++
		if *h.Throttled > 0 {
			throttled++
		}
	}
	if measured == 0 {
		sig.Detail = "cgroup throttling was not measured (no cpu.stat for the measured cgroup)"
		return sig
	}
	pct := 100 * float64(throttled) / float64(measured)
	sig.Value = tare.Float(pct)
	sig.Fired = pct > th.ThrottledTicks
	sig.Detail = fmt.Sprintf("the measured cgroup was throttled in %.0f%% of ticks (%d of %d; threshold %g%%)", pct, throttled, measured, th.ThrottledTicks)
	if sig.Fired {
		sig.Detail += ": it ran out of CPU quota, so latency reflects the limit, not the code"
	}
	return sig
}

// runDelay fires only when the measured processes waited and tare cannot
// say behind whom: without the whose-CPU ledger, waiting for a CPU may be
// a neighbour's doing or the service's own. With the ledger, the wait is
// split: behind neighbours (the neighbours signal), behind the measured
// processes themselves (their own load, not interference).
func runDelay(s *tare.Summary, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalRunDelay, Threshold: th.RunDelay}
	d := s.Host.RunDelayPct
	if d == nil {
		sig.Detail = "run delay was not measured (no schedstat for the measured processes)"
		return sig
	}
	sig.Value = tare.Float(*d)
	if w := s.Host.NeighbourWaitPct; w != nil {
		sig.Detail = fmt.Sprintf("the measured processes waited on a run queue %.1f%% of the time, %.1f%% of it behind neighbours; the rest was their own threads and tare competing, which is load, not interference", *d, *w)
		return sig
	}
	sig.Fired = *d > th.RunDelay
	sig.Detail = fmt.Sprintf("the measured processes waited on a run queue %.1f%% of the time (threshold %g%%)", *d, th.RunDelay)
	if sig.Fired {
		sig.Detail += ", and tare could not read the other processes' CPU time to tell a neighbour from their own load"
	}
	return sig
}

// lateSends are the ticks in which an arrival was sent later than the
// send-lag threshold, and how many of them had steal above its own
// threshold: sends the hypervisor delayed, not tare.
type lateSends struct {
	ticks, stolen int
	steal         float64 // the highest steal of those stolen ticks, %
}

func lateSendsOf(ticks []tare.Tick, th Thresholds) lateSends {
	var l lateSends
	for _, t := range ticks {
		if t.SendLagMax <= th.SendLagP99 {
			continue
		}
		l.ticks++
		if t.Host != nil && t.Host.CPU.Steal > th.Steal {
			l.stolen++
			l.steal = max(l.steal, t.Host.CPU.Steal)
		}
	}
	return l
}

// byTheHypervisor says every late send was in a tick of high steal: the
// hypervisor, not tare, made them late.
func (l lateSends) byTheHypervisor() bool { return l.stolen > 0 && l.stolen == l.ticks }

// generator fires when tare could not send on time: lateness changes the
// measurement. tare's own wait for a CPU, or its sharing the cores with
// the service (co-location), does not, as long as it sends on time. When
// the late sends fell in ticks whose steal was over its threshold, the
// detail names the steal as their cause, not tare.
func generator(s *tare.Summary, late lateSends, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalGenerator, Threshold: ms(th.SendLagP99)}
	lag := s.SendLag.P99
	if lag == nil {
		sig.Detail = "send lag was not measured (nothing was sent)"
		return sig
	}
	sig.Value = tare.Float(*lag)
	// Late sends change the figures only where they are a visible part of
	// the latency they could move: 14 ms of lag inside 8 s latencies does
	// not, nor one late send of 48 (their p99 is the latest) in a run
	// whose p99 a 200 ms stall of the service's own makes.
	material := visible(lag, s.Latency.P99) || visible(s.SendLag.P50, s.Latency.P50)
	switch {
	case *lag > ms(th.SendLagP99) && material && late.byTheHypervisor():
		sig.Fired = true
		sig.Detail = fmt.Sprintf("send lag p99 was %.1f ms (threshold %g ms): the hypervisor's steal made tare send late, which invented latency: every tick with a late send (%d) had steal above %g%% (up to %.1f%%)",
			*lag, ms(th.SendLagP99), late.ticks, th.Steal, late.steal)
	case *lag > ms(th.SendLagP99) && material && late.stolen > 0:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("send lag p99 was %.1f ms (threshold %g ms): tare could not send on time, so it invented latency; %d of the %d ticks with a late send had steal above %g%% (up to %.1f%%), the hypervisor's doing",
			*lag, ms(th.SendLagP99), late.stolen, late.ticks, th.Steal, late.steal)
	case *lag > ms(th.SendLagP99) && material:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("send lag p99 was %.1f ms (threshold %g ms): tare itself could not send on time, so it invented latency", *lag, ms(th.SendLagP99))
	case *lag > ms(th.SendLagP99):
		sig.Detail = fmt.Sprintf("send lag p99 was %.1f ms (threshold %g ms), under a tenth of the latency p99 (%.0f ms), and its median under a tenth of the latency's, so it did not change the figures", *lag, ms(th.SendLagP99), *s.Latency.P99)
	default:
		sig.Detail = fmt.Sprintf("send lag p99 was %.2f ms (threshold %g ms): tare sent on time", *lag, ms(th.SendLagP99))
	}
	if by := s.Host.CPUBy; by != nil && by.Tare >= 1 {
		sig.Detail += fmt.Sprintf("; it used %.0f%% of the host's CPU beside the system under test (%.0f%%)", by.Tare, by.SystemUnderTest)
	}
	if d := s.Generator.RunDelayPct; d != nil {
		sig.Detail += fmt.Sprintf(", and waited for a CPU %.1f%% of the time", *d)
	}
	return sig
}

// visible says a lag is over a tenth of the latency figure it adds to, or
// that figure is not known.
func visible(lag, latency *float64) bool {
	return latency == nil || lag != nil && *lag > 0.1**latency
}

// neighbours fires when the measured processes waited for CPUs that other
// processes held: the interference of a neighbour on the same machine. It
// names the busiest of them.
func neighbours(s *tare.Summary, host []*tare.HostSample, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalNeighbours, Threshold: th.Neighbours}
	w := s.Host.NeighbourWaitPct
	by := s.Host.CPUBy
	probed := Probed(s)
	if w == nil || by == nil && !probed {
		sig.Detail = "neighbours were not measured (the other processes' CPU time, or the measured processes' run delay, could not be read)"
		return sig
	}
	sig.Value = tare.Float(*w)
	measured, over := 0, 0
	for _, h := range host {
		if nw := h.NeighbourWait(); nw != nil {
			measured++
			if *nw > th.Steal {
				over++
			}
		}
	}
	overPct := 0.0
	if measured > 0 {
		overPct = 100 * float64(over) / float64(measured)
	}
	waited := waiter(s)
	if probed {
		return measuredNeighbours(sig, s.Blame, waited, *w, over, measured, overPct, th)
	}
	who := neighbourNames(by, s.Env.VCPUs)
	switch {
	case *w > th.Neighbours:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("%s, while %s waited for a CPU %.1f%% of the time behind them (threshold %g%%)", who, waited, *w, th.Neighbours)
	case overPct > th.NeighbourTicks && over >= 2:
		// One tick is a blip (a shell command, a cron job): it is left out
		// of the clean-tick figures, but does not judge the run.
		sig.Fired = true
		sig.Detail = fmt.Sprintf("%s; %s waited behind them more than %g%% of the tick in %.0f%% of ticks (%d of %d; threshold %g%% of ticks)", who, waited, th.Steal, overPct, over, measured, th.NeighbourTicks)
	default:
		sig.Detail = fmt.Sprintf("%s waited behind other processes %.1f%% of the time (threshold %g%%); %s", waited, *w, th.Neighbours, who)
	}
	return sig
}

// neighbourNames says who the neighbours were, in shares of one CPU. The
// busiest is named as the ledger shares it: a service with all its
// processes (a pool's master and workers), a container, or one process;
// two `sh` of other families are two neighbours, the busiest named alone.
func neighbourNames(by *tare.CPUBy, vcpus int) string {
	cores := float64(max(vcpus, 1))
	if len(by.TopOthers) == 0 || by.TopOthers[0].CPUPct < by.Unattributed {
		return fmt.Sprintf("other processes used %.0f%% of a CPU, %.0f%% of it busy time no visible process accounts for (other containers, short-lived processes)",
			by.Neighbours()*cores, by.Unattributed*cores)
	}
	top := by.TopOthers[0]
	out := fmt.Sprintf("%s used %.0f%% of a CPU", top.Who(), top.CPUPct*cores)
	if rest := by.Neighbours() - top.CPUPct; rest*cores >= 5 {
		out += fmt.Sprintf(" and other processes %.0f%% more", rest*cores)
	}
	return out
}

// waiter names who waited: the system under test when tare knows it.
func waiter(s *tare.Summary) string {
	if s.SUT != nil {
		return "the system under test"
	}
	return "tare"
}

// warnings are the findings beside the level. Each says only what the
// summary shows.
func warnings(s *tare.Summary, v tare.Verdict, th Thresholds) []string {
	var w []string
	if p := s.Host.PollutedTicksPct; p != nil && *p > 0 && v.Level == tare.Clean {
		// Too few to pollute the run, but the clean-tick figures leave them out.
		msg := fmt.Sprintf("%.0f%% of ticks had interference above %g%% (steal, throttling or waiting behind neighbours), too few to change the verdict", *p, th.Steal)
		if s.CleanLatency != nil && s.Requests.Total > 0 {
			msg += ": the clean-tick percentiles leave them out"
		}
		w = append(w, msg)
	}
	if s.Host.Ticks == 0 {
		w = append(w, "the host was not sampled: no interference figure backs these numbers")
	} else if s.Host.Ticks < 5 {
		w = append(w, fmt.Sprintf("only %d host ticks: the verdict has little to go on; run longer", s.Host.Ticks))
	}
	if s.Requests.Total > 0 && s.Requests.Dropped > 0 {
		w = append(w, fmt.Sprintf("%d of %d arrivals were dropped at the in-flight cap: the target could not keep up, or --max-inflight is too low", s.Requests.Dropped, s.Requests.Total))
	}
	if c := s.Generator.CPUPct; c != nil && *c > 80 {
		w = append(w, fmt.Sprintf("tare used %.0f%% of a core: a generator near its limit invents latency", *c))
	}
	w = append(w, blameWarnings(s)...)
	if s.SUT == nil && s.Requests.Total > 0 {
		w = append(w, "the system under test was not found on this host (give --pid or --cgroup when it runs here): its CPU is counted with the others, and a neighbour cannot be told from it")
	}
	return w
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
