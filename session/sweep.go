package session

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/store"
)

// Keys a sweep step's run carries in its configuration, so a stored step
// can be found and judged again with its sweep.
const (
	ConfigSweepRate = "sweep.rate" // the rate the step asked for, per second
	ConfigSweepSlot = "sweep.slot" // the sweep the step belongs to: window@date, or a run-unique id
	ConfigSweepStep = "sweep.step" // the step's number, from 1
)

// SweepConfig is a capacity search: each step one window of Window at the
// step's rate.
type SweepConfig struct {
	// Window is every step's window but for its schedule and rate; its Run
	// is the template of every step's run (label, window, protocol and
	// configuration) and its Run.Target names the sweep's target.
	Window Config
	// Schedule returns the bounded arrivals of a step at rate per second.
	Schedule func(rate float64) (arrival.Process, error)
	Plan     judge.SweepPlan
	Rules    judge.SweepRules // judge.DefaultSweepRules when zero
	Cooldown time.Duration    // pause between steps, so one step's stragglers do not land in the next
	// Slot names the sweep in its steps' configuration; a new id when "".
	Slot string
	// OnStep, when not nil, hears of each step once it is judged; n counts
	// from 1.
	OnStep func(n int, step tare.SweepStep)
}

// Sweep runs the search, a Measure per step. A cancelled ctx stops it
// after the step under way, with the capacity of the steps before; a step
// the store failed to keep is a warning, since the measurement itself is
// whole.
func Sweep(ctx context.Context, cfg SweepConfig) (tare.Sweep, error) {
	search, err := judge.NewSearch(cfg.Plan)
	if err != nil {
		return tare.Sweep{}, err
	}
	rules := cfg.Rules
	if rules == (judge.SweepRules{}) {
		rules = judge.DefaultSweepRules()
	}
	base := cfg.Window.Run
	slot := cmp.Or(cfg.Slot, "sweep-"+store.NewRunID())
	result := tare.Sweep{Schema: tare.SweepSchema, Target: base.Target, Window: base.Window, SLO: cfg.Window.SLO.String(), Steps: []tare.SweepStep{}}
	var polluted []string
	for i := 0; ; i++ {
		rate, ok := search.Next()
		if !ok {
			break
		}
		if i > 0 && cfg.Cooldown > 0 {
			if err := Sleep(ctx, cfg.Cooldown); err != nil {
				result.Stopped = "interrupted between steps: the capacity is from the steps before"
				return finishSweep(result, search, polluted), nil
			}
		}
		step := cfg.Window
		step.Run.Label = cmp.Or(base.Label, "sweep") + " " + judge.FormatRate(rate)
		step.Run.Config = maps.Clone(base.Config)
		if step.Run.Config == nil {
			step.Run.Config = map[string]string{}
		}
		step.Run.Config[ConfigSweepRate] = strconv.FormatFloat(rate, 'g', -1, 64)
		step.Run.Config[ConfigSweepSlot] = slot
		step.Run.Config[ConfigSweepStep] = strconv.Itoa(i + 1)
		if step.Schedule, err = cfg.Schedule(rate); err != nil {
			return result, err
		}
		step.Run.Arrival, step.Rate = step.Schedule.String(), rate
		sum, ticks, storeErr, err := Measure(ctx, step)
		if err != nil {
			return result, err
		}
		if sum.Run.Status == tare.StatusInterrupted {
			result.Stopped = fmt.Sprintf("interrupted during the step at %s: the capacity is from the steps before", judge.FormatRate(rate))
			return finishSweep(result, search, polluted), nil
		}
		judged := judge.Step(&sum, ticks, cfg.Window.SLO, rules)
		judged.OfferedPerS = rate
		result.Steps = append(result.Steps, judged)
		search.Record(rate, judged.Status == tare.StepOK)
		if storeErr != nil {
			result.Warnings = append(result.Warnings, fmt.Sprintf("step %d: %s", i+1, tare.ErrorMessage(storeErr)))
		}
		if judged.Verdict == tare.Polluted {
			polluted = append(polluted, strconv.Itoa(i+1))
		}
		if cfg.OnStep != nil {
			cfg.OnStep(i+1, judged)
		}
	}
	return finishSweep(result, search, polluted), nil
}

func finishSweep(r tare.Sweep, search *judge.Search, polluted []string) tare.Sweep {
	capacity, ok, atLeast, why := search.Result()
	if ok {
		r.CapacityPerS = tare.Float(capacity)
	}
	r.AtLeast = atLeast
	if r.Stopped == "" {
		r.Stopped = why
	}
	if len(polluted) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("step %s polluted: that capacity describes the host as much as the code; sweep again in a quiet window, or in each protocol window", strings.Join(polluted, ", ")+plural(len(polluted), " was", " were")))
	}
	return r
}

// Sleep waits for d, or until ctx is done: then it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
