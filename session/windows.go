package session

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// Compare is the comparison of the inputs and of the sweeps' capacities,
// judged by the protocol rules.
func Compare(inputs []stats.CompareInput, sweeps []tare.SweepCapacity, rules judge.ProtocolRules) *tare.Comparison {
	c := stats.Compare(inputs)
	c.Sweeps = sweeps
	summaries := make([]tare.Summary, len(inputs))
	for i := range inputs {
		summaries[i] = inputs[i].Summary
	}
	judge.Protocol(&c, summaries, rules)
	c.Calendar = calendarChecks(inputs)
	return &c
}

// LoadWindows reads the complete runs among runs (those of one protocol)
// as the inputs of a comparison, windows in protocol order (peak, offpeak,
// mid, then the rest), each window in the order it ran. The steps of a
// sweep are judged again and stand for their window by the highest step
// that held; the sweeps' capacities come with them. runs is sorted in
// place.
func LoadWindows(ctx context.Context, st tare.Store, runs []tare.Run) ([]stats.CompareInput, []tare.SweepCapacity, error) {
	slices.SortStableFunc(runs, func(a, b tare.Run) int {
		return cmp.Or(cmp.Compare(windowOrder(a.Window), windowOrder(b.Window)), a.StartedAt.Compare(b.StartedAt))
	})
	var (
		inputs []stats.CompareInput
		sweeps []tare.SweepCapacity
	)
	steps := map[string][]tare.Run{}
	var slots []string
	for _, r := range runs {
		if r.Status != tare.StatusComplete {
			continue
		}
		if slot := r.Config[ConfigSweepSlot]; slot != "" {
			if _, ok := steps[slot]; !ok {
				slots = append(slots, slot)
			}
			steps[slot] = append(steps[slot], r)
			continue
		}
		in, err := LoadInput(ctx, st, r.ID)
		if err != nil {
			return nil, nil, err
		}
		inputs = append(inputs, in)
	}
	for _, slot := range slots {
		in, sw, err := sweepInput(ctx, st, steps[slot])
		if err != nil {
			return nil, nil, err
		}
		if in != nil {
			inputs = append(inputs, *in)
		}
		sweeps = append(sweeps, sw)
	}
	return inputs, sweeps, nil
}

// sweepInput judges the stored steps of one sweep again, with the SLO they
// ran under, and returns the highest step that held and the capacity.
func sweepInput(ctx context.Context, st tare.Store, runs []tare.Run) (*stats.CompareInput, tare.SweepCapacity, error) {
	sw := tare.SweepCapacity{Window: runs[0].Window, Steps: len(runs)}
	var slo judge.SLO
	if s := runs[0].Config["slo"]; s != "" {
		if parsed, err := judge.ParseSLO(s); err == nil {
			slo = parsed
		}
	}
	type judged struct {
		in   stats.CompareInput
		rate float64
		ok   bool
	}
	var all []judged
	failed := math.Inf(1)
	for _, r := range runs {
		rate, err := strconv.ParseFloat(r.Config[ConfigSweepRate], 64)
		if err != nil {
			continue
		}
		in, err := LoadInput(ctx, st, r.ID)
		if err != nil {
			return nil, sw, err
		}
		ok := judge.Step(&in.Summary, in.Ticks, slo, judge.DefaultSweepRules()).Status == tare.StepOK
		all = append(all, judged{in, rate, ok})
		if !ok {
			failed = min(failed, rate)
		}
	}
	// The capacity is the highest rate that held below the lowest that
	// failed, as the search itself decided.
	var best *judged
	for i := range all {
		if j := &all[i]; j.ok && j.rate < failed && (best == nil || j.rate > best.rate) {
			best = j
		}
	}
	if best == nil {
		return nil, sw, nil
	}
	sw.CapacityPerS, sw.AtLeast = tare.Float(best.rate), math.IsInf(failed, 1)
	return &best.in, sw, nil
}

// windowOrder is a window's place in a comparison: the protocol's
// windows first, in the order the capacity range reads them.
func windowOrder(w string) int {
	switch w {
	case tare.WindowPeak:
		return 0
	case tare.WindowOffpeak:
		return 1
	case tare.WindowMid:
		return 2
	}
	return 3
}
