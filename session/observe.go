package session

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/stats"
)

// Observe samples the host, with no load of tare's own (the system under
// test is cfg.Host.SUT, found as cfg.SUTFoundBy says), until stop is closed
// or ctx is done, and returns the host-only summary and verdict of that
// window, and its ticks. Of cfg it uses the run, the host, the judging,
// the hooks and the store; cfg.OnStart is how a caller starts what the
// window watches (tare watch starts its command there). With cfg.Results,
// the tool's results are read once stop is closed and judged with the
// host samples (readResults).
//
// With cfg.Store, the window is stored once it is judged: the run, the
// tool's results as its raw records (read from the file again), its ticks
// and its summary; storeErr says what the store failed to keep, as
// Measure's does, and is also among the summary's warnings.
func Observe(ctx context.Context, cfg Config, stop <-chan struct{}) (s tare.Summary, ticks []tare.Tick, storeErr, err error) {
	sampler, err := host.NewSampler(cfg.Host)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	defer sampler.Close()
	watch, err := cfg.watch(cfg.Run)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	start := time.Now()
	rc := stats.Config{Start: start, Tick: sampler.Tick(), Threshold: cfg.Thresholds.Steal}
	if cfg.Results != nil {
		// The results come after every host sample: keep every tick open
		// until the end, so that each still lands in its own tick.
		rc.Grace = resultsGrace
	}
	rec, err := stats.NewRecorder(rc)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	samples := make(chan tare.HostSample, 16)
	go sampler.Run(sampleCtx, samples)
	toolStart := time.Now()
	if cfg.OnStart != nil {
		cfg.OnStart(sampler)
	}

	var refresh <-chan time.Time
	if cfg.OnProgress != nil && cfg.ProgressEvery > 0 {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		refresh = t.C
	}
loop:
	for {
		select {
		case s, ok := <-samples:
			if !ok {
				break loop // ctx is done
			}
			rec.AddHost(s)
			watch.AddHost(s)
		case now := <-refresh:
			cfg.OnProgress(rec.Snapshot(now), load.Progress{})
		case <-stop:
			break loop
		}
	}
	end := time.Now()
	stopSampling()
	lastSamples(samples, sampler, end, func(s tare.HostSample) {
		rec.AddHost(s)
		watch.AddHost(s)
	})
	if cfg.OnDone != nil {
		cfg.OnDone()
	}

	var (
		span     time.Duration
		warnings []string
	)
	if cfg.Results != nil {
		if span, warnings, err = readResults(*cfg.Results, toolStart, rec); err != nil {
			if ctx.Err() == nil {
				return tare.Summary{}, nil, nil, err
			}
			// Interrupted: the tool may have been stopped mid-write.
			warnings = append(warnings, "the window was interrupted, so its results may be cut short: "+err.Error())
		}
	}
	s = rec.Summary(end, span)
	s.Schema = tare.SummarySchema
	s.Run = cfg.Run
	s.Run.StartedAt, s.Run.EndedAt, s.Run.Status = start, end, tare.StatusComplete
	if ctx.Err() != nil {
		s.Run.Status = tare.StatusInterrupted
	}
	s.Env = sampler.Env()
	explainBlame(&s, sampler.BlameWhy())
	s.SUT = sutSummary(s.SUT, cfg.Host.SUT, cfg.SUTFoundBy, sampler)
	ticks = rec.Ticks()
	s.Verdict = judge.Judge(&s, ticks, cfg.Thresholds, cfg.SLO)
	for _, w := range sampler.Warnings() {
		s.Verdict.Warnings = append(s.Verdict.Warnings, w.Error())
	}
	s.Verdict.Warnings = append(s.Verdict.Warnings, warnings...)
	s.Thresholds = cfg.Thresholds.Map()
	return s, ticks, save(ctx, cfg.Store, &s, ticks, cfg.Results, toolStart), nil
}

// save stores a window measured before it is stored: the run, the tool's
// results (spec's file, read again: the recorder kept none) as its raw
// records, its ticks, then the summary. With st nil it stores nothing.
func save(ctx context.Context, st tare.Store, s *tare.Summary, ticks []tare.Tick, results *peer.Spec, toolStart time.Time) error {
	out := newSink(ctx, st, s.Run, s.Env)
	if results != nil && out.w != nil {
		// Read once already: it fails again only where the first read did
		// (an interrupted window, whose summary says so) or if the file
		// changed since; the records read before it are kept.
		if _, _, err := eachResult(*results, toolStart, out.add); err != nil && ctx.Err() == nil {
			s.Verdict.Warnings = append(s.Verdict.Warnings, "the stored run keeps only the results read before this: "+tare.ErrorMessage(err))
		}
	}
	out.addTicks(ticks)
	return out.finish(s)
}
