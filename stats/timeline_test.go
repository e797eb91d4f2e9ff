package stats

import (
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestTicks feeds a small run in the order a consumer would see it (results
// at their Done, host samples at their End, with jitter) and checks every
// tick against values worked out by hand:
//
//	tick    0         1         2         3         4
//	A     [0.1-0.3]
//	B     [0.5 ─────────────────2.2] error
//	C               1.2 dropped
//	D               [1.5-1.9]
//	E                         [2.5 ──────3.5]
//	host  [.05 - 1.05][1.05-1.95][1.95 - 3.02][3.02-4][4-4.5 + 4.5-5]
func TestTicks(t *testing.T) {
	r := newRecorder(t, Config{})
	a, b, d, e := span(0.1, 0.3), span(0.5, 2.2), span(1.5, 1.9), span(2.5, 3.5)
	b.Err = "timeout"
	r.AddDepth(sec(0.2), 4)
	r.AddDepth(sec(0.7), 6)
	r.AddResult(a)
	h0 := sample(0.05, 1.05, 1)
	h0.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 1}, {CPU: 1, Steal: 1}}
	r.AddHost(h0)
	r.AddResult(&tare.Result{Scheduled: sec(1.2), Dropped: true})
	r.AddResult(d)
	r.AddHost(sample(1.05, 1.95, 2)) // early: midpoint 1.5 is still tick 1
	r.AddResult(b)
	r.AddHost(sample(1.95, 3.02, 3)) // midpoint 2.485: tick 2
	r.AddResult(e)
	r.AddHost(sample(3.02, 4, 4))
	h41 := sample(4, 4.5, 10)
	h41.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 10}, {CPU: 1, Steal: 10}}
	h41.PSISome = tare.Float(2)
	h42 := sample(4.5, 5, 30)
	h42.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 20}, {CPU: 1, Steal: 40}}
	r.AddHost(h41)
	r.AddHost(h42)

	ticks := r.Ticks()
	type want struct {
		arrivals, completions, errors, dropped, inFlight int
		p                                                time.Duration // p50 = p95 = p99: one completion per tick
		depth                                            *float64
		steal                                            float64
		hostStart                                        float64
		hostEnd                                          float64
	}
	wants := []want{
		{arrivals: 2, completions: 1, inFlight: 1, p: 200 * time.Millisecond, depth: tare.Float(5), steal: 1, hostStart: 0.05, hostEnd: 1.05},
		{arrivals: 2, completions: 1, dropped: 1, inFlight: 1, p: 400 * time.Millisecond, steal: 2, hostStart: 1.05, hostEnd: 1.95},
		{arrivals: 1, completions: 1, errors: 1, inFlight: 1, p: 1700 * time.Millisecond, steal: 3, hostStart: 1.95, hostEnd: 3.02},
		{completions: 1, p: time.Second, steal: 4, hostStart: 3.02, hostEnd: 4},
		{steal: 20, hostStart: 4, hostEnd: 5},
	}
	if len(ticks) != len(wants) {
		t.Fatalf("len(Ticks()) = %d, want %d", len(ticks), len(wants))
	}
	for i, w := range wants {
		g := ticks[i]
		if !g.Start.Equal(sec(float64(i))) || !g.End.Equal(sec(float64(i+1))) {
			t.Errorf("tick %d spans %v..%v, want %v..%v", i, g.Start, g.End, sec(float64(i)), sec(float64(i+1)))
		}
		got := [5]int{g.Arrivals, g.Completions, g.Errors, g.Dropped, g.InFlight}
		if exp := [5]int{w.arrivals, w.completions, w.errors, w.dropped, w.inFlight}; got != exp {
			t.Errorf("tick %d arrivals, completions, errors, dropped, in-flight = %v, want %v", i, got, exp)
		}
		// Per-tick histograms keep two significant figures: within 1 %.
		for _, p := range []time.Duration{g.P50, g.P95, g.P99} {
			if p < w.p || p > w.p+w.p/100 {
				t.Errorf("tick %d percentiles = %v %v %v, want %v", i, g.P50, g.P95, g.P99, w.p)
				break
			}
		}
		switch {
		case w.depth == nil && g.QueueDepth != nil:
			t.Errorf("tick %d QueueDepth = %g, want nil", i, *g.QueueDepth)
		case w.depth != nil:
			near(t, "queue depth", g.QueueDepth, *w.depth, 0)
		}
		if g.Host == nil {
			t.Errorf("tick %d Host = nil, want the sample from %gs", i, w.hostStart)
			continue
		}
		if d := g.Host.CPU.Steal - w.steal; d > 1e-9 || d < -1e-9 {
			t.Errorf("tick %d steal = %g, want %g", i, g.Host.CPU.Steal, w.steal)
		}
		if !g.Host.Start.Equal(sec(w.hostStart)) || !g.Host.End.Equal(sec(w.hostEnd)) {
			t.Errorf("tick %d host spans %v..%v, want %gs..%gs", i, g.Host.Start, g.Host.End, w.hostStart, w.hostEnd)
		}
	}
	// The two half-tick samples of tick 4 merge CPU by CPU; PSI came in
	// one of them only and keeps its figure.
	h := ticks[4].Host
	if got := []float64{h.PerCPU[0].Steal, h.PerCPU[1].Steal}; !slices.Equal(got, []float64{15, 25}) {
		t.Errorf("tick 4 per-CPU steal = %v, want [15 25]", got)
	}
	near(t, "tick 4 psi", h.PSISome, 2, 0)

	// Ticks returns copies: changing them does not change the recorder.
	ticks[0].Host.PerCPU[0].Steal = 99
	*ticks[4].Host.PSISome = 99
	again := r.Ticks()
	if again[0].Host.PerCPU[0].Steal != 1 || *again[4].Host.PSISome != 2 {
		t.Error("changing the result of Ticks changed the recorder")
	}
}

