package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/store"
)

// loadFlags shape the arrivals: shared by every command that sends load.
type loadFlags struct {
	rate        arrival.Rate
	arrival     string
	burstiness  float64
	seed        uint64
	jobs        int
	duration    time.Duration
	maxInFlight int
	drain       time.Duration
	label       string
	window      string
	fs          *pflag.FlagSet // to tell a default from a value given
}

func (f *loadFlags) register(fs *pflag.FlagSet, rate arrival.Rate, jobs int, duration time.Duration) {
	f.rate, f.fs = rate, fs
	fs.Var(&f.rate, "rate", "mean arrival rate, like 200/s, 12/m or 3/h")
	fs.StringVar(&f.arrival, "arrival", arrival.KindPoisson, "arrival process: poisson (exponential gaps), gamma (see --burstiness) or constant")
	fs.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape: 1 is poisson, below 1 burstier, above 1 smoother")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the arrival process: the same seed gives the same schedule")
	fs.IntVar(&f.jobs, "jobs", jobs, "number of arrivals (0: bounded by --duration only)")
	fs.DurationVar(&f.duration, "duration", duration, "length of the arrival window (0: bounded by --jobs only; the default applies only without --jobs); with both, the first reached ends it")
	fs.IntVar(&f.maxInFlight, "max-inflight", load.DefaultMaxInFlight, "requests in flight at most; arrivals beyond it are dropped and counted, never delayed")
	fs.DurationVar(&f.drain, "drain", load.DefaultDrain, "on Ctrl-C, how long requests in flight may finish")
	fs.StringVar(&f.label, "label", "", "a name for this run, stored and shown with it")
	fs.StringVar(&f.window, "window", "", "protocol window of this run: peak, offpeak or mid")
}

// schedule validates the flags and builds the bounded arrival process.
func (f *loadFlags) schedule() (arrival.Process, error) {
	if f.jobs > 0 && !f.fs.Changed("duration") {
		f.duration = 0 // --jobs alone bounds the run
	}
	switch {
	case f.jobs < 0:
		return nil, tare.Errorf(tare.EINVALID, "--jobs must be 0 or more; got %d", f.jobs)
	case f.duration < 0:
		return nil, tare.Errorf(tare.EINVALID, "--duration must be 0 or more, like 30s or 5m; got %s", f.duration)
	case f.jobs == 0 && f.duration == 0:
		return nil, tare.Errorf(tare.EINVALID, "the run needs an end: give --jobs N, --duration D, or both")
	case f.maxInFlight < 1:
		return nil, tare.Errorf(tare.EINVALID, "--max-inflight must be at least 1; got %d", f.maxInFlight)
	case f.burstiness <= 0:
		return nil, tare.Errorf(tare.EINVALID, "--burstiness must be a positive number (1 is poisson, below 1 burstier, above 1 smoother); got %g", f.burstiness)
	case f.drain < 0:
		return nil, tare.Errorf(tare.EINVALID, "--drain must be 0 or more; got %s", f.drain)
	}
	if err := checkWindow(f.window); err != nil {
		return nil, err
	}
	p, err := arrival.New(f.arrival, float64(f.rate), f.burstiness, f.seed)
	if err != nil {
		return nil, flagged(err, "")
	}
	return arrival.Bound(p, f.jobs, f.duration), nil
}

// length is how long the arrivals last: --duration, or --jobs at --rate,
// whichever ends them first.
func (f *loadFlags) length() time.Duration {
	d := f.duration
	if f.jobs > 0 && f.rate > 0 {
		byJobs := time.Duration(float64(f.jobs) / float64(f.rate) * float64(time.Second))
		if d == 0 || byJobs < d {
			d = byJobs
		}
	}
	return d
}

func (f *loadFlags) engine() load.Config {
	return load.Config{MaxInFlight: f.maxInFlight, Drain: f.drain}
}

// hostFlags say what to sample and whose processes to measure.
type hostFlags struct {
	tick   time.Duration
	pids   []int
	cgroup string
}

