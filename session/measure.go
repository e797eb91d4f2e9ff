package session

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// Measure runs one load window with the host sampled during the very same
// seconds, and returns its summary and timeline. A cancelled ctx stops the
// arrivals and yields a summary marked interrupted: nothing measured is lost.
// Results and ticks stream to the store as they come; a store that fails
// mid-run does not stop the measurement: the summary is returned with a
// storeErr saying what was not kept. err is for a window that could not
// start (a sampler or recorder that cannot be made).
func Measure(ctx context.Context, cfg Config) (s tare.Summary, ticks []tare.Tick, storeErr, err error) {
	sampler, err := host.NewSampler(cfg.Host)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	defer sampler.Close()

	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	run := cfg.Run
	run.StartedAt, run.Status = start, tare.StatusRunning
	if cfg.Store != nil && run.ID == "" {
		run.ID = store.NewRunID()
	}
	nameJobs(cfg.Target, run.ID)
	watch, err := cfg.watch(run)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	out := newSink(ctx, cfg.Store, run, sampler.Env())
	// The figures start after the warm-up: what is scheduled before is
	// sent, counted, and left out.
	figuresFrom := start.Add(max(cfg.Warmup, 0))
	recCfg := stats.Config{Start: figuresFrom, Tick: sampler.Tick(), Threshold: cfg.Thresholds.Steal}
	if cfg.Mix != nil {
		recCfg.Targets = cfg.Mix.Names()
	}
	rec, err := stats.NewRecorder(recCfg)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	recCfg.Start = start
	spans, stageIndex := stageSpans(cfg.Stages, cfg.Warmup)
	parts, err := stats.NewParts(recCfg, spans)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	warmedUp := 0
	addHost := func(s tare.HostSample) {
		if s.Mid().Before(figuresFrom) {
			return
		}
		rec.AddHost(s)
		parts.AddHost(s)
		watch.AddHost(s)
	}
	if good, slo := cfg.SLO.PerRequest(); good != nil {
		rec.CountGoodput(good, slo)
	}

	// 1. The host sampler, and the queue's depth, every tick until the
	// arrivals and their drain are over (not cancelled with ctx: the
	// drain after Ctrl-C is measured too).
	sampleCtx, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSampling()
	samples := make(chan tare.HostSample, 16)
	go sampler.Run(sampleCtx, samples)
	if cfg.OnStart != nil {
		cfg.OnStart(sampler)
	}
	depths := make(chan depthSample, 16)
	if cfg.Depth != nil {
		go sampleDepth(sampleCtx, cfg.Depth, sampler.Tick(), depths)
	}

	// 2. The arrivals, fired by the engine at their scheduled times.
	sched := &lastOffset{Process: cfg.Schedule}
	results := make(chan tare.Result, 1024)
	var conns *tare.ConnCounter
	var connsBefore tare.ConnStats
	if c, ok := cfg.Target.(tare.ConnCounted); ok {
		conns = c.Conns()
		connsBefore = conns.Stats()
	}
	engine := load.New(cfg.Target, cfg.Engine)
	usage := make(chan load.Usage, 1)
	go func() { usage <- engine.Run(ctx, start, sched, results) }()

	// 3. One consumer feeds the recorder, so stats need no locks, and the
	// store, which batches.
	var refresh <-chan time.Time
	if cfg.OnProgress != nil && cfg.ProgressEvery > 0 {
		t := time.NewTicker(cfg.ProgressEvery)
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
			if cfg.Mix != nil {
				// Dropped arrivals never reached the target: name their
				// request too.
				res.TargetIndex = cfg.Mix.Pick(res.Seq)
			}
			if res.Scheduled.Before(figuresFrom) {
				warmedUp++
				continue
			}
			rec.AddResult(&res)
			parts.AddResult(&res)
			watch.AddResult(&res)
			out.add(&res)
		case s := <-samples:
			addHost(s)
			out.ticks(rec, false)
		case d := <-depths:
			if d.at.Before(figuresFrom) {
				continue
			}
			rec.AddDepth(d.at, d.depth)
			parts.AddDepth(d.at, d.depth)
			watch.SetQueueDepth(d.depth)
		case now := <-refresh:
			cfg.OnProgress(rec.Snapshot(now), engine.Progress())
		}
	}
	end := time.Now()
	u := <-usage
	stopSampling()
	lastSamples(samples, sampler, end, addHost)
	if cfg.OnDone != nil {
		cfg.OnDone()
	}

	// 4. The summary, over the arrival window actually used (after the
	// warm-up), and its verdict.
	span := sched.span(cfg.Rate)
	if len(cfg.Stages) > 0 && sched.n > 0 {
		span = stagedSpan(cfg.Stages, sched.last)
	}
	status := tare.StatusComplete
	if ctx.Err() != nil {
		status = tare.StatusInterrupted
		span = min(span, end.Sub(start))
	}
	span = max(span-max(cfg.Warmup, 0), 0)
	s = rec.Summary(end, span)
	s.Schema = tare.SummarySchema
	s.Run = run
	s.Run.StartedAt, s.Run.EndedAt, s.Run.Status = start, end, status
	s.Env = sampler.Env()
	explainBlame(&s, sampler.BlameWhy())
	s.Generator.CPUPct = tare.Float(u.CPUPct())
	s.Generator.Engine = u.Engine
	if u.Engine == load.EngineLoop {
		s.Generator.Engines, s.Generator.Connections = u.Engines, u.Workers
	}
	if conns != nil {
		s.Generator.ConnectionUse = connectionUse(conns.Stats().Sub(connsBefore), cfg.Connections, u.Engine, rec)
		s.Generator.Connections = int(conns.Stats().Peak)
	}
	s.SUT = sutSummary(s.SUT, cfg.Host.SUT, cfg.SUTFoundBy, sampler)
	ticks = rec.Ticks()
	s.Verdict = judge.Judge(&s, ticks, cfg.Thresholds, cfg.SLO)
	s.Verdict.Warnings = append(s.Verdict.Warnings, rec.Warnings()...)
	for _, w := range sampler.Warnings() {
		s.Verdict.Warnings = append(s.Verdict.Warnings, w.Error())
	}
	finishTarget(&s, cfg.Target)
	if att := stats.Attribute(ticks); att.Ticks >= stats.MinAttributionTicks {
		s.Verdict.Attribution = att.Sentence
	}
	s.Thresholds = cfg.Thresholds.Map()
	if cfg.Warmup > 0 {
		s.Warmup = &tare.Warmup{DurationS: cfg.Warmup.Seconds(), Requests: warmedUp}
	}
	stageSummaries(parts, cfg.Stages, stageIndex, spans, cfg.Thresholds, cfg.SLO, &s)
	if cfg.Finish != nil {
		cfg.Finish(&s)
	}

	// 5. The rest of the ticks and the summary to the store.
	out.ticks(rec, true)
	return s, ticks, out.finish(&s), nil
}

