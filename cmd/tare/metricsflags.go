package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/metrics"
	"github.com/tare-dev/tare/session"
)

// metricsFlags ask for a Prometheus endpoint showing the run while it goes
// (docs/metrics.md).
type metricsFlags struct {
	listen      string
	allowRemote bool
	linger      time.Duration
}

// defaultMetricsLinger is how long a run that ended waits for Prometheus'
// last scrape: the default scrape interval of Prometheus' example config.
const defaultMetricsLinger = 15 * time.Second

func (f *metricsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "metrics-listen", "", "serve the run's figures to Prometheus on http://ADDR/metrics while it goes, like "+metrics.DefaultListen+" (docs/metrics.md); loopback only unless --metrics-allow-remote")
	fs.BoolVar(&f.allowRemote, "metrics-allow-remote", false, "let --metrics-listen take an address that is not loopback: the run's figures are then readable from other machines")
	fs.DurationVar(&f.linger, "metrics-linger", defaultMetricsLinger, "once the run ended, how long to wait for Prometheus to scrape the last figures and the verdict (0: do not wait)")
}

// check validates the flags before anything runs.
func (f *metricsFlags) check() error {
	if f == nil || f.listen == "" {
		return nil
	}
	if f.linger < 0 {
		return tare.Errorf(tare.EINVALID, "--metrics-linger must be 0 or more, like 15s; got %s", f.linger)
	}
	return metrics.CheckListen(f.listen, f.allowRemote)
}

// start serves run's series when --metrics-listen asks, until ctx ends or
// the returned Metrics is closed; it returns nil (whose methods do
// nothing) when it does not ask.
func (f *metricsFlags) start(ctx context.Context, run tare.Run, stderr io.Writer) (*metrics.Metrics, error) {
	if f == nil || f.listen == "" {
		return nil, nil
	}
	m := metrics.New(run)
	addr, err := m.Serve(ctx, f.listen, f.allowRemote)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "tare: run %s's figures on http://%s%s\n", cmp.Or(run.ID, "(unstored)"), addr, metrics.Path)
	return m, nil
}

// end shows the verdict, waits up to --metrics-linger for one more scrape
// so that it reaches Prometheus, and stops serving.
func (f *metricsFlags) end(ctx context.Context, m *metrics.Metrics, v tare.Verdict, stderr io.Writer) {
	if m == nil {
		return
	}
	defer m.Close()
	m.SetVerdict(v)
	if f.linger <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, f.linger)
	defer cancel()
	if m.WaitScrape(wctx) != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tare: no scrape of /metrics within --metrics-linger %s: Prometheus has not seen the verdict\n", f.linger)
	}
}

// attach makes cfg's window serve its series when --metrics-listen asks,
// from the moment the run has its id, and returns what shows the verdict
// and stops serving once the window is judged (safe to call when nothing
// was served); a nil verdict (the window failed) stops serving at once.
func (f *metricsFlags) attach(ctx context.Context, cfg *session.Config, stderr io.Writer) (end func(*tare.Verdict)) {
	if f == nil || f.listen == "" {
		return func(*tare.Verdict) {}
	}
	var m *metrics.Metrics
	cfg.Watch = func(run tare.Run) (session.Watcher, error) {
		var err error
		m, err = f.start(ctx, run, stderr)
		return m, err
	}
	return func(v *tare.Verdict) {
		switch {
		case m == nil:
		case v == nil:
			m.Close()
		default:
			f.end(ctx, m, *v, stderr)
		}
	}
}
