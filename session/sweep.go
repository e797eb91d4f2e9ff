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

// SweepConfig is a capacity search: each step one window at the step's
// rate.
type SweepConfig struct {
	// Run is the template of every step's run: label, window, protocol
	// and configuration.
	Run    tare.Run
	Target string    // names the sweep's target
	SLO    judge.SLO // the SLO each step is held to
	// Window returns the window of the step at rate per second, for run
	// (the template, labelled and configured for the step).
	Window   func(rate float64, run tare.Run) (Config, error)
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
	slot := cmp.Or(cfg.Slot, "sweep-"+store.NewRunID())
	result := tare.Sweep{Schema: tare.SweepSchema, Target: cfg.Target, Window: cfg.Run.Window, SLO: cfg.SLO.String(), Steps: []tare.SweepStep{}}
	var polluted []string
	for i := 0; ; i++ {
		rate, ok := search.Next()
		if !ok {
			break
		}
		if i > 0 && cfg.Cooldown > 0 {
			if err := tare.Sleep(ctx, cfg.Cooldown); err != nil {
				result.Stopped = "interrupted between steps: the capacity is from the steps before"
				return finishSweep(result, search, polluted), nil
			}
		}
		run := cfg.Run
		run.Label = cmp.Or(cfg.Run.Label, "sweep") + " " + judge.FormatRate(rate)
		run.Config = maps.Clone(cfg.Run.Config)
		if run.Config == nil {
			run.Config = map[string]string{}
		}
		run.Config[ConfigSweepRate] = strconv.FormatFloat(rate, 'g', -1, 64)
		run.Config[ConfigSweepSlot] = slot
		run.Config[ConfigSweepStep] = strconv.Itoa(i + 1)
		window, err := cfg.Window(rate, run)
		if err != nil {
			return result, err
		}
		sum, ticks, storeErr, err := Measure(ctx, window)
		if err != nil {
			return result, err
		}
		if sum.Run.Status == tare.StatusInterrupted {
			result.Stopped = fmt.Sprintf("interrupted during the step at %s: the capacity is from the steps before", judge.FormatRate(rate))
			return finishSweep(result, search, polluted), nil
		}
		step := judge.Step(&sum, ticks, cfg.SLO, rules)
		step.OfferedPerS = rate
		result.Steps = append(result.Steps, step)
		search.Record(rate, step.Status == tare.StepOK)
		if storeErr != nil {
			result.Warnings = append(result.Warnings, fmt.Sprintf("step %d: %s", i+1, tare.ErrorMessage(storeErr)))
		}
		if step.Verdict == tare.Polluted {
			polluted = append(polluted, strconv.Itoa(i+1))
		}
		if cfg.OnStep != nil {
			cfg.OnStep(i+1, step)
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
