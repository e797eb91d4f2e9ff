package session

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/stats"
)

// Config is one window: what to send, how, what to watch, and what to
// judge it against. Observe uses only the run, the host, the judging and
// the hooks.
type Config struct {
	// Run is the run's identity and configuration, stored with it. A run
	// without an ID gets a new one when it is stored; a queue target's
	// jobs carry the ID.
	Run tare.Run
	// Start is when the arrivals begin (tare run --start-at); now when zero.
	Start time.Time

	Target   tare.Target
	Schedule arrival.Process // the bounded arrivals
	Rate     float64         // offered arrivals per second, for the arrival span
	// Stages, when the schedule ramps through stages (arrival.NewStaged),
	// are its stages: each gets figures and a verdict of its own, and the
	// arrival span is theirs.
	Stages arrival.Stages
	// Warmup is the start of the window whose arrivals are sent but left
	// out of every figure and of the verdict (counted in Summary.Warmup);
	// the host samples of those seconds are left out too.
	Warmup time.Duration
	// Mix, when the target mixes the requests of a targets file
	// (httptarget.Mix), breaks the figures down per request.
	Mix    TargetMix
	Engine load.Config
	// Connections is --connections, the most connections the target
	// opens at once; 0 when not given (the summary then says no limit).
	Connections int
	// Depth reads the queue's depth, sampled twice a tick; nil for targets
	// without a queue.
	Depth func(context.Context) (float64, error)

	Host       host.Config
	SUTFoundBy string // how the system under test (Host.SUT) was found; "" when it was not

	Thresholds judge.Thresholds
	SLO        judge.SLO

	Store tare.Store // nil: the run is not stored

	// ProgressEvery is how often OnProgress is called while the window
	// runs; no progress when OnProgress is nil.
	ProgressEvery time.Duration
	// OnProgress gets the live figures of the window. Observe passes a
	// zero load.Progress: there is no load of tare's own.
	OnProgress func(stats.Progress, load.Progress)
	// OnDone is called once the window is over, before the summary is
	// judged: the live line ends there.
	OnDone func()
	// OnStart is called once the sampler has taken its first reading:
	// what happens after it is inside the window, and what it starts can
	// be counted as tare (host.Sampler.AddTareTree).
	OnStart func(*host.Sampler)
	// Results, Observe only: another tool's per-request results, read once
	// the window has ended (tare watch --results) and put on its timeline
	// as if tare had sent them. Timestamps that count from the tool's own
	// start (hey's) count from the instant OnStart was called.
	Results *peer.Spec
	// Finish, when not nil, adds to the summary before it is stored.
	Finish func(*tare.Summary)
	// Watch, when not nil, is called once the run has its id, and what it
	// returns is shown every result, host sample and queue depth as the
	// window goes (a Prometheus endpoint). Its error ends the window
	// before any load is sent.
	Watch func(tare.Run) (Watcher, error)
}

// TargetMix is a target that sends each arrival one of several requests.
type TargetMix interface {
	Names() []string     // the requests, by index
	Pick(seq uint64) int // the request arrival seq takes
}

// Watcher sees a window as it goes.
type Watcher interface {
	AddResult(*tare.Result)
	AddHost(tare.HostSample)
	SetQueueDepth(float64)
}

// watch returns cfg's watcher for run, or one that sees nothing.
func (cfg *Config) watch(run tare.Run) (Watcher, error) {
	if cfg.Watch == nil {
		return nobody{}, nil
	}
	return cfg.Watch(run)
}

type nobody struct{}

func (nobody) AddResult(*tare.Result)  {}
func (nobody) AddHost(tare.HostSample) {}
func (nobody) SetQueueDepth(float64)   {}

// DefaultConfig is a Config with every default the command line starts
// from; the target, the schedule and the run are the caller's.
func DefaultConfig() Config {
	return Config{
		Engine:        load.Config{MaxInFlight: load.DefaultMaxInFlight, Drain: load.DefaultDrain},
		Host:          host.Config{Tick: tare.DefaultTick},
		Thresholds:    judge.DefaultThresholds(),
		ProgressEvery: DefaultProgressEvery,
	}
}

// DefaultProgressEvery is how often the live line is refreshed where it
// is not a terminal.
const DefaultProgressEvery = 5 * time.Second

// Window is what one window's Config is built from, for every command:
// run, sweep and protocol (through Prepared.Window), demo, watch and check.
type Window struct {
	Run tare.Run
	// Load is the arrivals of tare's own, nil for a window that sends
	// none (tare watch, tare check); Target, Depth, Mix and Connections
	// are what it is sent to.
	Load        *LoadSpec
	Target      tare.Target
	Depth       func(context.Context) (float64, error)
	Mix         TargetMix
	Connections int

	Sampling   host.Config
	SUTFoundBy string
	Judging    Judging
	Store      tare.Store // nil: the window is not stored
}

// Config is the window's Config, from DefaultConfig: the load's schedule
// checked and built (LoadSpec.Into), the hooks left to the caller.
func (w Window) Config() (Config, error) {
	cfg := DefaultConfig()
	cfg.Run, cfg.Store = w.Run, w.Store
	if w.Load != nil {
		if err := w.Load.Into(&cfg); err != nil {
			return Config{}, err
		}
	}
	cfg.Target, cfg.Depth, cfg.Connections = w.Target, w.Depth, w.Connections
	if w.Mix != nil {
		cfg.Mix = w.Mix
	}
	cfg.Host, cfg.SUTFoundBy = w.Sampling, w.SUTFoundBy
	cfg.Thresholds, cfg.SLO = w.Judging.Thresholds, w.Judging.SLO
	return cfg, nil
}
