package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/session"
)

// mixFlags feed a window the way users do (issue 16): a ramp through
// stages and a warm-up. Parsing and checking are the packages'; this only
// registers the flags and puts their values into the session.Config.
type mixFlags struct {
	stages arrival.Stages
	warmup time.Duration
	fs     *pflag.FlagSet
}

func (f *mixFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.Var(&f.stages, "stages", "ramp the arrival rate through stages, like 30s:10/s,2m:50/s,1m:50/s: each moves the rate linearly from the previous target (0 before the first; 0s:RATE jumps) to its own over its duration; figures and a verdict per stage; replaces --rate, and lasts the stages' total unless --jobs or --duration ends it first")
	fs.DurationVar(&f.warmup, "warmup", 0, "send the arrivals of the first seconds, like 10s, but leave them and those seconds of the host out of every figure and of the verdict (counted as warm-up)")
}

// check refuses what the flags cannot mean together.
func (f *mixFlags) check(load *loadFlags) error {
	switch {
	case f.warmup < 0:
		return tare.Errorf(tare.EINVALID, "--warmup must be 0 or more, like 10s; got %s", f.warmup)
	case len(f.stages) > 0 && load.fs.Changed("rate"):
		return tare.Errorf(tare.EINVALID, "--stages sets the rate of every moment: drop --rate %s (a flat rate is one stage, like 0s:%s,%s:%s)", load.rate, load.rate, orDuration(load.duration), load.rate)
	}
	if n := f.length(load); f.warmup > 0 && n > 0 && f.warmup >= n {
		return tare.Errorf(tare.EINVALID, "--warmup %s is as long as the run (%s): nothing would be left to measure; give a shorter --warmup or a longer run", f.warmup, n)
	}
	return nil
}

func orDuration(d time.Duration) string {
	if d <= 0 {
		return "1m"
	}
	return d.String()
}

// length is how long the arrivals last.
func (f *mixFlags) length(load *loadFlags) time.Duration {
	if len(f.stages) == 0 {
		return load.length()
	}
	d := f.stages.Duration()
	if load.fs.Changed("duration") && load.duration > 0 {
		d = min(d, load.duration)
	}
	return d
}

// apply puts the stages and the warm-up into cfg, whose schedule the load
// flags built.
func (f *mixFlags) apply(cfg *session.Config, load *loadFlags) error {
	if err := f.check(load); err != nil {
		return err
	}
	cfg.Warmup = f.warmup
	if len(f.stages) == 0 {
		return nil
	}
	p, err := arrival.NewStaged(load.arrival, f.stages, load.burstiness, load.seed)
	if err != nil {
		return flagged(err, "")
	}
	cfg.Schedule = arrival.Bound(p, load.jobs, f.bound(load))
	cfg.Stages, cfg.Rate = f.stages, f.stages.Expected()/f.stages.Duration().Seconds()
	cfg.Run.Arrival = cfg.Schedule.String()
	return nil
}

// bound is --duration when it was given: the stages end the run otherwise.
func (f *mixFlags) bound(load *loadFlags) time.Duration {
	if load.fs.Changed("duration") {
		return load.duration
	}
	return 0
}

// split is this shard's part of the schedule (see loadFlags.split); a
// staged one keeps its stages at the shard's share of every rate.
func (f *mixFlags) split(cfg *session.Config, load *loadFlags, sh arrival.Shard) error {
	if len(f.stages) == 0 {
		p, err := load.split(sh)
		cfg.Schedule = p
		return err
	}
	p, err := arrival.SplitStaged(load.arrival, f.stages, load.burstiness, load.seed, load.jobs, sh)
	if err != nil {
		return flagged(err, "")
	}
	cfg.Schedule = arrival.Bound(p, 0, f.bound(load))
	cfg.Stages = f.stages.Scaled(1 / float64(sh.Count))
	return nil
}