// TestTickClosing checks that closed ticks keep their percentiles, give
// their histogram back, and that a late result is counted but left out of
// its tick's percentiles.
func TestTickClosing(t *testing.T) {
	r := newRecorder(t, Config{})
	for i := range 10 {
		r.AddResult(span(float64(i)+0.1, float64(i)+0.2)) // 100 ms in each of ticks 0..9
	}
	// Newest is 9.2 s: ticks before the one holding 7.2 s are closed.
	if r.firstOpen != 7 {
		t.Fatalf("firstOpen = %d, want 7", r.firstOpen)
	}
	open := 0
	for k, tk := range r.ticks {
		if tk.hist != nil {
			open++
			if k < r.firstOpen {
				t.Errorf("tick %d is closed but kept its histogram", k)
			}
		}
	}
	// Closed histograms are reused by the next ticks: only the grace
	// window's worth was ever allocated.
	if open != 3 || len(r.free) != 1 {
		t.Errorf("open histograms = %d, free = %d, want 3 and 1", open, len(r.free))
	}
	r.AddResult(span(1.0, 1.9)) // 900 ms, finishing in closed tick 1: late
	ticks := r.Ticks()
	if ticks[1].Completions != 2 {
		t.Errorf("tick 1 Completions = %d, want 2 (the late one counts)", ticks[1].Completions)
	}
	if p := ticks[1].P99; p < 100*time.Millisecond || p > 101*time.Millisecond {
		t.Errorf("tick 1 P99 = %v, want 100ms: the late result is not in it", p)
	}
	if r.lateResults != 1 {
		t.Errorf("lateResults = %d, want 1", r.lateResults)
	}
	s := r.Summary(sec(10), 10*time.Second)
	near(t, "run-wide max", s.Latency.Max, 900, 0)
}

