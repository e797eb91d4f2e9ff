package main

import (
	"context"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/session"
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
	}
	return session.Prepare(ctx, f.spec, command)
}

// config is one window of p at rate r (the spec's rate when r is 0), with
// the live progress line on progressTo unless --quiet.
func (f *windowFlags) config(p *session.Prepared, st tare.Store, run tare.Run, r arrival.Rate, progressTo io.Writer) (session.Config, error) {
	cfg, err := p.Window(st, run, r, version)
	if err != nil {
		return cfg, err
	}
	newProgress(progressTo, f.out.quiet, p.Spec.Load.Span(), p.Spec.Load.Jobs).hook(&cfg, p.Target)
	return cfg, nil
}

// awaitWorkers waits, before the load, for a worker registered on the
// queue of p when it has one; progressTo hears that it waits, unless
// --quiet.
func (f *windowFlags) awaitWorkers(ctx context.Context, p *session.Prepared, progressTo io.Writer) error {
	if f.out.quiet {
		progressTo = nil
	}
	return p.AwaitWorkers(ctx, progressTo)
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
				items[i] = session.RedactHeaderLine(item)
			}
			v = strings.Join(items, "\n")
		}
		cfg[fl.Name] = v
	})
	maps.Copy(cfg, extra)
	return tare.RedactConfig(cfg)
}
