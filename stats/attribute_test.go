package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// synth is one synthetic tick: the figures Attribute reads.
type synth struct {
	steal               float64
	throttled, runDelay *float64
	depth               *float64
	inFlight            int
	p95                 float64 // ms
	noHost              bool
}

func synthTicks(ss []synth) []tare.Tick {
	ticks := make([]tare.Tick, len(ss))
	for i, s := range ss {
		ticks[i] = tare.Tick{
			Start:       sec(float64(i)),
			End:         sec(float64(i + 1)),
			Completions: 10,
			InFlight:    s.inFlight,
			P95:         msd(s.p95),
			QueueDepth:  s.depth,
		}
		if !s.noHost {
			ticks[i].Host = &tare.HostSample{
				CPU:       tare.CPUShares{CPU: -1, Steal: s.steal},
				Throttled: s.throttled,
				RunDelay:  s.runDelay,
			}
		}
	}
	return ticks
}

// gen makes n synthetic ticks from a seeded source.
func gen(n int, seed uint64, f func(rng *rand.Rand) synth) []tare.Tick {
	rng := rand.New(rand.NewPCG(seed, 1))
	ss := make([]synth, n)
	for i := range ss {
		ss[i] = f(rng)
	}
	return synthTicks(ss)
}

func TestAttribute(t *testing.T) {
	tests := []struct {
		name     string
		ticks    []tare.Tick
		top      string  // the term with the largest share; "" for none
		minTop   float64 // its smallest acceptable share, percent
		minR2    float64
		coef     float64 // its expected coefficient, when not 0
		terms    []string
		warning  string // a substring of some warning; "" for none
		sentence string // a prefix of the sentence
	}{
		{
			name: "p95 follows steal",
			ticks: gen(60, 1, func(rng *rand.Rand) synth {
				steal := 40 * rng.Float64()
				return synth{steal: steal, inFlight: 5 + rng.IntN(10), p95: 50 + 5*steal + 10*rng.NormFloat64()}
			}),
			top: TermSteal, minTop: 90, minR2: 0.9, coef: 5,
			terms:    []string{TermSteal, TermInFlight},
			sentence: "steal explains 9",
		},
		{
			name: "p95 follows in-flight",
			ticks: gen(60, 2, func(rng *rand.Rand) synth {
				n := 1 + rng.IntN(30)
				return synth{steal: 3 * rng.Float64(), inFlight: n, p95: 20 + 20*float64(n) + 5*rng.NormFloat64()}
			}),
			top: TermInFlight, minTop: 95, minR2: 0.98, coef: 20,
			terms:    []string{TermInFlight, TermSteal},
			sentence: "in-flight explains 9",
		},
		{
			name: "queue depth and steal together",
			ticks: gen(80, 3, func(rng *rand.Rand) synth {
				steal, depth := 30*rng.Float64(), 50*rng.Float64()
				return synth{steal: steal, depth: tare.Float(depth), inFlight: rng.IntN(5), p95: 3*depth + 2*steal + rng.NormFloat64()}
			}),
			top: TermQueueDepth, minTop: 60, minR2: 0.99, coef: 3,
			terms: []string{TermQueueDepth, TermSteal},
		},
		{
			name: "constant predictors are left out",
			ticks: gen(30, 4, func(rng *rand.Rand) synth {
				n := rng.IntN(20)
				return synth{runDelay: tare.Float(2), inFlight: n, p95: 10 * float64(n)}
			}),
			top: TermInFlight, minTop: 99.9, minR2: 0.999, coef: 10,
			terms:    []string{TermInFlight},
			sentence: "in-flight explains 100 % of the variation in per-tick p95 (R² 1.00 over 30 ticks)",
		},
		{
			name: "a source measured in some ticks only",
			ticks: gen(30, 5, func(rng *rand.Rand) synth {
				s := synth{steal: 20 * rng.Float64(), inFlight: rng.IntN(5)}
				s.p95 = 4*s.steal + rng.NormFloat64()
				if rng.IntN(2) == 0 {
					s.throttled = tare.Float(rng.Float64())
				}
				return s
			}),
			top: TermSteal, minTop: 90, minR2: 0.9,
			terms:   []string{TermSteal, TermInFlight},
			warning: "throttled was measured in",
		},
		{
			name: "collinear run delay",
			ticks: gen(30, 6, func(rng *rand.Rand) synth {
				steal := 20 * rng.Float64()
				return synth{steal: steal, runDelay: tare.Float(2 * steal), inFlight: rng.IntN(5), p95: 4*steal + rng.NormFloat64()}
			}),
			top: TermSteal, minTop: 90, minR2: 0.9,
			terms:   []string{TermSteal, TermInFlight},
			warning: "run delay moved in lockstep with steal",
		},
		{
			name: "too few ticks",
			ticks: gen(6, 7, func(rng *rand.Rand) synth {
				steal := 20 * rng.Float64()
				return synth{steal: steal, p95: 4*steal + rng.NormFloat64()}
			}),
			top: TermSteal, minTop: 80, minR2: 0.8,
			terms:   []string{TermSteal},
			warning: "only 6 ticks had both completions and a host sample",
		},
		{
			name:     "no host samples",
			ticks:    synthTicks([]synth{{p95: 1, noHost: true}, {p95: 2, noHost: true}}),
			warning:  "only 0 ticks",
			sentence: "too few ticks (0)",
		},
		{
			name: "flat p95",
			ticks: gen(20, 8, func(rng *rand.Rand) synth {
				return synth{steal: 20 * rng.Float64(), p95: 100}
			}),
			sentence: "per-tick p95 did not vary over 20 ticks",
		},
		{
			name: "nothing varies but p95",
			ticks: gen(20, 9, func(rng *rand.Rand) synth {
				return synth{inFlight: 3, p95: 100 * rng.Float64()}
			}),
			sentence: "no host or load figure varied over the 20 ticks",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Attribute(tt.ticks)
			t.Logf("%s; warnings %q", a.Sentence, a.Warnings)
			if !strings.HasPrefix(a.Sentence, tt.sentence) {
				t.Errorf("Sentence = %q, want it to start with %q", a.Sentence, tt.sentence)
			}
			if tt.warning != "" && !strings.Contains(strings.Join(a.Warnings, "\n"), tt.warning) {
				t.Errorf("Warnings = %q, want one containing %q", a.Warnings, tt.warning)
			}
			if tt.warning == "" && len(a.Warnings) > 0 {
				t.Errorf("Warnings = %q, want none", a.Warnings)
			}
			if tt.top == "" {
				if len(a.Terms) != 0 || a.R2 != 0 {
					t.Errorf("Terms, R2 = %+v, %g, want none", a.Terms, a.R2)
				}
				return
			}
			if len(a.Terms) != len(tt.terms) {
				t.Fatalf("Terms = %+v, want %v", a.Terms, tt.terms)
			}
			for i, name := range tt.terms {
				if a.Terms[i].Name != name {
					t.Errorf("Terms[%d] = %q, want %q", i, a.Terms[i].Name, name)
				}
			}
			top := a.Terms[0]
			if top.Share < tt.minTop {
				t.Errorf("%s share = %.1f %%, want at least %g", top.Name, top.Share, tt.minTop)
			}
			if a.R2 < tt.minR2 {
				t.Errorf("R2 = %.3f, want at least %g", a.R2, tt.minR2)
			}
			if tt.coef != 0 && math.Abs(top.Coef-tt.coef) > 0.05*tt.coef {
				t.Errorf("%s coefficient = %.3f, want %g ± 5 %%", top.Name, top.Coef, tt.coef)
			}
			// LMG shares add up to the whole R².
			var sum float64
			for _, term := range a.Terms {
				sum += term.Share
			}
			if math.Abs(sum-100*a.R2) > 1e-6 {
				t.Errorf("shares add up to %.6f, want 100·R2 = %.6f", sum, 100*a.R2)
			}
		})
	}
}

