// Package metrics shows a run's figures to Prometheus while the run goes:
// requests by outcome, latency and send lag as histograms, queue depth, each
// tick's host interference and whose-CPU shares, and the verdict once the
// run ends. It is the one owner of the Prometheus client library.
//
// Names and units follow Prometheus' conventions: seconds for times, ratios
// from 0 to 1 for shares (tare's percent divided by 100), _total for
// counters. Every series carries the run's id and label as constant labels,
// never its target or configuration, which may hold secrets. A host figure
// that was not measured in the latest tick is absent, never 0 (the rule of
// the rest of tare: a missing source is unavailable, not zero).
//
// docs/metrics.md lists every series.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tare-dev/tare"
)

// Namespace prefixes every series.
const Namespace = "tare"

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histogram: from 1 ms to a minute, about three to a decade.
var LatencyBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5,
	1, 2.5, 5, 10, 25, 60,
}

// SendLagBuckets are the upper bounds, in seconds, of the send-lag
// histogram: a healthy generator is late by microseconds, a starved one by
// seconds.
var SendLagBuckets = []float64{
	.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10,
}

// Owners are the values of the owner label of tare_cpu_share_ratio: the
// whose-CPU ledger's owners (tare.CPUBy), in its order.
var Owners = []string{"system_under_test", "tare", "others", "kernel", "unattributed", "steal", "idle"}

// Outcomes are the values of the outcome label of tare_requests_total.
var Outcomes = []string{"ok", "error", "dropped"}

// Metrics is the registry of one run's series. Its methods are safe for
// concurrent use (the Prometheus collectors' are, and what else changes is
// under mu). A nil *Metrics does nothing: the run was not asked to show its
// figures.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	latency  prometheus.Histogram
	sendLag  prometheus.Histogram
	depth    *prometheus.GaugeVec // no variable label: empty until a queue run sets it

	ticks prometheus.Counter
	// The host gauges have no variable label either: absent until the
	// first tick, and Reset removes one when a tick did not measure it.
	steal         *prometheus.GaugeVec
	stealMaxCPU   *prometheus.GaugeVec
	busy          *prometheus.GaugeVec
	throttled     *prometheus.GaugeVec
	psiSome       *prometheus.GaugeVec
	runDelay      *prometheus.GaugeVec
	neighbourWait *prometheus.GaugeVec
	cpuShare      *prometheus.GaugeVec

	verdict *prometheus.GaugeVec

	// mu guards the scrape counts WaitScrape waits on: scrapes begun (each
	// numbered by it), the highest number answered, and a channel closed
	// and replaced whenever a scrape is answered.
	mu       sync.Mutex
	begun    uint64
	answered uint64
	changed  chan struct{}
	stops    []func() // of the servers Serve started, for Close
}

// New returns the registry of run's series, labelled with its ID and Label
// (and Window, in the three-window protocol). Nothing else of the run
// reaches a label: its target and configuration may hold secrets.
func New(run tare.Run) *Metrics {
	labels := prometheus.Labels{"run_id": run.ID, "label": run.Label}
	if run.Window != "" {
		labels["window"] = run.Window
	}
	f := factory{labels: labels}
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		changed: make(chan struct{}),
		requests: prometheus.NewCounterVec(f.opts("requests_total",
			"Requests (or jobs) that ended, by outcome: ok, error (failed or timed out), dropped (never sent: the in-flight cap was reached).").counter(),
			[]string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "request_latency_seconds", ConstLabels: labels, Buckets: LatencyBuckets,
			Help: "Latency of the requests that finished, ok or failed: done − scheduled time, never from the actual send (no coordinated omission).",
		}),
		sendLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "send_lag_seconds", ConstLabels: labels, Buckets: SendLagBuckets,
			Help: "How late the generator sent each request: actual send − scheduled time. A lagging generator is itself a symptom of a starved host.",
		}),
		depth: f.gaugeVec("queue_depth", "Jobs waiting in the queue, as last sampled; absent for a target that is not a queue."),

		ticks: prometheus.NewCounter(f.opts("host_ticks_total",
			"Host samples (ticks) taken; every tare_host_* and tare_cpu_share_ratio series is the latest tick's.").counter()),
		steal: f.gaugeVec("host_steal_ratio",
			"Steal of the latest tick, over all online CPUs: time the hypervisor gave the vCPUs to someone else."),
		stealMaxCPU: f.gaugeVec("host_steal_max_cpu_ratio",
			"The highest steal of any single CPU in the latest tick: the aggregate hides one starved vCPU."),
		busy: f.gaugeVec("host_cpu_busy_ratio",
			"CPU busy in the latest tick: the time the guest itself ran (everything but idle, iowait and steal)."),
		throttled: f.gaugeVec("host_throttled_ratio",
			"Share of the latest tick the cgroup of the measured processes was throttled by its CPU quota; absent when not measured."),
		psiSome: f.gaugeVec("host_psi_cpu_some_ratio",
			"CPU pressure of the latest tick (/proc/pressure/cpu some): share of it some task waited for a CPU; absent without PSI."),
		runDelay: f.gaugeVec("host_run_delay_ratio",
			"Run delay of the measured processes (system under test and tare) in the latest tick, in CPUs' worth of the tick (above 1 when several threads waited at once); absent when not measured."),
		neighbourWait: f.gaugeVec("host_neighbour_wait_ratio",
			"CPU the measured processes lost in the latest tick waiting behind other processes (run delay scaled by the neighbours' part of the CPU), in CPUs' worth of the tick; absent when not measured."),
		cpuShare: prometheus.NewGaugeVec(f.opts("cpu_share_ratio",
			"Whose CPU the latest tick was: all of the host's CPU time split by owner, summing to 1; absent when the processes could not be read.").gauge(),
			[]string{"owner"}),

		verdict: prometheus.NewGaugeVec(f.opts("verdict",
			"The run's verdict once it ended: 1 for its level (clean, suspect or polluted), 0 for the others; absent while the run goes.").gauge(),
			[]string{"level"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.sendLag, m.depth,
		m.ticks, m.steal, m.stealMaxCPU, m.busy, m.throttled, m.psiSome, m.runDelay, m.neighbourWait, m.cpuShare,
		m.verdict)
	for _, o := range Outcomes {
		m.requests.WithLabelValues(o) // a rate() needs the series at 0 before the first one
	}
	return m
}

