package session

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
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

	addHost := func(s tare.HostSample) {
		rec.AddHost(s)
		watch.AddHost(s)
	}
	sampleUntil(stop, samples, addHost, cfg.ProgressEvery, func(now time.Time) {
		if cfg.OnProgress != nil {
			cfg.OnProgress(rec.Snapshot(now), load.Progress{})
		}
	})
	end := time.Now()
	stopSampling()
	lastSamples(samples, sampler, end, addHost)
	if cfg.OnDone != nil {
		cfg.OnDone()
	}

	span, warnings, err := watchedResults(ctx, cfg, toolStart, rec)
	if err != nil {
		return tare.Summary{}, nil, nil, err
	}
	run := cfg.Run
	run.StartedAt, run.EndedAt, run.Status = start, end, tare.StatusComplete
	if ctx.Err() != nil {
		run.Status = tare.StatusInterrupted
	}
	s, ticks = finish(rec, closing{
		run: run, span: span, sampler: sampler, sut: cfg.Host.SUT, foundBy: cfg.SUTFoundBy,
		thresholds: cfg.Thresholds, slo: cfg.SLO, warnings: warnings,
	})
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

// sampleUntil hands add the host samples until stop is closed or the
// samples end (ctx is done), calling progress every progressEvery (never
// when 0).
func sampleUntil(stop <-chan struct{}, samples <-chan tare.HostSample, add func(tare.HostSample), progressEvery time.Duration, progress func(time.Time)) {
	var refresh <-chan time.Time
	if progressEvery > 0 {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		refresh = t.C
	}
	for {
		select {
		case s, ok := <-samples:
			if !ok {
				return // ctx is done
			}
			add(s)
		case now := <-refresh:
			progress(now)
		case <-stop:
			return
		}
	}
}

// watchedResults adds the tool's results of cfg.Results, if any, to rec
// (readResults); the window interrupted, a file it cannot read is a
// warning: the tool may have been stopped mid-write.
func watchedResults(ctx context.Context, cfg Config, toolStart time.Time, rec *stats.Recorder) (time.Duration, []string, error) {
	if cfg.Results == nil {
		return 0, nil, nil
	}
	span, warnings, err := readResults(*cfg.Results, toolStart, rec)
	if err != nil {
		if ctx.Err() == nil {
			return 0, nil, err
		}
		warnings = append(warnings, "the window was interrupted, so its results may be cut short: "+err.Error())
	}
	return span, warnings, nil
}
