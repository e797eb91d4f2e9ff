// Package demo is tare demo's reference topology, started on this machine:
// a simulated model in a process of its own (the system under test), a
// queue, agent workers calling the model, and, for --neighbour, CPU hogs
// on the same cores.
package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/worker"
)

// Config is the demo's topology and its window.
type Config struct {
	Spec        *session.Spec // the load, the host, the judging and the prompts
	Queue       string        // a Redis URL for a queue of the demo's own; "": in memory
	Workers     int
	Concurrency int // jobs each worker runs at once
	TokenCost   time.Duration
	MeanTokens  int
	MaxTokens   int // of each job; 0: the model's own draw

	Version  string
	Recorded map[string]string // the run's configuration: the settings given
	// Self runs tare with args: the model and the hogs are tare
	// processes.
	Self func(ctx context.Context, args ...string) (*exec.Cmd, error)
	// Model is what a worker calls the model through.
	Model func(*openai.Client) worker.Model
}

// Check says which setting is out of range, if one is.
func (c *Config) Check() error {
	switch {
	case c.Workers < 1:
		return tare.SettingErrorf(tare.EINVALID, "workers", "must be at least 1; got %d", c.Workers)
	case c.Concurrency < 1:
		return tare.SettingErrorf(tare.EINVALID, "concurrency", "must be at least 1; got %d", c.Concurrency)
	case c.TokenCost <= 0:
		return tare.SettingErrorf(tare.EINVALID, "token-cost", "must be positive, like 2ms; got %s", c.TokenCost)
	case c.MeanTokens < 1:
		return tare.SettingErrorf(tare.EINVALID, "mean-tokens", "must be at least 1; got %d", c.MeanTokens)
	case c.MaxTokens < 0:
		return tare.SettingErrorf(tare.EINVALID, "max-tokens", "must be 0 or more; got %d", c.MaxTokens)
	}
	return nil
}

// Demo is the demo checked (New), then its topology started (Start)
// until Stop.
type Demo struct {
	cfg      Config
	Schedule arrival.Process
	prompts  tare.Prompts
	Judging  session.Judging
	sampling host.Config

	// Set by Start.
	Model  *modelsim.Process
	Where  string // the queue, in words
	target *session.Prepared
	stops  []func() // in the order they run
}

// New checks cfg and builds what the demo's window needs, starting
// nothing.
func New(cfg Config) (*Demo, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	d := &Demo{cfg: cfg}
	l := &cfg.Spec.Load
	var err error
	if d.Schedule, err = l.Schedule(); err != nil {
		return nil, err
	}
	if d.prompts, err = cfg.Spec.Target.PromptSource(true, l.Seed); err != nil {
		return nil, err
	}
	if d.Judging, err = cfg.Spec.Judge.Judging(); err != nil {
		return nil, err
	}
	if err := d.Judging.SLO.ForTarget(false); err != nil { // the demo's jobs call a model
		return nil, session.Flagged(err, "slo")
	}
	if d.sampling, err = cfg.Spec.Host.Sampling(os.Getpid()); err != nil {
		return nil, err
	}
	return d, nil
}

// Start starts the model (its stderr to stderr), the queue and the
// workers; after an error, what it started is stopped.
func (d *Demo) Start(ctx context.Context, stderr io.Writer) error {
	if err := d.start(ctx, stderr); err != nil {
		d.Stop()
		return err
	}
	return nil
}

func (d *Demo) start(ctx context.Context, stderr io.Writer) error {
	cfg := d.cfg
	// The model: a simulated endpoint on loopback, in a process of its own,
	// so that the system under test and the generator are told apart.
	model, err := d.startModel(ctx, stderr)
	if err != nil {
		return err
	}
	d.Model = model
	d.atStop(model.Stop)
	d.sampling.SUT = []int{model.PID}
	client, err := openai.New(openai.Config{URL: model.URL, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	d.atStop(client.Close)

	// The queue: in memory, or a queue of its own in the given Redis,
	// deleted afterwards.
	var b queue.Broker = queue.NewMemory(queue.MemoryConfig{Queue: "demo"})
	d.Where = "an in-memory queue"
	if cfg.Queue != "" {
		name := fmt.Sprintf("demo-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
		rb, err := queue.OpenRedis(ctx, cfg.Queue, name)
		if err != nil {
			return session.Flagged(err, "queue")
		}
		b, d.Where = rb, fmt.Sprintf("queue %q in Redis at %s", name, queue.RedactURL(cfg.Queue))
	}
	t, err := session.QueueTarget(b, queue.TargetConfig{MaxTokens: cfg.MaxTokens, Timeout: 5 * time.Minute, Prompts: d.prompts})
	if err != nil {
		return err
	}
	d.target = t

	// The workers, stopped and the queue cleaned up before the target
	// (which closes the broker) is released.
	workCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	for i := range cfg.Workers {
		w := worker.New(b, cfg.Model(client), worker.Config{Name: fmt.Sprintf("demo-worker-%d", i+1), Concurrency: cfg.Concurrency, ClaimIdle: 10 * time.Second})
		workers.Add(1)
		go func() {
			defer workers.Done()
			w.Run(workCtx)
		}()
	}
	d.atStop(func() {
		stopWorkers()
		workers.Wait()
		if cfg.Queue != "" {
			cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			b.Cleanup(cleanCtx)
			cancel()
		}
		t.Release()
	})
	return nil
}

// atStop has Stop call stop, before what was started earlier.
func (d *Demo) atStop(stop func()) { d.stops = append([]func(){stop}, d.stops...) }

// Stop stops the workers, cleans their queue up, and stops the model.
func (d *Demo) Stop() {
	for _, stop := range d.stops {
		stop()
	}
	d.stops = nil
}

// Config is the demo's window, stored in st: its load sent to the queue,
// the model its system under test.
func (d *Demo) Config(st tare.Store) (session.Config, error) {
	l := &d.cfg.Spec.Load
	return session.Window{
		Run:  tare.Run{Label: cmp.Or(l.Label, "demo"), Window: l.Window, Target: "demo " + d.target.Name, Version: d.cfg.Version, Config: d.cfg.Recorded},
		Load: l, Target: d.target.Target, Depth: d.target.Depth(),
		Sampling: d.sampling, SUTFoundBy: "started by tare demo: the simulated model", Judging: d.Judging, Store: st,
	}.Config()
}

// Target is what the demo's load is sent to: its queue.
func (d *Demo) Target() tare.Target { return d.target.Target }

// startModel starts tare model on a free loopback port.
func (d *Demo) startModel(ctx context.Context, stderr io.Writer) (*modelsim.Process, error) {
	// Not cancelled with ctx: the model serves the drain after Ctrl-C, and
	// stops when the demo stops it.
	c, err := d.cfg.Self(context.WithoutCancel(ctx), "model", "--listen", "127.0.0.1:0", "--token-cost", d.cfg.TokenCost.String(),
		"--mean-tokens", strconv.Itoa(d.cfg.MeanTokens), "--token-spread", "0.5", "--seed", strconv.FormatUint(d.cfg.Spec.Load.Seed, 10))
	if err != nil {
		return nil, err
	}
	p, err := modelsim.Start(c, 30*time.Second, stderr)
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "%w", err)
	}
	return p, nil
}
