package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/settings"
)

// windowFlags are everything one load window takes: what tare run takes,
// for the commands that run windows of their own (tare sweep, and tare
// protocol, whose plan sets the spec).
type windowFlags struct {
	spec *session.Spec
	out  outputFlags
	fs   *pflag.FlagSet // to tell a default from a value given
}

func (f *windowFlags) register(fs *pflag.FlagSet, rate arrival.Rate, jobs int, duration time.Duration) {
	f.spec, f.fs = session.NewSpec(rate, jobs, duration), fs
	bind(fs, f.spec.Fields())
	f.out.register(fs)
}

// prepare checks the flags and builds what every window of a command
// shares. command names the command in messages.
func (f *windowFlags) prepare(ctx context.Context, command string) (*session.Prepared, error) {
	if f.fs != nil {
		f.spec.Load.DurationDefault = !f.fs.Changed("duration")
		f.spec.Load.RateDefault = !f.fs.Changed("rate")
	}
	return session.Prepare(ctx, f.spec, command)
}

// driver runs windows of p stored in st, with the live line on
// progressTo and the wait for a queue's workers said there, unless
// --quiet.
func (f *windowFlags) driver(p *session.Prepared, st tare.Store, progressTo io.Writer) *session.Driver {
	d := &session.Driver{Prepared: p, Store: st, Version: version}
	if !f.out.quiet {
		d.Waiting = progressTo
	}
	if progressTo == nil {
		progressTo = io.Discard
	}
	live := newProgress(progressTo, f.out.quiet, p.Spec.Load.Planned(), p.Spec.Load.Jobs)
	d.Hook = func(cfg *session.Config) { live.hook(cfg, p.Target) }
	return d
}

// recorded returns the flags that were set, by name, and extra, for a run's
// configuration, secrets redacted (settings.Record).
func recorded(fs *pflag.FlagSet, extra map[string]string) map[string]string {
	return settings.Record(func(yield func(string, settings.Value) bool) {
		fs.Visit(func(fl *pflag.Flag) { yield(fl.Name, fl.Value) })
	}, extra)
}
