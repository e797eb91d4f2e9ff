package main

import (
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/httptarget"
)

// httpFlags name the HTTP target, as tare run takes it.
type httpFlags struct {
	url      string
	method   string
	headers  []string
	body     string
	timeout  time.Duration
	insecure bool
}

func (f *httpFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "the HTTP target, like http://127.0.0.1:8080/path")
	fs.StringVarP(&f.method, "method", "X", "", "HTTP method (default GET, or POST with --body)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, `request header "Name: value" (repeatable)`)
	fs.StringVar(&f.body, "body", "", "request body: inline text, or @path to read a file")
	fs.DurationVar(&f.timeout, "timeout", httptarget.DefaultTimeout, "per-request timeout")
	fs.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification")
}

// target validates the flags and returns the HTTP target, with at most
// maxConns connections.
func (f *httpFlags) target(command string, maxConns int) (*httptarget.Target, error) {
	if f.url == "" {
		return nil, tare.Errorf(tare.EINVALID, "%s needs a target: give --url http://HOST:PORT/PATH", command)
	}
	if f.timeout <= 0 {
		return nil, tare.Errorf(tare.EINVALID, "--timeout must be positive, like 30s; got %s", f.timeout)
	}
	cfg := httptarget.Config{Method: f.method, URL: f.url, Timeout: f.timeout, Insecure: f.insecure, MaxConns: maxConns}
	for _, h := range f.headers {
		name, value, err := httptarget.ParseHeader(h)
		if err != nil {
			return nil, flagged(err, "header")
		}
		if cfg.Header == nil {
			cfg.Header = make(map[string][]string)
		}
		cfg.Header.Add(name, value)
	}
	if f.body != "" {
		body, err := httptarget.ReadBody(f.body)
		if err != nil {
			return nil, flagged(err, "body")
		}
		cfg.Body = body
	}
	t, err := httptarget.New(cfg)
	if err != nil {
		return nil, flagged(err, "url")
	}
	return t, nil
}

// windowFlags are everything one load window takes: what tare run takes,
// for the commands that run windows of their own (tare sweep, and tare
// protocol, whose plan sets them).
type windowFlags struct {
	http  httpFlags
	load  loadFlags
	host  hostFlags
	judge judgeFlags
}

func (f *windowFlags) register(fs *pflag.FlagSet, rate arrival.Rate, jobs int, duration time.Duration) {
	f.http.register(fs)
	f.load.register(fs, rate, jobs, duration)
	f.host.register(fs)
	f.judge.register(fs)
}

// prepared is a window ready to measure again and again: the target, the
// judging and the sampling, validated once.
type prepared struct {
	target   tare.Target
	judging  judging
	sampling host.Config
	close    func()
}

// prepare validates the flags and builds what every window of a command
// shares. command names the command in messages.
func (f *windowFlags) prepare(command string) (*prepared, error) {
	if _, err := f.load.schedule(); err != nil {
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
	t, err := f.http.target(command, f.load.maxInFlight)
	if err != nil {
		return nil, err
	}
	return &prepared{target: t, judging: j, sampling: sampling, close: t.Close}, nil
}

// measurement is one window at rate r (the flag's rate when r is 0):
// the run, its schedule and everything measure needs.
func (f *windowFlags) measurement(p *prepared, st tare.Store, run tare.Run, r arrival.Rate, progressTo io.Writer) (measurement, error) {
	if r > 0 {
		f.load.rate = r
	}
	sched, err := f.load.schedule()
	if err != nil {
		return measurement{}, err
	}
	run.Arrival, run.Version = sched.String(), version
	if run.Target == "" {
		run.Target = targetName(p.target)
	}
	return measurement{
		store:    st,
		run:      run,
		target:   p.target,
		schedule: sched,
		rate:     float64(f.load.rate),
		engine:   f.load.engine(),
		sampler:  p.sampling,
		judging:  p.judging,
		progress: newProgress(progressTo, f.judge.quiet, f.load.duration, f.load.jobs),
	}, nil
}

// length is how long one window's load lasts: its arrival window, from
// --duration or --jobs at --rate, whichever ends it first.
func (f *windowFlags) length() time.Duration {
	d := f.load.duration
	if f.load.jobs > 0 && f.load.rate > 0 {
		byJobs := time.Duration(float64(f.load.jobs) / float64(f.load.rate) * float64(time.Second))
		if d == 0 || byJobs < d {
			d = byJobs
		}
	}
	return d
}

// settings returns the flags that were set, by name, for a run's
// configuration, credential headers redacted; the store redacts every
// secret-looking key and URL as it writes the run.
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
	return cfg
}

// targetName is how a run records its target.
func targetName(t tare.Target) string {
	if s, ok := t.(interface{ String() string }); ok {
		return s.String()
	}
	return "target"
}
