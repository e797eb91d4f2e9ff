package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/protocol"
)

// ProtocolRun runs a plan's windows, each at its slot a window (or a
// sweep) of its Driver stored as a run of the protocol, and compares them
// once every one has run or was missed.
type ProtocolRun struct {
	Plan     *Plan
	Schedule protocol.Schedule
	*Driver  // its Store is the protocol's memory: it must not be nil
	// Wait is the wait for the next slot (protocol.Countdown); nil: a
	// timer on the real clock.
	Wait func(ctx context.Context, until time.Time, next protocol.Slot) error
	// Watch, when not nil, adds to the Config of a window (not of a
	// sweep's steps) what shows it as it goes, and returns what ends that
	// once the window is judged: with its verdict, or nil when it failed.
	Watch func(*Config) (end func(*tare.Verdict))
	Show  ProtocolShow
}

// ProtocolShow is what a protocol run shows as it goes: the caller prints
// it.
type ProtocolShow interface {
	// DryRun: a dry run of s begins, under a protocol id of its own.
	DryRun(s protocol.Schedule)
	// Start: the loop over s's slots begins.
	Start(s protocol.Schedule)
	// Slot: slot of s begins.
	Slot(s protocol.Schedule, slot protocol.Slot)
	// Missed: slot's time passed while tare was not running.
	Missed(slot protocol.Slot)
	// Summary and Sweep: a window ran, as one load or as a sweep; their
	// error stops the protocol.
	Summary(*tare.Summary) error
	Sweep(*tare.Sweep) error
	// Step: step n of a window's sweep was judged.
	Step(n int, step tare.SweepStep)
	// Stopped: ctx ended the run, during a dry run's window or ("") in
	// the loop, which the same command carries on.
	Stopped(window string)
	// Ran: the slot of the one window asked for ran, and other slots are
	// still to come.
	Ran(s protocol.Schedule, window string)
	// Compared: the comparison of protocol id's stored windows; nil when
	// fewer than two of them are complete (n).
	Compared(id string, c *tare.Comparison, n int) error
}

// DryRun runs every window at once, under a protocol id of its own, and
// compares them.
func (pr *ProtocolRun) DryRun(ctx context.Context) error {
	s := pr.Schedule
	s.Protocol = fmt.Sprintf("%s-dry-%s", s.Protocol, time.Now().Format("20060102-150405"))
	pr.Show.DryRun(s)
	for _, w := range s.Windows {
		opens := time.Now()
		slot := protocol.Slot{Window: w, Day: 1, Opens: opens, Closes: opens.Add(s.RunLength), At: opens, State: protocol.SlotDue}
		if err := pr.runSlot(ctx, s, slot, true); err != nil {
			return err
		}
		if ctx.Err() != nil {
			pr.Show.Stopped(w.Name)
			return nil
		}
	}
	return pr.compare(ctx, s.Protocol)
}

// Loop waits for each slot and runs it, until the cycle is over, then
// compares the windows; with only, it runs that window's next slot, and
// compares only when it was the last. A cancelled ctx stops it, with no
// error: the same command carries on.
func (pr *ProtocolRun) Loop(ctx context.Context, only string) error {
	s := pr.Schedule
	sc := &protocol.Scheduler{
		Schedule: s,
		Store:    pr.Store,
		Wait:     pr.Wait,
		Run: func(ctx context.Context, slot protocol.Slot) error {
			return pr.runSlot(ctx, s, slot, false)
		},
		Missed: pr.Show.Missed,
		Only:   only,
		Once:   only != "",
	}
	pr.Show.Start(s)
	err := sc.Loop(ctx)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		pr.Show.Stopped("")
		return nil
	case err != nil:
		return err
	}
	slots, err := sc.Slots(ctx, time.Now())
	if err != nil {
		return err
	}
	if sc.Only != "" {
		sc.Only = ""
		if slots, err = sc.Slots(ctx, time.Now()); err != nil {
			return err
		}
	}
	if _, more := protocol.Next(slots); more {
		pr.Show.Ran(s, only)
		return nil
	}
	return pr.compare(ctx, s.Protocol)
}

// runSlot runs one window through Measure (or a sweep of them) and stores
// it; the store failing stops the protocol, since the store is its memory.
func (pr *ProtocolRun) runSlot(ctx context.Context, s protocol.Schedule, slot protocol.Slot, dry bool) error {
	run := pr.Plan.SlotRun(s, slot, dry)
	pr.Show.Slot(s, slot)
	if err := pr.AwaitWorkers(ctx); err != nil {
		return err
	}
	if pr.Plan.Sweep != nil {
		plan, _ := pr.Plan.Sweep.Plan()
		result, err := pr.Sweep(ctx, SweepConfig{Run: run, Plan: plan, Cooldown: pr.Plan.Sweep.Cooldown,
			Slot: s.Protocol + "/" + slot.Key(), OnStep: pr.Show.Step})
		if err != nil {
			return err
		}
		return pr.Show.Sweep(&result)
	}
	cfg, err := pr.Window(run, 0)
	if err != nil {
		return err
	}
	end := func(*tare.Verdict) {}
	if pr.Watch != nil {
		end = pr.Watch(&cfg)
	}
	sum, _, storeErr, err := Measure(ctx, cfg)
	if err != nil {
		end(nil)
		return err
	}
	if err := pr.Show.Summary(&sum); err != nil {
		end(nil)
		return err
	}
	end(&sum.Verdict)
	return storeErr
}

// compare shows the comparison of a protocol's stored runs.
func (pr *ProtocolRun) compare(ctx context.Context, id string) error {
	c, n, err := pr.Plan.Compare(ctx, pr.Store, id, pr.Prepared.Judging.SLO)
	if err != nil {
		return err
	}
	return pr.Show.Compared(id, c, n)
}
