package session

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
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
	w, err := startWindow(ctx, cfg)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	defer w.close()
	w.consume(ctx)
	s, ticks = w.finish(ctx)
	// The rest of the ticks and the summary to the store.
	w.out.ticks(w.rec, true)
	return s, ticks, w.out.finish(&s), nil
}

// measuring is one load window under way: the host sampler, the arrivals and
// what their results and the samples feed.
type measuring struct {
	cfg                Config
	run                tare.Run
	start, figuresFrom time.Time // the figures start after the warm-up
	sampler            *host.Sampler
	rec                *stats.Recorder
	parts              *stats.Parts // the figures per stage
	spans              []stats.Span
	stageIndex         []int
	watch              Watcher
	out                *sink
	sched              *lastOffset
	engine             *load.Runner
	conns              *tare.ConnCounter // nil when the target does not count them
	connsBefore        tare.ConnStats

	samples      chan tare.HostSample
	depths       chan depthSample
	results      chan *load.Batch
	usage        chan load.Usage
	stopSampling context.CancelFunc
	refresh      *time.Ticker // nil without progress

	warmedUp int // results scheduled in the warm-up, left out
	end      time.Time
}

// startWindow makes the window's sampler and recorders, and starts the
// sampling and the arrivals.
func startWindow(ctx context.Context, cfg Config) (_ *measuring, err error) {
	w := &measuring{cfg: cfg, start: cfg.Start}
	if w.sampler, err = host.NewSampler(cfg.Host); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.sampler.Close()
		}
	}()
	if w.start.IsZero() {
		w.start = time.Now()
	}
	w.run = cfg.Run
	w.run.StartedAt, w.run.Status = w.start, tare.StatusRunning
	if cfg.Store != nil && w.run.ID == "" {
		w.run.ID = store.NewRunID()
	}
	nameJobs(cfg.Target, w.run.ID)
	if err := w.record(ctx); err != nil {
		return nil, err
	}
	w.startSampling(ctx)
	w.startArrivals(ctx)
	return w, nil
}

// record makes what the window's results and samples feed: the recorder,
// the figures per stage, the watcher and the store's sink.
func (w *measuring) record(ctx context.Context) (err error) {
	cfg := w.cfg
	if w.watch, err = cfg.watch(w.run); err != nil {
		return err
	}
	w.out = newSink(ctx, cfg.Store, w.run, w.sampler.Env())
	// What is scheduled before the warm-up's end is sent, counted, and
	// left out.
	w.figuresFrom = w.start.Add(max(cfg.Warmup, 0))
	recCfg := stats.Config{Start: w.figuresFrom, Tick: w.sampler.Tick(), Threshold: cfg.Thresholds.Steal}
	if cfg.Mix != nil {
		recCfg.Targets = cfg.Mix.Names()
	}
	if w.rec, err = stats.NewRecorder(recCfg); err != nil {
		return err
	}
	recCfg.Start = w.start
	w.spans, w.stageIndex = stageSpans(cfg.Stages, cfg.Warmup)
	if w.parts, err = stats.NewParts(recCfg, w.spans); err != nil {
		return err
	}
	if good, slo := cfg.SLO.PerRequest(); good != nil {
		w.rec.CountGoodput(good, slo)
	}
	return nil
}

// startSampling starts the host sampler, and the queue's depth, every
// tick until the arrivals and their drain are over (not cancelled with
// ctx: the drain after Ctrl-C is measured too).
func (w *measuring) startSampling(ctx context.Context) {
	var sampleCtx context.Context
	sampleCtx, w.stopSampling = context.WithCancel(context.WithoutCancel(ctx))
	w.samples = make(chan tare.HostSample, 16)
	go w.sampler.Run(sampleCtx, w.samples)
	if w.cfg.OnStart != nil {
		w.cfg.OnStart(w.sampler)
	}
	w.depths = make(chan depthSample, 16)
	if w.cfg.Depth != nil {
		go sampleDepth(sampleCtx, w.cfg.Depth, w.sampler.Tick(), w.depths)
	}
}

// startArrivals starts the engine, which fires the arrivals at their
// scheduled times, counting this window's connections.
func (w *measuring) startArrivals(ctx context.Context) {
	cfg := w.cfg
	w.sched = &lastOffset{Process: cfg.Schedule}
	// Up to 16 batches wait for the consumer: an event loop's hold up to
	// 1,024 results each, so a consumer held up (a store's flush) holds
	// the loops back at a few MB of results, not more.
	w.results = make(chan *load.Batch, 16)
	if p, ok := cfg.Target.(tare.ProtocolCounted); ok {
		p.ResetProtocols() // a sweep's steps share the target
	}
	if c, ok := cfg.Target.(tare.ConnCounted); ok {
		w.conns = c.Conns()
		w.connsBefore = w.conns.Stats()
	}
	w.engine = load.New(cfg.Target, cfg.Engine)
	w.usage = make(chan load.Usage, 1)
	go func() { w.usage <- w.engine.Run(ctx, w.start, w.sched, w.results) }()
	if cfg.OnProgress != nil && cfg.ProgressEvery > 0 {
		w.refresh = time.NewTicker(cfg.ProgressEvery)
	}
}

// close stops what the window started.
func (w *measuring) close() {
	w.stopSampling()
	if w.refresh != nil {
		w.refresh.Stop()
	}
	w.sampler.Close()
}

