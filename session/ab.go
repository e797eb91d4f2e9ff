package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// Defaults of an A/B run.
const (
	DefaultABPairs      = 20
	DefaultABConfidence = 95.0
	// ABTrialRequests is how many requests a trial is made long enough to
	// hold at the rate, so that its p99 rests on a few requests beyond
	// it; ABMinTrial the shortest trial, which a host sampled each second
	// still sees.
	ABTrialRequests = 300
	ABMinTrial      = 2 * time.Second
	// abMinPairs are the pairs run before --precision may stop the run:
	// fewer cannot bound the interval at 95 % (stats.PairedRatio: five
	// pairs' signs fall one way by chance once in 16).
	abMinPairs = 6
)

// ABTrialLength is a trial's length at rate (per second, of one
// variant): long enough for ABTrialRequests, at least ABMinTrial.
func ABTrialLength(rate float64) time.Duration {
	if !(rate > 0) {
		return ABMinTrial
	}
	d := time.Duration(float64(ABTrialRequests) / rate * float64(time.Second)).Round(100 * time.Millisecond)
	return max(d, ABMinTrial)
}

// AB runs two variants of one load, A and B, in pairs of short trials,
// each a window measured by Measure, and judges B against A over the
// pairs. Interleaved (the default), each pair runs A's trial and B's one
// after the other, in an order drawn from Seed, balanced over every two
// pairs; both trials of a pair share their arrival schedule. In duet mode
// both run at once, each at half the rate.
type AB struct {
	// A and B run each variant's trials; their Prepared specs' loads
	// give a trial's rate and length, and their Store keeps each trial
	// as a run (nil: not stored).
	A, B *Driver
	Mode string // tare.ABInterleaved ("" too) or tare.ABDuet
	// Pairs is the most pairs to run; Precision (%), when above 0, stops
	// the run sooner, once the interval of B/A on On is within ±Precision.
	Pairs     int
	Precision float64
	On        string  // the metric that decides: p95 when ""
	Tolerance float64 // %: judge.DefaultABTolerance when 0
	Seed      uint64
	Run       tare.Run // the label and recorded configuration of every trial's run
	// OnPair, when not nil, hears each pair once measured, with the
	// result so far.
	OnPair func(p tare.ABPair, sofar *tare.AB)
}

// Measure runs the pairs and returns the A/B result. A cancelled ctx
// stops it between trials, and the pairs measured so far are judged,
// marked interrupted.
func (ab *AB) Measure(ctx context.Context) (tare.AB, error) {
	out := tare.AB{Schema: tare.ABSchema, Mode: ab.Mode, Label: ab.Run.Label, Seed: ab.Seed, On: ab.On,
		TolerancePct: ab.Tolerance, PrecisionPct: ab.Precision, ConfidencePct: DefaultABConfidence,
		A: tare.ABVariant{Target: ab.A.Prepared.Name}, B: tare.ABVariant{Target: ab.B.Prepared.Name},
		StartedAt: time.Now(), Status: string(tare.StatusComplete), Pairs: []tare.ABPair{}}
	if out.Mode == "" {
		out.Mode = tare.ABInterleaved
	}
	if out.On == "" {
		out.On = "p95"
	}
	if out.TolerancePct == 0 {
		out.TolerancePct = judge.DefaultABTolerance
	}
	if err := ab.check(out.Mode, out.On); err != nil {
		return out, err
	}
	load := ab.A.Prepared.Spec.Load
	out.TrialS, out.RatePerS = load.Length().Seconds(), float64(load.Rate)
	if out.Mode == tare.ABDuet {
		out.RatePerS /= 2
	}
	rng := rand.New(rand.NewPCG(ab.Seed, 0x746172656162)) // "tareab"
	var firsts []string
	for n := 1; n <= ab.Pairs; n++ {
		if len(firsts) == 0 {
			// Every two pairs run A first once and B first once, in a
			// random order: balanced, so a drift over the run (a warming
			// cache, a neighbour starting) falls on neither side more.
			firsts = []string{"a", "b"}
			rng.Shuffle(2, func(i, j int) { firsts[i], firsts[j] = firsts[j], firsts[i] })
		}
		first := firsts[0]
		firsts = firsts[1:]
		p, err := ab.pair(ctx, n, first, out.Mode)
		if ctx.Err() != nil {
			out.Status = string(tare.StatusInterrupted)
			break
		}
		if err != nil {
			return out, err
		}
		out.Pairs = append(out.Pairs, p)
		ab.judge(&out)
		if ab.OnPair != nil {
			ab.OnPair(p, &out)
		}
		if ab.resolved(&out) {
			break
		}
	}
	out.EndedAt = time.Now()
	ab.judge(&out)
	if st := ab.A.Store; st != nil {
		// Kept even when interrupted, like its trials: the pairs measured
		// are judged.
		out.ID = store.NewRunID()
		if err := st.SaveAB(context.WithoutCancel(ctx), out); err != nil {
			return out, fmt.Errorf("store the A/B run: %w", err)
		}
	}
	return out, nil
}

func (ab *AB) check(mode, on string) error {
	switch {
	case mode != tare.ABInterleaved && mode != tare.ABDuet:
		return settings.Errorf("mode", "must be %s or %s; got %q", tare.ABInterleaved, tare.ABDuet, mode)
	case !slices.Contains(tare.ABMetrics, on):
		return settings.Errorf("on", "must be one of %s; got %q", strings.Join(tare.ABMetrics, ", "), on)
	case ab.Pairs < 2:
		return settings.Errorf("trials", "must be at least 2: an interval needs two pairs; got %d", ab.Pairs)
	case ab.Precision < 0:
		return settings.Errorf("precision", "must be 0 (run every pair) or a percentage, like 3; got %g", ab.Precision)
	case ab.Tolerance < 0:
		return settings.Errorf("tolerance", "must be a percentage above 0, like 5; got %g", ab.Tolerance)
	}
	return nil
}