func (f *hostFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.tick, "tick", host.DefaultTick, "host sampling interval, 100ms or more")
	fs.IntSliceVar(&f.pids, "pid", nil, "the system under test's process, with its threads and descendants (repeatable); by default tare finds the process listening on a loopback target's port")
	fs.StringVar(&f.cgroup, "cgroup", "", "the system under test's cgroup (a path under the cgroup mount, like /system.slice/app.service): its throttling is measured, and its processes are the system under test when --pid is not given")
}

// config validates the flags and returns the sampler's configuration: self
// is tare, the --pid processes the system under test.
func (f *hostFlags) config(self int) (host.Config, error) {
	if f.tick < host.MinTick {
		return host.Config{}, tare.Errorf(tare.EINVALID, "--tick must be %s or more; got %s", host.MinTick, f.tick)
	}
	for _, pid := range f.pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); pid <= 0 || err != nil {
			return host.Config{}, tare.Errorf(tare.EINVALID, "--pid %d: no such process", pid)
		}
	}
	if f.cgroup != "" {
		if _, err := host.NewSampler(host.Config{Cgroup: f.cgroup}); err != nil {
			return host.Config{}, flagged(err, "cgroup")
		}
	}
	return host.Config{Tick: f.tick, Tare: []int{self}, SUT: f.pids, Cgroup: f.cgroup}, nil
}

// findSUT fills cfg.SUT with the system under test, unless --pid named it:
// the processes of --cgroup, or those listening on a loopback target's
// port. It returns how they were found, for the summary; "" when the
// system under test is not known.
func (f *hostFlags) findSUT(cfg *host.Config, target string) (string, error) {
	switch {
	case len(f.pids) > 0:
		return "--pid", nil
	case f.cgroup != "":
		pids, err := host.CgroupPIDs(cfg.CgroupRoot, f.cgroup)
		if err != nil {
			return "", flagged(tare.Errorf(tare.ENOTFOUND, "%w", err), "cgroup")
		}
		cfg.SUT = pids
		return "--cgroup " + f.cgroup, nil
	case target == "":
		return "", nil
	}
	pids, how, err := host.FindService(cfg.ProcRoot, target)
	if err != nil || len(pids) == 0 {
		return "", err
	}
	cfg.SUT = pids
	return how, nil
}

// judgeFlags set the verdict's thresholds, the SLO and the exit status.
type judgeFlags struct {
	th     judge.Thresholds
	slo    string
	failOn string
	json   bool
	quiet  bool
}

func (f *judgeFlags) register(fs *pflag.FlagSet) {
	f.th = judge.DefaultThresholds()
	fs.Float64Var(&f.th.Steal, "steal-threshold", f.th.Steal, "steal % above which a tick is polluted and the steal signal fires")
	fs.Float64Var(&f.th.StealTicks, "steal-ticks", f.th.StealTicks, "share of ticks (%) above the steal threshold that fires the steal signal")
	fs.Float64Var(&f.th.ThrottledTicks, "throttled-ticks", f.th.ThrottledTicks, "share of ticks (%) with cgroup throttling that fires the throttling signal")
	fs.Float64Var(&f.th.Neighbours, "neighbour-threshold", f.th.Neighbours, "CPU the system under test and tare lost waiting behind other processes, in % of one CPU, above which the neighbours signal fires")
	fs.Float64Var(&f.th.NeighbourTicks, "neighbour-ticks", f.th.NeighbourTicks, "share of ticks (%) with that loss above the steal threshold that fires the neighbours signal")
	fs.Float64Var(&f.th.RunDelay, "run-delay-threshold", f.th.RunDelay, "run delay (% of wall time) of the measured processes that fires the run-delay signal when tare cannot tell whose CPU it was")
	fs.Float64Var(&f.th.LatencyFactor, "latency-factor", f.th.LatencyFactor, "a tick's p95 this many times the median tick p95 counts as latency moving")
	fs.IntVar(&f.th.LatencyTicks, "latency-ticks", f.th.LatencyTicks, "ticks of latency moving with a flat queue that fire the signal")
	fs.DurationVar(&f.th.LatencyFloor, "latency-floor", f.th.LatencyFloor, "smallest rise over the median tick p95 that counts as latency moving")
	fs.DurationVar(&f.th.SendLagP99, "send-lag-threshold", f.th.SendLagP99, "send-lag p99 above which the generator counts as starved")
	fs.Float64Var(new(float64), "generator-delay-threshold", 5, "no longer used (deprecated in every command by newRoot)")
	fs.StringVar(&f.slo, "slo", "", "service-level objective, like p95<=2s or p99<=800ms,avg<=300ms")
	fs.StringVar(&f.failOn, "fail-on", "", "polluted or suspect: exit 3 when the verdict is that or worse (the measurement is inconclusive: rerun, do not file a regression); slo: exit 1 when the SLO failed on a run that is not polluted")
	fs.BoolVar(&f.json, "json", false, "print the tare.summary/v1 JSON instead of the text summary")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
}