// consume feeds the results and the samples to the recorders, from one
// goroutine, so stats need no locks, and to the store, which batches,
// until the arrivals are over; then the last samples.
func (w *measuring) consume(ctx context.Context) {
	var refresh <-chan time.Time
	if w.refresh != nil {
		refresh = w.refresh.C
	}
	for results := w.results; results != nil; {
		select {
		case b, ok := <-results:
			if !ok {
				results = nil
				continue
			}
			// Read in place: none of what addResult feeds keeps a result.
			for i := range b.Results {
				w.addResult(&b.Results[i])
			}
			b.Release()
		case s := <-w.samples:
			w.addHost(s)
			w.out.ticks(w.rec, false)
		case d := <-w.depths:
			if d.at.Before(w.figuresFrom) {
				continue
			}
			w.rec.AddDepth(d.at, d.depth)
			w.parts.AddDepth(d.at, d.depth)
			w.watch.SetQueueDepth(d.depth)
		case now := <-refresh:
			w.cfg.OnProgress(w.rec.Snapshot(now), w.engine.Progress())
		}
	}
	w.end = time.Now()
}

func (w *measuring) addResult(res *tare.Result) {
	if w.cfg.Mix != nil {
		// Dropped arrivals never reached the target: name their request
		// too.
		res.TargetIndex = w.cfg.Mix.Pick(res.Seq)
	}
	if res.Scheduled.Before(w.figuresFrom) {
		w.warmedUp++
		return
	}
	w.rec.AddResult(res)
	w.parts.AddResult(res)
	w.watch.AddResult(res)
	w.out.add(res)
}

func (w *measuring) addHost(s tare.HostSample) {
	if s.Mid().Before(w.figuresFrom) {
		return
	}
	w.rec.AddHost(s)
	w.parts.AddHost(s)
	w.watch.AddHost(s)
}

// finish summarises and judges the window over the arrival window
// actually used (after the warm-up), once the sampler has given its last
// samples.
func (w *measuring) finish(ctx context.Context) (tare.Summary, []tare.Tick) {
	cfg := w.cfg
	u := <-w.usage
	w.stopSampling()
	lastSamples(w.samples, w.sampler, w.end, w.addHost)
	if cfg.OnDone != nil {
		cfg.OnDone()
	}
	span := w.sched.span(cfg.Rate)
	if len(cfg.Stages) > 0 && w.sched.n > 0 {
		span = stagedSpan(cfg.Stages, w.sched.last)
	}
	run := w.run
	run.EndedAt, run.Status = w.end, tare.StatusComplete
	if ctx.Err() != nil {
		run.Status = tare.StatusInterrupted
		span = min(span, w.end.Sub(w.start))
	}
	s, ticks := finish(w.rec, closing{
		run: run, span: max(span-max(cfg.Warmup, 0), 0), sampler: w.sampler, sut: cfg.Host.SUT, foundBy: cfg.SUTFoundBy,
		thresholds: cfg.Thresholds, slo: cfg.SLO,
		before: func(s *tare.Summary) { w.generator(s, u) },
	})
	finishTarget(&s, cfg.Target)
	if cfg.Warmup > 0 {
		s.Warmup = &tare.Warmup{DurationS: cfg.Warmup.Seconds(), Requests: w.warmedUp}
	}
	stageSummaries(w.parts, cfg.Stages, w.stageIndex, w.spans, cfg.Thresholds, cfg.SLO, &s)
	if cfg.Finish != nil {
		cfg.Finish(&s)
	}
	return s, ticks
}

// generator adds to s what the generator measured of itself: its CPU,
// its engine and its connections.
func (w *measuring) generator(s *tare.Summary, u load.Usage) {
	s.Generator.CPUPct = tare.Float(u.CPUPct())
	s.Generator.Engine = u.Engine
	if u.Engine == load.EngineLoop {
		s.Generator.Engines, s.Generator.Connections = u.Engines, u.Workers
	}
	if w.conns != nil {
		p, _ := w.cfg.Target.(tare.ProtocolCounted)
		http2 := p != nil && p.Protocols() != nil
		st := w.conns.Stats()
		s.Generator.ConnectionUse = connectionUse(st.Sub(w.connsBefore), w.cfg.Connections, u.Engine == load.EngineLoop || http2, w.rec)
		s.Generator.Connections = int(st.Peak)
	}
}

// connectionUse is what the run did with its connections: st, counted by
// the target (and the event loops) over the run, with the limit (0:
// none), and the connections in use per tick that rec counted.
func connectionUse(st tare.ConnStats, limit int, countsWaits bool, rec *stats.Recorder) *tare.ConnectionUse {
	u := &tare.ConnectionUse{Opened: int(st.Opened), Reused: int(st.Reused), Closed: int(st.Closed),
		TickMS: float64(rec.Config().Tick) / float64(time.Millisecond), InUsePerTick: rec.ConnsPerTick()}
	if limit > 0 {
		u.Limit = tare.Int(limit)
	}
	// The event loops and HTTP/2's own connections count the requests that
	// wait for a connection; net/http's pool does not say.
	if countsWaits {
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
	if rate <= 0 {
		return 0
	}
	return arrivalSpan(l.last, l.n, time.Duration(float64(time.Second)/rate))
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
