package session

import (
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/internal/testkit/abservice"
	"github.com/tare-dev/tare/internal/testkit/interfere"
)

// abDrivers are the drivers of two variants, a and b (URLs), at rate,
// trials of trial, judged with thresholds deaf to the host (what these
// tests judge is B against A).
func abDrivers(t *testing.T, a, b string, rate float64, trial time.Duration) (*Driver, *Driver) {
	t.Helper()
	driver := func(url string) *Driver {
		spec := NewSpec(0, 0, 0)
		spec.Target.URL = url
		spec.Load.Rate, spec.Load.Duration, spec.Load.DurationDefault = arrival.Rate(rate), trial, false
		spec.Host.Tick = 250 * time.Millisecond
		spec.Judge.Thresholds = deafToTheHost()
		p, err := Prepare(t.Context(), spec, "tare ab")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Release)
		return &Driver{Prepared: p, Version: "test"}
	}
	return driver(a), driver(b)
}

// TestABTellsTheSlowerVariant: against real loopback services whose
// every answer costs CPU, B with five times A's work (a difference far
// beyond a busy shared host's noise) is found slower on p50, its
// interval clear of 1, interleaved and in duet; A against
// itself shows no difference (or none beyond 10 %; measured once more
// when it does, since six pairs say so by chance 3 % of the time), and a --precision
// of ±1000 % stops it at the fewest pairs; each pair runs one side first,
// in turns balanced over every two pairs.
func TestABTellsTheSlowerVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 44 trials of real load: not with -short")
	}
	interfere.Exclusive(t) // the figures are latencies on this host
	units := abservice.UnitsFor(time.Millisecond)
	a, b := abservice.Start(2*units), abservice.Start(10*units)
	defer a.Close()
	defer b.Close()
	for _, tt := range []struct {
		name  string
		b     string
		mode  string
		share int     // of the rate each variant runs at
		prec  float64 // --precision
		pairs int     // the pairs run
		want  func(ab *tare.AB) bool
		// chance: want can fail by chance alone (A against itself: all
		// six pairs lean one way in 2 of 64 sign patterns, 3 %), so a
		// miss is measured once more, with another seed, and fails only
		// if that misses too.
		chance bool
	}{
		{"B slower", b.URL, tare.ABInterleaved, 1, 0, 8, func(ab *tare.AB) bool {
			return ab.Result == tare.ABSlower
		}, false},
		{"A against itself, stopped at the precision", a.URL, tare.ABInterleaved, 1, 1000, 6, func(ab *tare.AB) bool {
			r := ab.Ratios[0]
			return ab.Result != tare.ABSlower && ab.Result != tare.ABFaster || *r.RatioLow > 0.9 && *r.RatioHigh < 1.1
		}, true},
		{"B slower, duet", b.URL, tare.ABDuet, 2, 0, 8, func(ab *tare.AB) bool {
			return ab.Result == tare.ABSlower
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			da, db := abDrivers(t, a.URL, tt.b, 100, time.Second)
			ab := AB{A: da, B: db, Mode: tt.mode, Pairs: 8, Precision: tt.prec, On: "p50", Seed: 3, Run: tare.Run{Label: "ab-test"}}
			got, err := ab.Measure(t.Context())
			if err == nil && tt.chance && !tt.want(&got) {
				t.Logf("%s: %s; measured once more, with another seed", got.Result, got.Verdict)
				ab.Seed = 4
				got, err = ab.Measure(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range got.Pairs {
				t.Logf("pair %d first %q: p50 A %.2f B %.2f, verdicts %s/%s", p.N, p.First, *p.A.Latency.P50, *p.B.Latency.P50, p.A.Verdict, p.B.Verdict)
			}
			t.Logf("%s: %s", got.Result, got.Verdict)
			if len(got.Pairs) != tt.pairs || len(got.Ratios) < 3 || got.Ratios[0].Metric != "p50" || got.Ratios[0].Ratio == nil {
				t.Fatalf("%d pairs, ratios %+v: want %d pairs and p50, p95, p99", len(got.Pairs), got.Ratios, tt.pairs)
			}
			if !tt.want(&got) {
				t.Errorf("result %s, %s", got.Result, got.Verdict)
			}
			want := map[string]int{"a": tt.pairs / 2, "b": tt.pairs / 2}
			if tt.mode == tare.ABDuet {
				want = map[string]int{"": tt.pairs}
			}
			firsts := map[string]int{}
			for _, p := range got.Pairs {
				firsts[p.First]++
				if low := 100 / 2 / tt.share; p.A.Requests < low || p.B.Requests < low || p.A.StartedAt.IsZero() {
					t.Errorf("pair %d: %d and %d requests, want each trial a run of about %d", p.N, p.A.Requests, p.B.Requests, 100/tt.share)
				}
			}
			if len(firsts) != len(want) || firsts["a"] != want["a"] || firsts["b"] != want["b"] {
				t.Errorf("first sides %v, want %v", firsts, want)
			}
		})
	}
}

// TestABTrialSchedules: interleaved, both trials of a pair draw one
// schedule, so that its chance falls on both alike; in duet, the pair's
// schedule at the full rate is split between them, each at half the
// rate, never in step (the same schedule on both sent A's and B's
// requests at the same instants, to wait behind each other).
func TestABTrialSchedules(t *testing.T) {
	da, db := abDrivers(t, "http://127.0.0.1:1/a", "http://127.0.0.1:1/b", 100, 10*time.Second)
	arrivals := func(cfg Config) []time.Duration {
		var at []time.Duration
		for d, ok := cfg.Schedule.Next(); ok; d, ok = cfg.Schedule.Next() {
			at = append(at, d)
		}
		return at
	}
	for _, mode := range []string{tare.ABInterleaved, tare.ABDuet} {
		t.Run(mode, func(t *testing.T) {
			ab := AB{A: da, B: db, Mode: mode, Seed: 7}
			var duetA, duetB *Driver
			if mode == tare.ABDuet {
				duetA, duetB = db, da
			}
			cfgA, err := ab.trialWindow(da, duetA, "a", 1)
			if err != nil {
				t.Fatal(err)
			}
			cfgB, err := ab.trialWindow(db, duetB, "b", 1)
			if err != nil {
				t.Fatal(err)
			}
			a, b := arrivals(cfgA), arrivals(cfgB)
			shared := 0
			for _, at := range a {
				if _, found := slices.BinarySearch(b, at); found {
					shared++
				}
			}
			switch mode {
			case tare.ABInterleaved:
				if !slices.Equal(a, b) || cfgA.Rate != 100 || cfgB.Rate != 100 {
					t.Errorf("A's %d arrivals at %g/s, B's %d at %g/s: want one schedule at 100/s", len(a), cfgA.Rate, len(b), cfgB.Rate)
				}
			case tare.ABDuet:
				// Ten seconds at 50/s: 500 each, give or take a few sd.
				if shared > 0 || cfgA.Rate != 50 || cfgB.Rate != 50 || len(a) < 400 || len(a) > 600 || len(b) < 400 || len(b) > 600 {
					t.Errorf("A's %d arrivals at %g/s, B's %d at %g/s, %d at the same instants: want about 500 each at 50/s, none shared",
						len(a), cfgA.Rate, len(b), cfgB.Rate, shared)
				}
			}
		})
	}
}