func (f *judgeFlags) judging() (judging, error) {
	j := judging{thresholds: f.th, failOn: f.failOn}
	switch f.failOn {
	case "", "polluted", "suspect", "slo":
	default:
		return j, tare.Errorf(tare.EINVALID, "--fail-on must be polluted, suspect or slo; got %q", f.failOn)
	}
	for name, v := range map[string]float64{"--steal-threshold": f.th.Steal, "--steal-ticks": f.th.StealTicks, "--throttled-ticks": f.th.ThrottledTicks,
		"--run-delay-threshold": f.th.RunDelay,
		"--neighbour-threshold": f.th.Neighbours, "--neighbour-ticks": f.th.NeighbourTicks} {
		if v < 0 || v > 100 {
			return j, tare.Errorf(tare.EINVALID, "%s must be a percentage from 0 to 100; got %g", name, v)
		}
	}
	if f.th.LatencyFactor <= 1 {
		return j, tare.Errorf(tare.EINVALID, "--latency-factor must be above 1; got %g", f.th.LatencyFactor)
	}
	if f.slo != "" {
		slo, err := judge.ParseSLO(f.slo)
		if err != nil {
			return j, flagged(err, "slo")
		}
		j.slo = slo
	} else if f.failOn == "slo" {
		return j, tare.Errorf(tare.EINVALID, "--fail-on slo needs an --slo, like --slo p95<=2s")
	}
	return j, nil
}

// hostOnly refuses what a command that sends no load of its own (tare
// watch, tare check) cannot judge: it sees no latency, so an SLO would
// fail (or pass) on nothing.
func (f *judgeFlags) hostOnly(command string) error {
	if f.slo != "" || f.failOn == "slo" {
		return tare.Errorf(tare.EINVALID, "%s sees no latency of its own, so --slo has nothing to judge: drop --slo (and --fail-on slo), judge the tool's own report, or measure with tare run", command)
	}
	return nil
}

// flagged names the flag a user error came from: a message that starts
// with the flag's name ("rate must …") gets its dashes, any other is
// prefixed with the flag. With flag "", the message's first word is the flag.
// The error stays the cause.
func flagged(err error, flag string) error {
	msg := tare.ErrorMessage(err)
	if flag == "" || strings.HasPrefix(msg, flag+" ") {
		return &tare.Error{Code: tare.ErrorCode(err), Message: "--" + msg, Err: err}
	}
	return &tare.Error{Code: tare.ErrorCode(err), Message: "--" + flag + ": " + msg, Err: err}
}

// storeFlags say where runs are kept.
type storeFlags struct {
	db      string
	noStore bool
}

func (f *storeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.db, "db", "", "where runs are kept: a SQLite file, or postgres://… for a shared team store (default $TARE_DB, else ~/.local/share/tare/tare.db)")
}

func (f *storeFlags) registerNoStore(fs *pflag.FlagSet) {
	f.register(fs)
	fs.BoolVar(&f.noStore, "no-store", false, "do not store the run")
}

// open opens the store, or returns nil with --no-store. A store that
// cannot be opened or written is an error here, before any load is sent.
func (f *storeFlags) open(ctx context.Context) (tare.Store, error) {
	if f.noStore {
		return nil, nil
	}
	return store.Open(ctx, f.db)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