// judge computes the ratios and the result of the pairs so far.
func (ab *AB) judge(out *tare.AB) {
	out.Ratios = stats.ABRatios(out.Pairs, out.ConfidencePct, ab.Seed)
	out.Interference = stats.ABNoise(out.Pairs)
	out.Interference.Detail = judge.ABNoiseDetail(out.Interference, len(out.Pairs))
	judge.AB(out)
	out.Warnings = nil
	failed := 0
	for _, p := range out.Pairs {
		if p.A.Errors > 0 || p.B.Errors > 0 {
			failed++
		}
	}
	if failed > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d trial pairs had failed requests: their latencies count in the figures", failed, len(out.Pairs)))
	}
}

// resolved says whether --precision was asked for and the interval on On
// is within it.
func (ab *AB) resolved(out *tare.AB) bool {
	if ab.Precision <= 0 || len(out.Pairs) < abMinPairs {
		return false
	}
	r := judge.ABRatioOn(out, out.On)
	if r == nil || r.RatioLow == nil {
		return false
	}
	return 100*(*r.RatioHigh-*r.RatioLow)/2 <= ab.Precision
}

// pair runs pair n's two trials: first's trial then the other's, or both
// at once in duet mode.
func (ab *AB) pair(ctx context.Context, n int, first, mode string) (tare.ABPair, error) {
	p := tare.ABPair{N: n, First: first}
	if mode == tare.ABDuet {
		p.First = ""
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() { p.A, errA = ab.trial(ctx, ab.A, ab.B, "a", n) })
		wg.Go(func() { p.B, errB = ab.trial(ctx, ab.B, ab.A, "b", n) })
		wg.Wait()
		if err := errors.Join(errA, errB); err != nil {
			return p, err
		}
	} else {
		order := []string{"a", "b"}
		if first == "b" {
			order = []string{"b", "a"}
		}
		for _, v := range order {
			d, at := ab.A, &p.A
			if v == "b" {
				d, at = ab.B, &p.B
			}
			t, err := ab.trial(ctx, d, nil, v, n)
			if err != nil || ctx.Err() != nil {
				return p, err
			}
			*at = t
		}
	}
	p.Ratios = stats.PairRatios(&p)
	return p, nil
}

// trial runs variant's trial of pair n through d, in the window
// trialWindow makes.
func (ab *AB) trial(ctx context.Context, d, duet *Driver, variant string, n int) (tare.ABTrial, error) {
	cfg, err := ab.trialWindow(d, duet, variant, n)
	if err != nil {
		return tare.ABTrial{}, err
	}
	s, _, storeErr, err := Measure(ctx, cfg)
	if err != nil {
		return tare.ABTrial{}, fmt.Errorf("trial %s of pair %d: %w", variant, n, err)
	}
	if storeErr != nil {
		return tare.ABTrial{}, fmt.Errorf("store trial %s of pair %d: %w", variant, n, storeErr)
	}
	return stats.ABTrialOf(&s), nil
}

// trialWindow is variant's trial of pair n through d: both variants of a
// pair draw the same arrival schedule, seeded by pair, so that the
// schedule's own chance falls on both alike. In duet mode, duet is the
// other variant's driver, which runs at the same time, and the pair's
// schedule is split between the two as between two generators: each half
// the rate, neither in step with the other. The same schedule on both
// sent A's and B's requests at the same instants, and whichever of the
// two the CPU took second waited behind the other: on a busy CPU that
// fell on one side of a pair more than the other, and made identical
// services differ. The other's system under test is part of this one's,
// never a neighbour (they are the two sides of one measurement).
func (ab *AB) trialWindow(d, duet *Driver, variant string, n int) (Config, error) {
	run := ab.Run
	run.Config = maps.Clone(ab.Run.Config)
	if run.Config == nil {
		run.Config = map[string]string{}
	}
	run.Config["ab_variant"], run.Config["ab_pair"] = variant, strconv.Itoa(n)
	run.Label = fmt.Sprintf("%s%s%d", labelPrefix(ab.Run.Label), variant, n)
	l := d.Prepared.Spec.Load
	l.Seed = ab.Seed + uint64(n)
	cfg, err := d.Prepared.WindowOf(d.Store, run, l, d.Version)
	if err != nil {
		return cfg, err
	}
	if duet != nil {
		half := arrival.Shard{Index: 1, Count: 2}
		if variant == "b" {
			half.Index = 2
		}
		if err := ShardOf(&cfg, l, half); err != nil {
			return cfg, err
		}
		cfg.Host.SUT, cfg.Host.Parts = slices.Clone(cfg.Host.SUT), slices.Clone(cfg.Host.Parts)
		for _, part := range duet.Prepared.Sampling.Parts {
			if !slices.ContainsFunc(part.PIDs, func(pid int) bool { return !slices.Contains(cfg.Host.SUT, pid) }) {
				continue // the same service as this side's (A = B)
			}
			cfg.Host.Parts = append(cfg.Host.Parts, part)
			for _, pid := range part.PIDs {
				if !slices.Contains(cfg.Host.SUT, pid) {
					cfg.Host.SUT = append(cfg.Host.SUT, pid)
				}
			}
		}
	}
	if d.Hook != nil {
		d.Hook(&cfg)
	}
	return cfg, nil
}

// labelPrefix is what a trial's label starts with: the run's label and a
// slash, or "ab/".
func labelPrefix(label string) string {
	if label == "" {
		return "ab/"
	}
	return label + "/"
}
