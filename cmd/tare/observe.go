package main

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// observe samples the host, with no load of tare's own (the system under
// test is cfg.SUT, found as sutBy says), until stop is
// closed or ctx is done, and returns the host-only summary and verdict of
// that window. started, when not nil, is called once the sampler has taken
// its first reading: what happens after it is inside the window, and
// what it starts can be counted as tare (Sampler.AddTareTree).
// The window's ticks are returned too, for the store (tare watch).
//
// results, when not nil, is called once the window has ended, with the
// recorder that holds its host samples: it adds another tool's results
// (tare watch --results) and returns the span of their arrivals and its
// warnings. The ticks then stay open to the end, so that results added
// after every host sample still land in their own ticks.
// resultsGrace keeps every tick open until the end of a watched window
// whose results are read after it (stats.Config.Grace).
const resultsGrace = 1000 * time.Hour

func observe(ctx context.Context, cfg host.Config, sutBy string, j judging, run tare.Run, stop <-chan struct{}, p *progress, started func(*host.Sampler),
	results func(*stats.Recorder) (time.Duration, []string, error)) (tare.Summary, []tare.Tick, error) {
	sampler, err := host.NewSampler(cfg)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	defer sampler.Close()
	start := time.Now()
	rc := stats.Config{Start: start, Tick: sampler.Tick(), Threshold: j.thresholds.Steal}
	if results != nil {
		rc.Grace = resultsGrace
	}
	rec, err := stats.NewRecorder(rc)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	samples := make(chan tare.HostSample, 16)
	go sampler.Run(sampleCtx, samples)
	if started != nil {
		started(sampler)
	}

	var refresh <-chan time.Time
	if p != nil {
		t := time.NewTicker(p.every)
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
		case now := <-refresh:
			p.showHost(rec.Snapshot(now))
		case <-stop:
			break loop
		}
	}
	end := time.Now()
	stopSampling()
	for s := range samples {
		rec.AddHost(s)
	}
	if last, err := sampler.Sample(end); err == nil {
		rec.AddHost(last)
	}
	if p != nil {
		p.done()
	}

	var (
		span     time.Duration
		warnings []string
	)
	if results != nil {
		if span, warnings, err = results(rec); err != nil {
			return tare.Summary{}, nil, err
		}
	}
	s := rec.Summary(end, span)
	s.Schema = tare.SummarySchema
	s.Run = run
	s.Run.StartedAt, s.Run.EndedAt, s.Run.Status = start, end, tare.StatusComplete
	if ctx.Err() != nil {
		s.Run.Status = tare.StatusInterrupted
	}
	s.Env = sampler.Env()
	s.SUT = sutSummary(s.SUT, cfg.SUT, sutBy)
	ticks := rec.Ticks()
	s.Verdict = judge.Judge(&s, ticks, j.thresholds, j.slo)
	for _, w := range sampler.Warnings() {
		s.Verdict.Warnings = append(s.Verdict.Warnings, w.Error())
	}
	s.Verdict.Warnings = append(s.Verdict.Warnings, warnings...)
	s.Thresholds = j.thresholds.Map()
	return s, ticks, nil
}