// TestCleanTicks checks clean-tick percentiles over a timeline where ticks
// 3–5 are polluted, each by a different signal, and tick 8 has no sample.
func TestCleanTicks(t *testing.T) {
	type req struct {
		from, to float64
		clean    bool
	}
	reqs := []req{
		{0.1, 0.5, true},
		{1.5, 2.9, true},
		{2.5, 3.1, false}, // ends in polluted tick 3
		{2.9, 6.2, false}, // spans 3–5
		{4.2, 4.8, false},
		{5.9, 6.1, false}, // starts in polluted tick 5
		{6.1, 7.5, true},
		{7.1, 7.2, true},
		{7.5, 8.3, false}, // tick 8 cannot vouch for it
		{9.0, 9.3, true},
		{9.5, 9.99, true},
	}
	var want []time.Duration
	for _, q := range reqs {
		if q.clean {
			want = append(want, sec(q.to).Sub(sec(q.from)))
		}
	}
	slices.Sort(want)

	samples := make([]tare.HostSample, 10)
	for k := range samples {
		samples[k] = sample(float64(k), float64(k+1), 1)
	}
	samples[3].CPU.Steal = 30
	samples[4].Throttled = tare.Float(20)
	// Waiting behind a neighbour: 30 % run delay × 60 / (60 + 20) = 22.5 %.
	samples[5].RunDelay = tare.Float(30)
	samples[5].CPUBy = &tare.CPUBy{SystemUnderTest: 20, Others: 60, Idle: 20}
	samples[7].PSISome = tare.Float(40)   // CPU pressure alone pollutes nothing
	samples[6].Throttled = tare.Float(10) // at the threshold, not above: clean

	feeds := []struct {
		name string
		feed func(r *Recorder)
	}{
		{
			// Results at their Done, each sample at its End: the live order.
			name: "interleaved",
			feed: func(r *Recorder) {
				next := 0
				for _, q := range reqs {
					for next < len(samples) && samples[next].End.Before(sec(q.to)) {
						if next != 8 {
							r.AddHost(samples[next])
						}
						next++
					}
					r.AddResult(span(q.from, q.to))
				}
				for ; next < len(samples); next++ {
					r.AddHost(samples[next])
				}
			},
		},
		{
			// Every sample before any result, with a grace covering the run:
			// how a stored run is replayed.
			name: "replayed",
			feed: func(r *Recorder) {
				for k, s := range samples {
					if k != 8 {
						r.AddHost(s)
					}
				}
				for _, q := range reqs {
					r.AddResult(span(q.from, q.to))
				}
			},
		},
	}
	for _, f := range feeds {
		t.Run(f.name, func(t *testing.T) {
			cfg := Config{}
			if f.name == "replayed" {
				cfg.Grace = time.Hour
			}
			r := newRecorder(t, cfg)
			f.feed(r)
			c := r.Summary(sec(10), 10*time.Second).CleanLatency
			if c == nil {
				t.Fatal("CleanLatency = nil, want figures")
			}
			if c.Requests != len(want) {
				t.Errorf("clean Requests = %d, want %d", c.Requests, len(want))
			}
			// Ranks over 6 values: p50 → 3rd, p95 and p99 → 6th.
			near(t, "clean p50", c.P50, ms(want[2]), hdrTol)
			near(t, "clean p95", c.P95, ms(want[5]), hdrTol)
			near(t, "clean p99", c.P99, ms(want[5]), hdrTol)
			near(t, "polluted ticks", r.Summary(sec(10), 10*time.Second).Host.PollutedTicksPct, 100*3.0/9, 0.001)
		})
	}
}

// TestPendingStaysSmall checks that the clean-tick buffer holds only the
// requests of the grace window, not the run.
func TestPendingStaysSmall(t *testing.T) {
	r := newRecorder(t, Config{})
	maxPending := 0
	for i := range 10_000 { // 100 per tick over 100 ticks
		from := float64(i) / 100
		r.AddResult(span(from, from+0.005))
		if i%100 == 99 {
			k := float64(i / 100)
			r.AddHost(sample(k, k+1, 1))
		}
		maxPending = max(maxPending, len(r.pending))
	}
	// Grace 2 s plus the open tick: at most about 300 requests wait.
	if maxPending > 400 {
		t.Errorf("pending grew to %d, want at most ~300 (the grace window)", maxPending)
	}
	c := r.Summary(sec(100), 100*time.Second).CleanLatency
	if c == nil || c.Requests != 10_000 {
		t.Errorf("CleanLatency = %+v, want all 10000 requests clean", c)
	}
}

func TestTicksBetweenMatchesTicks(t *testing.T) {
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	r, err := NewRecorder(Config{Start: start, Tick: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		s := start.Add(time.Duration(i) * 150 * time.Millisecond)
		r.AddResult(&tare.Result{Seq: uint64(i), Scheduled: s, Sent: s, Done: s.Add(time.Duration(i%7) * 400 * time.Millisecond)})
	}
	all := r.Ticks()
	for _, span := range [][2]int{{0, len(all)}, {2, 5}, {3, 3}, {4, 1000}, {-1, 2}} {
		got := r.TicksBetween(span[0], span[1])
		from, to := max(span[0], 0), min(span[1], len(all))
		if len(got) != max(to-from, 0) {
			t.Fatalf("TicksBetween(%d, %d): %d ticks, want %d", span[0], span[1], len(got), max(to-from, 0))
		}
		for i, tk := range got {
			if w := all[from+i]; tk.InFlight != w.InFlight || tk.Completions != w.Completions || tk.P95 != w.P95 || !tk.Start.Equal(w.Start) {
				t.Errorf("TicksBetween(%d, %d)[%d] = %+v, want %+v", span[0], span[1], i, tk, w)
			}
		}
	}
}