// connectionUse is what the run did with its connections: st, counted by
// the target (and the event loops) over the run, with the limit (0:
// none), and the connections in use per tick that rec counted.
func connectionUse(st tare.ConnStats, limit int, engine string, rec *stats.Recorder) *tare.ConnectionUse {
	u := &tare.ConnectionUse{Opened: int(st.Opened), Reused: int(st.Reused), Closed: int(st.Closed),
		TickMS: float64(rec.Config().Tick) / float64(time.Millisecond), InUsePerTick: rec.ConnsPerTick()}
	if limit > 0 {
		u.Limit = tare.Int(limit)
	}
	// Only the event loops count the requests that wait for a connection;
	// net/http's pool does not say.
	if engine == load.EngineLoop {
		u.Waited = tare.Int(int(st.Waited))
	}
	return u
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
// which processes it was, how tare found them and what they called (the
// sampler's graph, whose nodes' figures stats measured by index); nil
// when tare did not know it.
func sutSummary(measured *tare.SUTSummary, pids []int, foundBy string, sampler *host.Sampler) *tare.SUTSummary {
	if len(pids) == 0 {
		return nil
	}
	if measured == nil {
		measured = &tare.SUTSummary{}
	}
	measured.PIDs, measured.FoundBy = pids, foundBy
	measured.Calls = sampler.Called()
	graph := sampler.Graph()
	for i := range graph {
		if i < len(measured.Graph) {
			graph[i].CPUPct, graph[i].RunDelayPct = measured.Graph[i].CPUPct, measured.Graph[i].RunDelayPct
		}
	}
	measured.Graph = graph
	return measured
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

// lastSamples hands add what the stopped sampler still had in its
// channel, and one last reading that covers the tail of the window up to
// end.
func lastSamples(samples <-chan tare.HostSample, sampler *host.Sampler, end time.Time, add func(tare.HostSample)) {
	for s := range samples {
		add(s)
	}
	if last, err := sampler.Sample(end); err == nil {
		add(last)
	}
}
