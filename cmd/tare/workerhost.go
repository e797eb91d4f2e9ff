package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/stats"
)

// Workers publish their host's interference beside the queue: a set of
// the hosts, and per host a capped list of its samples (JSON
// tare.HostSample, oldest first), so a generator on another machine can
// judge every worker host over the seconds of its run.
//
//	tare:<queue>:hosts          SET  host names
//	tare:<queue>:host:<name>    LIST samples, the last workerHostKeep
const (
	workerHostKeep = 3600          // samples kept per host: an hour at 1 s
	workerHostTTL  = 2 * time.Hour // a host that stops publishing goes away
)

func workerHostsKey(q string) string      { return queue.KeyPrefix(q) + "hosts" }
func workerHostKey(q, name string) string { return queue.KeyPrefix(q) + "host:" + name }

// pushHostSample appends one sample of host name to the queue's lists.
func pushHostSample(ctx context.Context, rdb *redis.Client, q, name string, s tare.HostSample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	k := workerHostKey(q, name)
	pipe := rdb.TxPipeline()
	pipe.SAdd(ctx, workerHostsKey(q), name)
	pipe.Expire(ctx, workerHostsKey(q), workerHostTTL)
	pipe.RPush(ctx, k, b)
	pipe.LTrim(ctx, k, -workerHostKeep, -1)
	pipe.Expire(ctx, k, workerHostTTL)
	_, err = pipe.Exec(ctx)
	return err
}

// publishWorkerHost samples this host (and the worker's own run delay)
// every tick and publishes each sample until ctx ends; it returns a func
// that stops it and waits. A host that cannot be sampled, or a Redis that
// fails, costs a warning, never the worker.
func publishWorkerHost(ctx context.Context, redisURL, q string, tick time.Duration, warn io.Writer) (stop func()) {
	sampler, err := host.NewSampler(host.Config{Tick: tick, SUT: []int{os.Getpid()}})
	if err != nil {
		fmt.Fprintf(warn, "tare worker: this host's interference is not published: %v\n", err)
		return func() {}
	}
	// The worker is the system under test on its host: its descendants (a
	// model it runs) count with it.
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return func() {}
	}
	rdb := redis.NewClient(opt)
	name := orDefault(sampler.Env().Hostname, "unknown")
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
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				if err := pushHostSample(pctx, rdb, q, name, s); err != nil && !warned && ctx.Err() == nil {
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
		rdb.Close()
	}
}

// judgeWorkerHosts judges every worker host that published samples for
// queue q over [start, end] of its own clock, and returns them by name.
func judgeWorkerHosts(ctx context.Context, rdb *redis.Client, q string, start, end time.Time, th judge.Thresholds) ([]tare.WorkerHost, []tare.Signal, error) {
	names, err := rdb.SMembers(ctx, workerHostsKey(q)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read the worker hosts of queue %q: %w", q, err)
	}
	sort.Strings(names)
	var hosts []tare.WorkerHost
	var fired []tare.Signal
	for _, name := range names {
		raw, err := rdb.LRange(ctx, workerHostKey(q, name), 0, -1).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("read the samples of worker host %q: %w", name, err)
		}
		rec, err := stats.NewRecorder(stats.Config{Start: start, Threshold: th.Steal, Grace: end.Sub(start) + time.Minute})
		if err != nil {
			return nil, nil, err
		}
		n := 0
		for _, r := range raw {
			var s tare.HostSample
			if json.Unmarshal([]byte(r), &s) != nil || s.End.Before(start) || s.Start.After(end) {
				continue
			}
			rec.AddHost(s)
			n++
		}
		if n == 0 {
			continue // no sample in the run: a host serving another run, or gone
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
			wh.Level = judge.Raise(wh.Level, judge.LevelOf(sig.Name))
			sig.Detail = fmt.Sprintf("worker host %s: %s", name, sig.Detail)
			fired = append(fired, sig)
		}
		hosts = append(hosts, wh)
	}
	return hosts, fired, nil
}

// workerHostsFinish returns the summary hook of a queue run on Redis: it
// adds the worker hosts, judged over the run, to the summary and their
// fired signals, named by host, to the verdict. A failure is a warning.
func workerHostsFinish(redisURL, q string, th judge.Thresholds) func(*tare.Summary) {
	return func(s *tare.Summary) {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hosts, fired, err := judgeWorkerHosts(ctx, rdb, q, s.Run.StartedAt, s.Run.EndedAt, th)
		if err != nil {
			s.Verdict.Warnings = append(s.Verdict.Warnings, "the worker hosts could not be judged: "+err.Error())
			return
		}
		s.WorkerHosts = hosts
		for _, sig := range fired {
			s.Verdict.Level = judge.Raise(s.Verdict.Level, judge.LevelOf(sig.Name))
			s.Verdict.Signals = append(s.Verdict.Signals, sig)
		}
	}
}
