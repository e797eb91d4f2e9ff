package judge

import (
	"fmt"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// Signal names, as they appear in verdicts.
const (
	SignalSteal        = "steal"
	SignalThrottling   = "throttling"
	SignalRunDelay     = "run_delay"
	SignalLatencyAlone = "latency_without_queue"
	SignalGenerator    = "generator_starved"
)

// Thresholds are the limits the signals test against. Shares are percent.
type Thresholds struct {
	Steal          float64       // mean steal, a tick's steal, or one CPU's mean steal above this fires (10)
	StealTicks     float64       // share of ticks above Steal that fires (10)
	ThrottledTicks float64       // share of ticks with any throttling that fires (5)
	RunDelay       float64       // run delay of the measured processes, share of wall time (5)
	LatencyFactor  float64       // a tick's p95 at least this many times the median tick p95 (2)
	LatencyTicks   int           // that many such ticks fire (3)
	LatencyShare   float64       // or that share of ticks (10)
	LatencyFloor   time.Duration // and the tick's p95 exceeds the median by at least this (1ms): below it, scheduler noise on a fast service is not a signal
	SendLagP99     time.Duration // generator send-lag p99 above this fires (10ms)
	GeneratorDelay float64       // tare's own run delay, share of wall time (5)
}

// DefaultThresholds returns the thresholds of DESIGN.md.
func DefaultThresholds() Thresholds {
	return Thresholds{
		Steal:          10,
		StealTicks:     10,
		ThrottledTicks: 5,
		RunDelay:       5,
		LatencyFactor:  2,
		LatencyTicks:   3,
		LatencyShare:   10,
		LatencyFloor:   time.Millisecond,
		SendLagP99:     10 * time.Millisecond,
		GeneratorDelay: 5,
	}
}

// Map returns the thresholds by name, for the summary's record of what the
// verdict used.
func (t Thresholds) Map() map[string]float64 {
	return map[string]float64{
		"steal_pct":               t.Steal,
		"steal_ticks_pct":         t.StealTicks,
		"throttled_ticks_pct":     t.ThrottledTicks,
		"run_delay_pct":           t.RunDelay,
		"latency_factor":          t.LatencyFactor,
		"latency_ticks":           float64(t.LatencyTicks),
		"latency_ticks_pct":       t.LatencyShare,
		"send_lag_p99_ms":         ms(t.SendLagP99),
		"generator_run_delay_pct": t.GeneratorDelay,
	}
}

// Judge returns the verdict on a run from its summary and timeline. slo may
// be nil.
func Judge(s *tare.Summary, ticks []tare.Tick, th Thresholds, slo SLO) tare.Verdict {
	host := hostTicks(ticks)
	signals := []tare.Signal{
		steal(s, host, th),
		throttling(host, th),
		runDelay(s, th),
		latencyAlone(ticks, th),
		generator(s, th),
	}
	v := tare.Verdict{Level: tare.Clean, Signals: signals}
	for _, sig := range signals {
		if !sig.Fired {
			continue
		}
		switch sig.Name {
		case SignalSteal, SignalThrottling, SignalGenerator:
			v.Level = tare.Polluted
		default:
			if v.Level == tare.Clean {
				v.Level = tare.Suspect
			}
		}
	}
	v.SLO = slo.Check(s)
	v.Advice = advise(s, v, th)
	v.Warnings = warnings(s, host, signals[0].Fired)
	return v
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

func runDelay(s *tare.Summary, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalRunDelay, Threshold: th.RunDelay}
	d := s.Host.RunDelayPct
	if d == nil {
		sig.Detail = "run delay was not measured (no schedstat for the measured processes)"
		return sig
	}
	sig.Value = tare.Float(*d)
	sig.Fired = *d > th.RunDelay
	sig.Detail = fmt.Sprintf("the measured processes waited on a run queue %.1f%% of the time (threshold %g%%)", *d, th.RunDelay)
	if sig.Fired {
		sig.Detail += ": something else in this machine competes for the same CPUs"
	}
	return sig
}

// latencyAlone looks for ticks whose p95 jumps while the load inside the
// system (queue depth, or in-flight for direct targets) stays flat: more
// work did not arrive, so the time went somewhere else.
func latencyAlone(ticks []tare.Tick, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalLatencyAlone, Threshold: float64(th.LatencyTicks)}
	var p95s, depths []float64
	var live []tare.Tick
	for _, t := range ticks {
		if t.Completions == 0 {
			continue
		}
		live = append(live, t)
		p95s = append(p95s, float64(t.P95))
		depths = append(depths, depth(t))
	}
	if len(live) < 3 {
		sig.Value = tare.Float(0)
		sig.Detail = fmt.Sprintf("only %d ticks with completions: too few to compare latency with load", len(live))
		return sig
	}
	medP95, medDepth := median(p95s), median(depths)
	flat := max(medDepth*1.2, medDepth+1)
	n := 0
	for _, t := range live {
		p95 := float64(t.P95)
		if p95 >= th.LatencyFactor*medP95 && p95-medP95 >= float64(th.LatencyFloor) && depth(t) <= flat {
			n++
		}
	}
	share := 100 * float64(n) / float64(len(live))
	sig.Value = tare.Float(float64(n))
	sig.Fired = n >= th.LatencyTicks || share >= th.LatencyShare && n > 0
	sig.Detail = fmt.Sprintf("%d of %d ticks had p95 ≥ %g× the median tick p95 (%.0f ms) while %s stayed within +20%% / +1 of its median (%.1f)",
		n, len(live), th.LatencyFactor, medP95/1e6, depthName(ticks), medDepth)
	if sig.Fired {
		sig.Detail += ": latency moved without more work to do, which points at the host"
	}
	return sig
}