// TestAttributeSelectsTicks checks that ticks without completions or without
// a host sample are not fitted.
func TestAttributeSelectsTicks(t *testing.T) {
	ticks := gen(20, 10, func(rng *rand.Rand) synth {
		steal := 20 * rng.Float64()
		return synth{steal: steal, p95: 2 * steal}
	})
	ticks = append(ticks, tare.Tick{Completions: 0, Host: &tare.HostSample{}}, tare.Tick{Completions: 5, P95: time.Hour})
	if a := Attribute(ticks); a.Ticks != 20 {
		t.Errorf("Ticks = %d, want 20", a.Ticks)
	}
}

// TestAttributeFromRecorder runs the whole path: a recorder whose latency
// grows with the steal of its ticks attributes it to steal.
func TestAttributeFromRecorder(t *testing.T) {
	r := newRecorder(t, Config{})
	rng := rand.New(rand.NewPCG(11, 1))
	for k := range 40 {
		steal := 30 * rng.Float64()
		for j := range 50 {
			from := float64(k) + float64(j)/100
			r.AddResult(result(from, 0, 20+4*steal*rng.Float64()))
		}
		r.AddHost(sample(float64(k), float64(k+1), steal))
	}
	a := Attribute(r.Ticks())
	if len(a.Terms) == 0 || a.Terms[0].Name != TermSteal || a.Terms[0].Share < 80 {
		t.Errorf("Attribute = %+v, want steal dominant", a)
	}
}