// Registry is the Prometheus registry that holds the run's series, for a
// caller that serves or gathers them itself.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AddResult counts one result: its outcome, and for a request that was
// sent and finished its latency and send lag, as stats counts them.
func (m *Metrics) AddResult(res *tare.Result) {
	switch {
	case m == nil || res == nil:
		return
	case res.Dropped:
		m.requests.WithLabelValues("dropped").Inc()
		return
	case res.Err != "":
		m.requests.WithLabelValues("error").Inc()
	default:
		m.requests.WithLabelValues("ok").Inc()
	}
	if !res.Sent.IsZero() {
		m.sendLag.Observe(res.SendLag().Seconds())
	}
	if !res.Done.IsZero() {
		m.latency.Observe(res.Latency().Seconds())
	}
}

// AddHost shows one tick's host figures, replacing the previous tick's. A
// figure the tick did not measure disappears rather than reading 0.
func (m *Metrics) AddHost(h tare.HostSample) {
	if m == nil {
		return
	}
	m.ticks.Inc()
	m.steal.WithLabelValues().Set(ratio(h.CPU.Steal))
	m.stealMaxCPU.WithLabelValues().Set(ratio(h.MaxCPUSteal()))
	m.busy.WithLabelValues().Set(ratio(h.CPU.Busy()))
	setOrReset(m.throttled, h.Throttled)
	setOrReset(m.psiSome, h.PSISome)
	setOrReset(m.runDelay, h.RunDelay)
	setOrReset(m.neighbourWait, h.NeighbourWait())
	if h.CPUBy == nil {
		m.cpuShare.Reset()
		return
	}
	c := h.CPUBy
	for i, v := range []float64{c.SystemUnderTest, c.Tare, c.Others, c.Kernel, c.Unattributed, c.Steal, c.Idle} {
		m.cpuShare.WithLabelValues(Owners[i]).Set(ratio(v))
	}
}

// SetQueueDepth shows the queue's depth as last sampled.
func (m *Metrics) SetQueueDepth(depth float64) {
	if m != nil {
		m.depth.WithLabelValues().Set(depth)
	}
}

// SetVerdict shows the run's verdict: 1 for its level, 0 for the others.
func (m *Metrics) SetVerdict(v tare.Verdict) {
	if m == nil {
		return
	}
	for _, l := range []tare.Level{tare.Clean, tare.Suspect, tare.Polluted} {
		x := 0.0
		if l == v.Level {
			x = 1
		}
		m.verdict.WithLabelValues(string(l)).Set(x)
	}
}

// ratio turns tare's percent into Prometheus' ratio.
func ratio(pct float64) float64 { return pct / 100 }

func setOrReset(g *prometheus.GaugeVec, pct *float64) {
	if pct == nil {
		g.Reset()
		return
	}
	g.WithLabelValues().Set(ratio(*pct))
}

// factory fills the options every series shares.
type factory struct{ labels prometheus.Labels }

type opts prometheus.Opts

func (f factory) opts(name, help string) opts {
	return opts{Namespace: Namespace, Name: name, Help: help, ConstLabels: f.labels}
}

func (o opts) counter() prometheus.CounterOpts { return prometheus.CounterOpts(o) }
func (o opts) gauge() prometheus.GaugeOpts     { return prometheus.GaugeOpts(o) }

// gaugeVec is a gauge with no variable label that can be absent: set with
// WithLabelValues(), removed with Reset.
func (f factory) gaugeVec(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(f.opts(name, help).gauge(), nil)
}
