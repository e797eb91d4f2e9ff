package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// measurement is one load window: what to send, how, and what to watch.
type measurement struct {
	run      tare.Run
	start    time.Time           // when the arrivals begin (tare run --start-at); now when zero
	finish   func(*tare.Summary) // when not nil, adds to the summary before it is stored
	target   tare.Target
	schedule arrival.Process
	rate     float64 // offered arrivals per second, for the arrival span
	engine   load.Config
	sampler  host.Config
	sutBy    string // how the system under test (sampler.SUT) was found
	judging  judging
	progress *progress
	store    tare.Store                             // nil: the run is not stored
	depth    func(context.Context) (float64, error) // queue depth, sampled every tick; nil for targets without a queue
	metrics  *metricsFlags                          // nil or empty: no Prometheus endpoint
	stderr   io.Writer                              // hears where the endpoint is
}

// judging is what the verdict is measured against.
type judging struct {
	thresholds judge.Thresholds
	slo        judge.SLO
	failOn     string // "", "polluted", "suspect", "slo"
}

// measure runs one load window with the host sampled during the very same
// seconds, and returns its summary and timeline. A cancelled ctx stops the
// arrivals and yields a summary marked interrupted: nothing measured is lost.
// Results and ticks stream to the store as they come; a store that fails
// mid-run does not stop the measurement: the summary is returned with a
// storeErr saying what was not kept.
func measure(ctx context.Context, m measurement) (s tare.Summary, ticks []tare.Tick, storeErr, err error) {
	sampler, err := host.NewSampler(m.sampler)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	defer sampler.Close()

	start := m.start
	if start.IsZero() {
		start = time.Now()
	}
	m.run.StartedAt, m.run.Status = start, tare.StatusRunning
	if m.store != nil && m.run.ID == "" {
		m.run.ID = store.NewRunID()
	}
	nameJobs(m.target, m.run.ID)
	mx, err := m.metrics.start(ctx, m.run, m.stderr)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	defer mx.Close()
	out := newSink(ctx, m.store, m.run, sampler.Env())
	rec, err := stats.NewRecorder(stats.Config{Start: start, Tick: m.sampler.Tick, Threshold: m.judging.thresholds.Steal})
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	if good, slo := m.judging.slo.PerRequest(); good != nil {
		rec.CountGoodput(good, slo)
	}

	sampleCtx, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSampling()
	samples := make(chan tare.HostSample, 16)
	go sampler.Run(sampleCtx, samples)

	depths := make(chan depthSample, 16)
	if m.depth != nil {
		go sampleDepth(sampleCtx, m.depth, m.sampler.Tick, depths)
	}

	sched := &lastOffset{Process: m.schedule}
	results := make(chan tare.Result, 1024)
	engine := load.New(m.target, m.engine)
	usage := make(chan load.Usage, 1)
	go func() { usage <- engine.Run(ctx, start, sched, results) }()

	// One consumer feeds the recorder, so stats need no locks.
	var refresh <-chan time.Time
	if m.progress != nil {
		t := time.NewTicker(m.progress.every)
		defer t.Stop()
		refresh = t.C
	}
	for results != nil {
		select {
		case res, ok := <-results:
			if !ok {
				results = nil
				continue
			}
			rec.AddResult(&res)
			mx.AddResult(&res)
			out.add(&res)
		case s := <-samples:
			rec.AddHost(s)
			mx.AddHost(s)
			out.ticks(rec, false)
		case d := <-depths:
			rec.AddDepth(d.at, d.depth)
			mx.SetQueueDepth(d.depth)
		case now := <-refresh:
			m.progress.show(rec.Snapshot(now), engine.Progress(), m.target)
		}
	}
	end := time.Now()
	u := <-usage
	stopSampling()
	for s := range samples {
		rec.AddHost(s)
		mx.AddHost(s)
	}
	// The sampler has stopped: one last reading covers the tail of the run.
	if last, err := sampler.Sample(end); err == nil {
		rec.AddHost(last)
		mx.AddHost(last)
	}
	if m.progress != nil {
		m.progress.done()
	}

	span := sched.span(m.rate)
	status := tare.StatusComplete
	if ctx.Err() != nil {
		status = tare.StatusInterrupted
		span = min(span, end.Sub(start))
	}
	s = rec.Summary(end, span)
	s.Schema = tare.SummarySchema
	s.Run = m.run
	s.Run.StartedAt, s.Run.EndedAt, s.Run.Status = start, end, status
	s.Env = sampler.Env()
	s.Generator.CPUPct = tare.Float(u.CPUPct())
	s.SUT = sutSummary(s.SUT, m.sampler.SUT, m.sutBy)
	ticks = rec.Ticks()
	s.Verdict = judge.Judge(&s, ticks, m.judging.thresholds, m.judging.slo)
	s.Verdict.Warnings = append(s.Verdict.Warnings, rec.Warnings()...)
	for _, w := range sampler.Warnings() {
		s.Verdict.Warnings = append(s.Verdict.Warnings, w.Error())
	}
	finishTarget(&s, m.target)
	if att := stats.Attribute(ticks); att.Ticks >= stats.MinAttributionTicks {
		s.Verdict.Attribution = att.Sentence
	}
	s.Thresholds = m.judging.thresholds.Map()
	if m.finish != nil {
		m.finish(&s)
	}
	out.ticks(rec, true)
	m.metrics.end(ctx, mx, s.Verdict, m.stderr)
	return s, ticks, out.finish(&s), nil
}

