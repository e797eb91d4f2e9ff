package session

import (
	"context"
	"io"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/settings"
)

// Driver runs windows of a prepared spec, for the commands that run more
// than one (a sweep, a protocol): each built by Prepared.Window, with the
// caller's hooks.
type Driver struct {
	Prepared *Prepared
	Store    tare.Store // nil: the windows are not stored
	Version  string     // tare's, recorded with every run
	// Waiting, when not nil, hears that a window waits for the queue's
	// workers (Prepared.AwaitWorkers).
	Waiting io.Writer
	// Hook, when not nil, adds the caller's hooks (the live line) to
	// every window's Config.
	Hook func(*Config)
}

// Window is the window of run at rate r (the spec's rate when 0), hooked.
func (d *Driver) Window(run tare.Run, r arrival.Rate) (Config, error) {
	cfg, err := d.Prepared.Window(d.Store, run, r, d.Version)
	if err != nil {
		return cfg, err
	}
	if d.Hook != nil {
		d.Hook(&cfg)
	}
	return cfg, nil
}

// AwaitWorkers waits, before the load, for a worker registered on the
// queue when the target is one (Prepared.AwaitWorkers).
func (d *Driver) AwaitWorkers(ctx context.Context) error {
	return d.Prepared.AwaitWorkers(ctx, d.Waiting)
}

// Sweep checks cfg's plan, waits for the queue's workers when the target
// is a queue, and runs the search, each step a window of d: cfg's target,
// SLO and windows are d's.
func (d *Driver) Sweep(ctx context.Context, cfg SweepConfig) (tare.Sweep, error) {
	if err := cfg.Plan.Validate(); err != nil {
		return tare.Sweep{}, err
	}
	p := d.Prepared
	if len(p.Spec.Load.Stages) > 0 {
		return tare.Sweep{}, settings.Errorf("", "a sweep sets each step's rate itself: drop %s (tare run --stages ramps one run)", settings.Name("stages"))
	}
	if err := d.AwaitWorkers(ctx); err != nil {
		return tare.Sweep{}, err
	}
	cfg.Target, cfg.SLO = p.Name, p.Judging.SLO
	cfg.Window = func(rate float64, run tare.Run) (Config, error) {
		return d.Window(run, arrival.Rate(rate))
	}
	return Sweep(ctx, cfg)
}
