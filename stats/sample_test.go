package stats

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestInSystemAndSample checks the two figures the latency signal reads,
// on the run of TestTicks worked out by hand:
//
//	tick    0         1         2         3
//	A     [0.1-0.3]
//	B     [0.5 ─────────────────2.2] error
//	D               [1.5-1.9]
//	E                         [2.5 ──────3.5]   8 output tokens
//
// In the system: tick 0 has A 0.2 s and B 0.5 s, tick 1 B whole and D
// 0.4 s, tick 2 B 0.2 s and E 0.5 s, tick 3 E 0.5 s. The sample holds the
// requests that succeeded, in the tick they finished in, E per token, each
// divided by the requests in the system during its life: D shared it with
// B all along (2), A and E had it to themselves (1). B failed: it is not
// in the sample, but it did share the system.
func TestInSystemAndSample(t *testing.T) {
	r := newRecorder(t, Config{})
	a, b, d, e := span(0.1, 0.3), span(0.5, 2.2), span(1.5, 1.9), span(2.5, 3.5)
	b.Err = "timeout"
	e.OutputTokens = 8
	for _, res := range []*tare.Result{a, d, b, e} {
		r.AddResult(res)
	}
	ticks := r.Ticks()
	inSystem := []float64{0.7, 1.4, 0.7, 0.5}
	samples := [][]time.Duration{{msd(200)}, {msd(400) / 2}, nil, {msd(1000) / 8}}
	if len(ticks) != len(inSystem) {
		t.Fatalf("len(Ticks()) = %d, want %d", len(ticks), len(inSystem))
	}
	for i, g := range ticks {
		if math.Abs(g.InSystem-inSystem[i]) > 1e-9 {
			t.Errorf("tick %d InSystem = %g, want %g", i, g.InSystem, inSystem[i])
		}
		if !slices.Equal(g.Sample, samples[i]) {
			t.Errorf("tick %d Sample = %v, want %v", i, g.Sample, samples[i])
		}
	}
	// TicksBetween leaves the sample out: it streams ticks to the store.
	if s := r.TicksBetween(0, 4)[0].Sample; s != nil {
		t.Errorf("TicksBetween Sample = %v, want nil", s)
	}
}

// TestInSystemIsLittlesLaw: over a run of many requests spanning ticks of
// every kind, the time in the system summed over the ticks is the sum of
// the latencies (Little's law, tick by tick), and a request spanning many
// ticks counts whole in each.
func TestInSystemIsLittlesLaw(t *testing.T) {
	r := newRecorder(t, Config{Tick: 100 * time.Millisecond})
	var total time.Duration
	for i := range 500 {
		from := float64(i) * 0.013
		to := from + 0.001 + float64(i%37)*0.021
		r.AddResult(span(from, to))
		total += sec(to).Sub(sec(from))
	}
	r.AddResult(span(1, 3)) // 20 ticks: 10..29 whole
	total += 2 * time.Second
	sum := 0.0
	ticks := r.Ticks()
	for _, g := range ticks {
		sum += g.InSystem * 0.1
	}
	if math.Abs(sum-total.Seconds()) > 1e-6 {
		t.Errorf("sum of InSystem × tick = %g s, want the sum of latencies %g s", sum, total.Seconds())
	}
	for k := 10; k < 30; k++ {
		if ticks[k].InSystem < 1 {
			t.Errorf("tick %d InSystem = %g, want at least 1: the 2 s request spans it", k, ticks[k].InSystem)
		}
	}
}

// TestSampleIsBounded: a run larger than SampleSize keeps SampleSize
// values, spread over its ticks in proportion to their requests.
func TestSampleIsBounded(t *testing.T) {
	r := newRecorder(t, Config{})
	// 40 ticks; ticks 20..39 have three times the requests of 0..19.
	n := 0
	for k := range 40 {
		per := 500
		if k >= 20 {
			per = 1500
		}
		for j := range per {
			at := float64(k) + float64(j)/float64(per)
			r.AddResult(result(at, 0, 1))
			n++
		}
	}
	low, high := 0, 0
	for k, g := range r.Ticks() {
		if k < 20 {
			low += len(g.Sample)
		} else {
			high += len(g.Sample)
		}
	}
	if low+high != SampleSize {
		t.Fatalf("sample holds %d values of %d requests, want %d", low+high, n, SampleSize)
	}
	// Three times as many requests: about three times the share (a
	// binomial draw of 8,192 at p = 3/4 has a standard deviation of 39).
	if want := SampleSize * 3 / 4; math.Abs(float64(high-want)) > 5*39 {
		t.Errorf("ticks 20..39 hold %d of %d sampled values, want about %d", high, SampleSize, want)
	}
}

// TestSharedBy checks how many requests shared the system with each
// request (the harmonic mean of their number over its life) on spans
// worked out by hand, and its estimate from a sample: the others scaled
// up by the requests seen per request kept.
//
//	a  [0 ──────── 4)
//	b      [1 ── 3)
//	c          [2 ──────── 6)
//	d                          [7 ─ 8)
func TestSharedBy(t *testing.T) {
	s := func(from, to float64) sampled {
		return sampled{from: time.Duration(from * float64(time.Second)), to: time.Duration(to * float64(time.Second)), ok: true}
	}
	r := reservoir{reservoirOf[sampled]{seen: 4, items: []sampled{s(0, 4), s(1, 3), s(2, 6), s(7, 8)}}}
	// a: 1, 2, 3, 2 requests over its four seconds: 4 / (1 + 1/2 + 1/3 +
	// 1/2) = 12/7. b: 2, 3: 2 / (1/2 + 1/3) = 12/5. c: 3, 2, 1, 1:
	// 4 / (1/3 + 1/2 + 2) = 24/17. d: alone.
	check := func(name string, got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Errorf("%s: sharedBy = %v, want %v", name, got, want)
				return
			}
		}
	}
	check("all kept", r.sharedBy(), []float64{12.0 / 7, 12.0 / 5, 24.0 / 17, 1})
	// Half the requests kept: each other counts twice, N = 1 + 2·others.
	// a: 1, 3, 5, 3: 4 / (1 + 1/3 + 1/5 + 1/3) = 15/7; b: 3, 5: 2 / (1/3 +
	// 1/5) = 15/4; c: 5, 3, 1, 1: 4 / (1/5 + 1/3 + 2) = 30/19.
	r.seen = 8
	check("half kept", r.sharedBy(), []float64{15.0 / 7, 15.0 / 4, 30.0 / 19, 1})
	// A request of no length (a clock read out of order is recorded as
	// one) shares nothing and breaks no count.
	r = reservoir{reservoirOf[sampled]{seen: 3, items: []sampled{s(0, 4), s(2, 2), s(1, 3)}}}
	check("no length", r.sharedBy(), []float64{4.0 / 3, 1, 2})
}