// lastOffset remembers the last arrival offset its process yielded, so the
// offered rate is counted over the arrival window actually used.
type lastOffset struct {
	arrival.Process
	last time.Duration
	n    int
}

func (l *lastOffset) Next() (time.Duration, bool) {
	at, ok := l.Process.Next()
	if ok {
		l.last, l.n = at, l.n+1
	}
	return at, ok
}

// span is the arrival window: the last arrival's offset plus one mean gap,
// which for n arrivals at a constant rate r is exactly n/r.
func (l *lastOffset) span(rate float64) time.Duration {
	if l.n == 0 || rate <= 0 {
		return 0
	}
	return l.last + time.Duration(float64(time.Second)/rate)
}

// sutSummary completes what stats measured of the system under test with
// which processes it was and how tare found them; nil when tare did not
// know it.
func sutSummary(measured *tare.SUTSummary, pids []int, foundBy string) *tare.SUTSummary {
	if len(pids) == 0 {
		return nil
	}
	if measured == nil {
		measured = &tare.SUTSummary{}
	}
	measured.PIDs, measured.FoundBy = pids, foundBy
	return measured
}

// Exit statuses of --fail-on: a failed SLO on a run that describes the
// code, and a measurement that cannot be trusted (rerun, do not file a
// regression).
const (
	exitSLO          = 1
	exitInconclusive = 3
)

// verdictStatus turns the verdict into the exit status --fail-on asks for.
func verdictStatus(s *tare.Summary, failOn string) error {
	v := s.Verdict
	switch failOn {
	case "polluted":
		if v.Level == tare.Polluted {
			return &exitError{code: exitInconclusive, reason: "verdict polluted (--fail-on polluted): the measurement is inconclusive, rerun it"}
		}
	case "suspect":
		if v.Level != tare.Clean {
			return &exitError{code: exitInconclusive, reason: fmt.Sprintf("verdict %s (--fail-on suspect): the measurement is inconclusive, rerun it", v.Level)}
		}
	case "slo":
		switch {
		case judge.Met(v.SLO):
		case v.Level == tare.Polluted:
			return &exitError{code: exitInconclusive, reason: "SLO not met, on a polluted run (--fail-on slo): the measurement is inconclusive, rerun it before deciding"}
		default:
			return &exitError{code: exitSLO, reason: "SLO not met (--fail-on slo)"}
		}
	}
	return nil
}

// printSummary writes the summary as text or JSON; the text draws
// sparklines of the ticks, when given.
func printSummary(w io.Writer, s *tare.Summary, asJSON bool, ticks ...tare.Tick) error {
	if asJSON {
		return report.JSON(w, s)
	}
	return report.Text(w, s, ticks...)
}

// measureAndReport runs the measurement, prints its summary and returns the
// exit status: a store failure (exit 2) after the summary is printed, else
// what --fail-on asks of the verdict.
func measureAndReport(cmd *cobra.Command, m measurement, asJSON bool) error {
	s, ticks, storeErr, err := measure(cmd.Context(), m)
	if err != nil {
		return err
	}
	if err := printSummary(cmd.OutOrStdout(), &s, asJSON, ticks...); err != nil {
		return err
	}
	if storeErr != nil {
		return storeErr
	}
	return verdictStatus(&s, m.judging.failOn)
}

type depthSample struct {
	at    time.Time
	depth float64
}

// sampleDepth reads the queue's depth twice a tick until ctx ends. A
// failed read is skipped: the queue target counts the outage in its own
// errors.
func sampleDepth(ctx context.Context, depth func(context.Context) (float64, error), tick time.Duration, out chan<- depthSample) {
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if d, err := depth(ctx); err == nil {
				select {
				case out <- depthSample{at: now, depth: d}:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}
