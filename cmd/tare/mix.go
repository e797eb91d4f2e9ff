package main

import (
	"cmp"
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/prompts"
	"github.com/tare-dev/tare/session"
)

// mixFlags feed a window the way users do (issue 16): a ramp through
// stages, a warm-up, a mix of requests from a targets file. Parsing and
// checking are the packages'; this only registers the flags and puts
// their values into the session.Config.
type mixFlags struct {
	stages       arrival.Stages
	warmup       time.Duration
	targets      string
	targetsOrder bool
	prompts      string
	inputTokens  string
	outputTokens string
	fs           *pflag.FlagSet

	mixed *httptarget.Mix // the targets file's requests, once built
}

func (f *mixFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.Var(&f.stages, "stages", "ramp the arrival rate through stages, like 30s:10/s,2m:50/s,1m:50/s: each moves the rate linearly from the previous target (0 before the first; 0s:RATE jumps) to its own over its duration; figures and a verdict per stage; replaces --rate, and lasts the stages' total unless --jobs or --duration ends it first")
	fs.StringVar(&f.targets, "targets", "", `a targets file of HTTP requests to mix, instead of --url: vegeta's http format ("GET http://host/path", header lines, "@body.json"; a blank line between requests) or JSON lines ({"name", "method", "url", "header", "body" or "body_file", "weight"}); each arrival takes the next by weight (drawn from --seed), figures per request`)
	fs.BoolVar(&f.targetsOrder, "targets-order", false, "with --targets, take the requests in file order, round and round, instead of by weight")
	f.registerPrompts(fs)
	fs.DurationVar(&f.warmup, "warmup", 0, "send the arrivals of the first seconds, like 10s, but leave them and those seconds of the host out of every figure and of the verdict (counted as warm-up)")
}

// registerPrompts registers the prompt flags alone, for tare demo.
func (f *mixFlags) registerPrompts(fs *pflag.FlagSet) {
	fs.StringVar(&f.prompts, "prompts", "", `with --model or --queue, a prompt dataset: JSON lines of {"prompt"} or {"messages"} with an optional "max_tokens", or ShareGPT conversations (the first human turn is the prompt); arrival i takes prompt i, round and round`)
	fs.StringVar(&f.inputTokens, "input-tokens", "", "with --model or --queue and no --prompts, synthetic prompts of this many tokens, MEAN,SPREAD like 512,128 (words one token each; the server's usage says what it counted)")
	fs.StringVar(&f.outputTokens, "output-tokens", "", "with --model or --queue, each request's max_tokens, MEAN,SPREAD like 128,32 (for prompts without their own); with a ShareGPT --prompts, reply takes the length of the recorded reply")
}

// promptSource is what the prompt flags describe: nil when they are not
// given. toModel says the target is a model or a queue of model calls,
// prompt is --prompt, and seed draws the synthetic lengths.
func (f *mixFlags) promptSource(toModel bool, prompt string, seed uint64) (tare.Prompts, error) {
	if f.prompts == "" && f.inputTokens == "" && f.outputTokens == "" {
		return nil, nil
	}
	switch {
	case !toModel:
		return nil, tare.Errorf(tare.EINVALID, "--prompts, --input-tokens and --output-tokens feed a model: give --model URL or --queue URL")
	case prompt != "":
		return nil, tare.Errorf(tare.EINVALID, "--prompt is one prompt for every request: drop it with --prompts, --input-tokens or --output-tokens")
	case f.prompts != "" && f.inputTokens != "":
		return nil, tare.Errorf(tare.EINVALID, "--input-tokens makes synthetic prompts: drop it with --prompts, whose prompts have their own lengths")
	}
	reply := f.outputTokens == "reply"
	var out prompts.Lengths
	if f.outputTokens != "" && !reply {
		var err error
		if out, err = prompts.ParseLengths(f.outputTokens); err != nil {
			return nil, &tare.Error{Code: tare.EINVALID, Message: "--output-tokens " + tare.ErrorMessage(err), Err: err}
		}
	}
	if f.prompts != "" {
		ps, err := prompts.Read(f.prompts, reply)
		if err != nil {
			return nil, flagged(err, "")
		}
		return prompts.Dataset(ps, out, seed), nil
	}
	if reply {
		return nil, tare.Errorf(tare.EINVALID, "--output-tokens reply takes the budget from a ShareGPT --prompts file: give one, or a length like 128,32")
	}
	var in prompts.Lengths // zero, with --output-tokens alone: the target's own prompt
	if f.inputTokens != "" {
		var err error
		if in, err = prompts.ParseLengths(f.inputTokens); err != nil {
			return nil, &tare.Error{Code: tare.EINVALID, Message: "--input-tokens " + tare.ErrorMessage(err), Err: err}
		}
	}
	return prompts.Synthetic(in, out, seed), nil
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

// build is the target: the targets file's mix, or what the target flags
// name.
func (f *mixFlags) build(ctx context.Context, t *targetFlags, command string, load *loadFlags) (built, error) {
	if f.targets == "" {
		if f.targetsOrder {
			return built{}, tare.Errorf(tare.EINVALID, "--targets-order needs --targets FILE")
		}
		ps, err := f.promptSource(t.model != "" || t.queue != "", t.prompt, load.seed)
		if err != nil {
			return built{}, err
		}
		t.prompts = ps
		return t.build(ctx, command, load.maxInFlight)
	}
	switch {
	case t.url != "" || t.model != "" || t.queue != "":
		return built{}, tare.Errorf(tare.EINVALID, "--targets names the requests: drop --url, --model and --queue")
	case t.body != "" || t.method != "":
		return built{}, tare.Errorf(tare.EINVALID, "--targets sets each request's method and body: drop --body and --method (-X), and write them in the file")
	case t.timeout <= 0:
		return built{}, tare.Errorf(tare.EINVALID, "--timeout must be positive, like 30s; got %s", t.timeout)
	case t.redirects < 0:
		return built{}, tare.Errorf(tare.EINVALID, "--redirects must be 0 (follow none) or more, like %d; got %d", httptarget.DefaultRedirects, t.redirects)
	}
	header, err := t.header()
	if err != nil {
		return built{}, err
	}
	reqs, err := httptarget.ReadTargets(f.targets)
	if err != nil {
		return built{}, flagged(err, "targets")
	}
	base := httptarget.Config{Header: header, Timeout: t.timeout, Insecure: t.insecure, MaxConns: load.maxInFlight, NetHTTP: t.netHTTP,
		Redirects: t.redirects, CrossHost: t.crossHost}
	if t.redirects == 0 {
		base.Redirects = httptarget.NoRedirects
	}
	m, err := httptarget.NewMix(f.targets, reqs, base, f.targetsOrder, load.seed)
	if err != nil {
		return built{}, flagged(err, "targets")
	}
	f.mixed = m
	return built{target: m, name: m.String(), release: m.Close}, nil
}

// firstURL is the URL the system under test is looked for behind.
func (f *mixFlags) firstURL(t *targetFlags) string {
	if f.mixed != nil {
		return f.mixed.URL(0)
	}
	return cmp.Or(t.url, t.model)
}

// apply puts the stages and the warm-up into cfg, whose schedule the load
// flags built.
func (f *mixFlags) apply(cfg *session.Config, load *loadFlags) error {
	if err := f.check(load); err != nil {
		return err
	}
	cfg.Warmup = f.warmup
	if f.mixed != nil {
		cfg.Mix = f.mixed
	}
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
