package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/store"
)

// windowFlags are everything one load window takes: what tare run takes,
// for the commands that run windows of their own (tare sweep, and tare
// protocol, whose plan sets them).
type windowFlags struct {
	target targetFlags
	load   loadFlags
	host   hostFlags
	judge  judgeFlags
	mix    mixFlags
}

func (f *windowFlags) register(fs *pflag.FlagSet, rate arrival.Rate, jobs int, duration time.Duration) {
	f.target.register(fs)
	f.load.register(fs, rate, jobs, duration)
	f.host.register(fs)
	f.judge.register(fs)
	f.mix.register(fs)
}

// prepared is a window ready to measure again and again: the target, the
// judging and the sampling, validated once.
type prepared struct {
	built
	judging  judging
	sampling host.Config
	sutBy    string // how the system under test was found; "" when it was not
}

// prepare validates the flags and builds what every window of a command
// shares. command names the command in messages.
func (f *windowFlags) prepare(ctx context.Context, command string) (*prepared, error) {
	if _, err := f.load.schedule(); err != nil {
		return nil, err
	}
	if err := f.mix.check(&f.load); err != nil {
		return nil, err
	}
	j, err := f.judge.judging()
	if err != nil {
		return nil, err
	}
	sampling, err := f.host.config(os.Getpid())
	if err != nil {
		return nil, err
	}
	t, err := f.mix.build(ctx, &f.target, command, &f.load)
	if err != nil {
		return nil, err
	}
	sutBy, err := f.host.findSUT(&sampling, f.mix.firstURL(&f.target))
	if err != nil {
		t.release()
		return nil, err
	}
	return &prepared{built: t, judging: j, sampling: sampling, sutBy: sutBy}, nil
}

// config is one window at rate r (the flag's rate when r is 0): the
// run, its schedule and everything session.Measure needs.
func (f *windowFlags) config(p *prepared, st tare.Store, run tare.Run, r arrival.Rate, progressTo io.Writer) (session.Config, error) {
	if r > 0 {
		f.load.rate = r
	}
	sched, err := f.load.schedule()
	if err != nil {
		return session.Config{}, err
	}
	run.Arrival, run.Version = sched.String(), version
	if run.Target == "" {
		run.Target = p.name
	}
	if p.queue != nil && run.ID == "" {
		// A queue run has an id even unstored: its jobs carry it.
		run.ID = store.NewRunID()
	}
	cfg := session.DefaultConfig()
	cfg.Store, cfg.Run = st, run
	cfg.Target, cfg.Depth = p.target, p.depth
	cfg.Schedule, cfg.Rate, cfg.Engine = sched, float64(f.load.rate), f.load.engine()
	cfg.Host, cfg.SUTFoundBy = p.sampling, p.sutBy
	cfg.Thresholds, cfg.SLO = p.judging.thresholds, p.judging.slo
	if err := f.mix.apply(&cfg, &f.load); err != nil {
		return session.Config{}, err
	}
	newProgress(progressTo, f.judge.quiet, f.mix.length(&f.load), f.load.jobs).hook(&cfg, p.target)
	return cfg, nil
}

// awaitWorkers waits, before the load, for a worker registered on the
// queue of p when it has one (see targetFlags.awaitWorkers); progressTo
// hears that it waits, unless --quiet.
func (f *windowFlags) awaitWorkers(ctx context.Context, p *prepared, progressTo io.Writer) error {
	if f.judge.quiet {
		progressTo = nil
	}
	ws, err := f.target.awaitWorkers(ctx, p.queue, progressTo)
	if err != nil || p.sutBy != "" {
		return err
	}
	// The workers registered from this host are the system under test.
	host, _ := os.Hostname()
	for _, w := range ws {
		if w.Host == host && w.PID > 0 && w.PID != os.Getpid() {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", w.PID)); err == nil {
				p.sampling.SUT = append(p.sampling.SUT, w.PID)
			}
		}
	}
	if len(p.sampling.SUT) > 0 {
		p.sutBy = fmt.Sprintf("workers registered on queue %q from this host", f.target.queueName)
	}
	return nil
}

// settings returns the flags that were set, by name, and extra, for a
// run's configuration, with secrets replaced: stored runs and printed
// summaries keep their full configuration, never their credentials.
func settings(fs *pflag.FlagSet, extra map[string]string) map[string]string {
	cfg := make(map[string]string)
	fs.Visit(func(fl *pflag.Flag) {
		v := fl.Value.String()
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			items := sv.GetSlice()
			for i, item := range items {
				items[i] = redactHeaderLine(item)
			}
			v = strings.Join(items, "\n")
		}
		cfg[fl.Name] = v
	})
	maps.Copy(cfg, extra)
	return tare.RedactConfig(cfg)
}
