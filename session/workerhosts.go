package session

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/stats"
)

// PublishWorkerHost samples this host (and the worker's own run delay)
// every tick and publishes each sample beside queue q (queue.Hosts) until
// ctx ends; it returns a func that stops it and waits. A host that cannot
// be sampled, or a Redis that fails, costs a warning, never the worker.
// Each sample goes to also too, when not nil (the worker's /metrics).
func PublishWorkerHost(ctx context.Context, redisURL, q string, tick time.Duration, warn io.Writer, also func(tare.HostSample)) (stop func()) {
	// The worker is the system under test on its host: its descendants (a
	// model it runs) count with it.
	sampler, err := host.NewSampler(host.Config{Tick: tick, SUT: []int{os.Getpid()}})
	if err != nil {
		fmt.Fprintf(warn, "tare worker: this host's interference is not published: %v\n", err)
		return func() {}
	}
	name := cmp.Or(sampler.Env().Hostname, "unknown")
	pub, err := queue.NewHosts(redisURL, q)
	if err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	samples := make(chan tare.HostSample, 4)
	done := make(chan struct{})
	go sampler.Run(ctx, samples)
	go func() {
		defer close(done)
		warned := false
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-samples:
				if also != nil {
					also(s)
				}
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				if err := pub.Publish(pctx, name, s); err != nil && !warned && ctx.Err() == nil {
					fmt.Fprintf(warn, "tare worker: publishing this host's interference failed (will keep trying): %v\n", err)
					warned = true
				}
				pcancel()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		pub.Close()
	}
}

// judgeWorkerHosts judges every worker host over [start, end] of its own
// clock, from its samples (queue.Hosts.Samples), and returns them by name
// and the signals they fired.
func judgeWorkerHosts(samples map[string][]tare.HostSample, start, end time.Time, th judge.Thresholds) ([]tare.WorkerHost, []tare.Signal, error) {
	names := make([]string, 0, len(samples))
	for name := range samples {
		names = append(names, name)
	}
	sort.Strings(names)
	var hosts []tare.WorkerHost
	var fired []tare.Signal
	for _, name := range names {
		n := len(samples[name])
		if n == 0 {
			continue // no sample in the run: a host serving another run, or gone
		}
		rec, err := stats.NewRecorder(stats.Config{Start: start, Threshold: th.Steal, Grace: end.Sub(start) + time.Minute})
		if err != nil {
			return nil, nil, err
		}
		for _, hs := range samples[name] {
			rec.AddHost(hs)
		}
		s := rec.Summary(end, end.Sub(start))
		ticks := rec.Ticks()
		v := judge.Judge(&s, ticks, th, nil)
		wh := tare.WorkerHost{Hostname: name, Ticks: n, StealMeanPct: s.Host.Steal.Mean, ThrottledPct: s.Host.ThrottledPct,
			RunDelayPct: s.Host.RunDelayPct, Level: tare.Clean}
		for _, sig := range judge.Fired(v) {
			switch sig.Name {
			case judge.SignalSteal, judge.SignalThrottling, judge.SignalNeighbours, judge.SignalRunDelay:
			default:
				continue // the latency, generator and saturation signals are the generator's
			}
			wh.Fired = append(wh.Fired, sig.Name)
			wh.Level = judge.Raise(wh.Level, judge.LevelOf(sig))
			sig.Detail = fmt.Sprintf("worker host %s: %s", name, sig.Detail)
			fired = append(fired, sig)
		}
		hosts = append(hosts, wh)
	}
	return hosts, fired, nil
}

// WorkerHostsFinish returns the summary hook of a queue run on Redis: it
// adds the worker hosts, judged over the run, to the summary and their
// fired signals, named by host, to the verdict. A failure is a warning.
func WorkerHostsFinish(redisURL, q string, th judge.Thresholds) func(*tare.Summary) {
	return func(s *tare.Summary) {
		wh, err := queue.NewHosts(redisURL, q)
		if err != nil {
			return
		}
		defer wh.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var hosts []tare.WorkerHost
		var fired []tare.Signal
		samples, err := wh.Samples(ctx, s.Run.StartedAt, s.Run.EndedAt)
		if err == nil {
			hosts, fired, err = judgeWorkerHosts(samples, s.Run.StartedAt, s.Run.EndedAt, th)
		}
		if err != nil {
			s.Verdict.Warnings = append(s.Verdict.Warnings, "the worker hosts could not be judged: "+err.Error())
			return
		}
		s.WorkerHosts = hosts
		for _, sig := range fired {
			s.Verdict.Level = judge.Raise(s.Verdict.Level, judge.LevelOf(sig))
			s.Verdict.Signals = append(s.Verdict.Signals, sig)
		}
	}
}
