package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/tare-dev/tare"
)

// Scheduler runs a protocol: it waits for each slot's start, has it run,
// and reports the slots it missed, until every slot is done or missed.
// The store is its only memory, so a Scheduler started again after a crash
// or a reboot carries on: what is done is not rerun.
type Scheduler struct {
	Schedule Schedule
	Store    tare.Store

	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Wait blocks until the clock reaches until, or ctx is done (its error
	// is then returned); next is the slot waited for, for a countdown. Nil
	// means a timer on the real clock.
	Wait func(ctx context.Context, until time.Time, next Slot) error
	// Run runs one slot's load now and stores it as a run of the protocol
	// with the slot's window. An error stops the scheduler.
	Run func(ctx context.Context, slot Slot) error
	// Missed, when set, is told of each missed slot once.
	Missed func(slot Slot)

	// Only, when set, restricts the scheduler to the slots of that window
	// (what a crontab line runs).
	Only string
	// Once stops the scheduler after one slot has run.
	Once bool
}

// Loop runs the protocol until every slot is done or missed (nil), Run
// fails (its error), or ctx is done (ctx.Err()).
func (s *Scheduler) Loop(ctx context.Context) error {
	if err := s.Schedule.Validate(); err != nil {
		return err
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	wait := s.Wait
	if wait == nil {
		wait = sleepUntil(now)
	}
	told := map[string]bool{}
	ran := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		slots, err := s.Slots(ctx, now())
		if err != nil {
			return err
		}
		for _, sl := range slots {
			if sl.State == SlotMissed && !told[sl.Key()] {
				told[sl.Key()] = true
				if s.Missed != nil {
					s.Missed(sl)
				}
			}
		}
		next, ok := Next(slots)
		if !ok {
			return nil
		}
		if next.State != SlotDue {
			if err := wait(ctx, waitUntil(next), next); err != nil {
				return err
			}
			continue
		}
		if ran[next.Key()] {
			// The run went, but no complete run of it is in the store:
			// running it again would loop for ever.
			return tare.Errorf(tare.EUNAVAILABLE, "the %s window of protocol %s ran but no complete run of it is in the store", next.Window.Name, s.Schedule.Protocol)
		}
		ran[next.Key()] = true
		if err := s.Run(ctx, next); err != nil {
			return err
		}
		if s.Once {
			return ctx.Err()
		}
	}
}

// Slots reads the protocol's runs from the store and lays out its slots
// at now, restricted to the Only window when set.
func (s *Scheduler) Slots(ctx context.Context, now time.Time) ([]Slot, error) {
	runs, err := s.Store.FindRuns(ctx, tare.RunFilter{Protocol: s.Schedule.Protocol})
	if err != nil {
		return nil, fmt.Errorf("find the runs of protocol %s: %w", s.Schedule.Protocol, err)
	}
	all := s.Schedule.Cycle(runs, now)
	if s.Only == "" {
		return all, nil
	}
	var out []Slot
	for _, sl := range all {
		if sl.Window.Name == s.Only {
			out = append(out, sl)
		}
	}
	return out, nil
}

// sleepUntil waits on the real clock.
func sleepUntil(now func() time.Time) func(ctx context.Context, until time.Time, _ Slot) error {
	return func(ctx context.Context, until time.Time, _ Slot) error {
		return tare.Sleep(ctx, max(until.Sub(now()), 0))
	}
}