func depth(t tare.Tick) float64 {
	if t.QueueDepth != nil {
		return *t.QueueDepth
	}
	return float64(t.InFlight)
}

func depthName(ticks []tare.Tick) string {
	for _, t := range ticks {
		if t.QueueDepth != nil {
			return "queue depth"
		}
	}
	return "in-flight"
}

func generator(s *tare.Summary, th Thresholds) tare.Signal {
	sig := tare.Signal{Name: SignalGenerator, Threshold: ms(th.SendLagP99)}
	lag, delay := s.SendLag.P99, s.Generator.RunDelayPct
	if lag == nil && delay == nil {
		sig.Detail = "send lag was not measured (nothing was sent)"
		return sig
	}
	if lag != nil {
		sig.Value = tare.Float(*lag)
	}
	switch {
	case lag != nil && *lag > ms(th.SendLagP99):
		sig.Fired = true
		sig.Detail = fmt.Sprintf("send lag p99 was %.1f ms (threshold %g ms): tare itself could not send on time, so it invented latency", *lag, ms(th.SendLagP99))
	case delay != nil && *delay > th.GeneratorDelay:
		sig.Fired = true
		sig.Threshold = th.GeneratorDelay
		sig.Value = tare.Float(*delay)
		sig.Detail = fmt.Sprintf("tare waited on a run queue %.1f%% of the time (threshold %g%%): the load generator was short of CPU", *delay, th.GeneratorDelay)
	case lag != nil:
		sig.Detail = fmt.Sprintf("send lag p99 was %.2f ms (threshold %g ms)", *lag, ms(th.SendLagP99))
	default:
		sig.Detail = fmt.Sprintf("tare waited on a run queue %.1f%% of the time (threshold %g%%)", *delay, th.GeneratorDelay)
	}
	return sig
}

func warnings(s *tare.Summary, host []*tare.HostSample, stealFired bool) []string {
	var w []string
	if p := s.Host.PollutedTicksPct; p != nil && *p > 0 && !stealFired {
		// A tick polluted by CPU pressure or throttling, not steal: the
		// clean-tick percentiles leave those ticks out.
		w = append(w, fmt.Sprintf("%.0f%% of ticks were polluted (steal, throttling or CPU pressure above the threshold): compare the clean-tick percentiles with the raw ones", *p))
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
	return w
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
