package report

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// probed is a run the scheduler probe measured: a neighbour,
// `nightly-batch`, holds the service up now and then from a third of the
// way in, a kernel thread rarely, the hypervisor steals for a few ticks,
// and tick 5 was not measured.
var probed = synth{seed: 21, ticks: 30, rate: 30, steal: [2]int{24, 27}, spike: -1, probe: true, label: "probed", slo: "p95<=40ms"}

// TestScatterGolden pins the chart of every request of a probed run: each
// request at its scheduled time and latency, in the class of what it
// overlapped, as stats.Overlaps says.
func TestScatterGolden(t *testing.T) {
	run, results := probed.build(t)
	html := render(t, Page{Runs: []*Run{run}})
	saveOut(t, "probed.html", html)
	var data pageData
	if err := json.Unmarshal(dataPart(t, html), &data); err != nil {
		t.Fatal(err)
	}
	charts := data.Runs[0].Charts
	i := slices.IndexFunc(charts, func(c *chartData) bool { return c.Kind == kindScatter })
	if i != 1 {
		t.Fatalf("the scatter is chart %d of %d, want the second, beside the latency per tick", i, len(charts))
	}
	c := charts[i]
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "scatter.golden.json", readable(t, raw))

	// Every request, each class present, each request once.
	// The fixture's waits behind a kworker class no request: kernel
	// threads are not neighbours.
	want := map[string]bool{"no outside wait": true, "not measured by the probe": true, "failed": true, "steal": true,
		"behind `nightly-batch`": true}
	n := 0
	for _, s := range c.Series {
		if !want[s.Name] {
			t.Errorf("series %q: not a class of the scatter", s.Name)
		}
		delete(want, s.Name)
		n += len(s.Points)
	}
	if len(want) > 0 {
		t.Errorf("classes missing: %v", want)
	}
	if n != len(results) {
		t.Errorf("%d dots, want one per request, %d", n, len(results))
	}
	if c.Points != 0 || !strings.Contains(c.Note, "5 %") {
		t.Errorf("a run of %d requests drawn whole: downsampled_from %d, note %q", len(results), c.Points, c.Note)
	}
}

// TestScatterNeedsTheProbe: a run whose ticks the probe measured none of
// (or whose caller gave no exposure) has no scatter.
func TestScatterNeedsTheProbe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exposure func(*tare.Result) (tare.Exposure, bool)
	}{
		{"no exposure given", nil},
		{"never measured", func(*tare.Result) (tare.Exposure, bool) { return tare.Exposure{}, false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, results := synth{seed: 4, ticks: 10, rate: 20, spike: -1}.build(t)
			again := NewRun(run.Summary, run.Ticks)
			again.Exposure = tc.exposure
			for i := range results {
				again.AddResult(&results[i])
			}
			if c := again.scatterChart("run1"); c != nil {
				t.Errorf("scatter %q drawn without the probe's waits", c.Title)
			}
		})
	}
}

// TestScatterKeepsTheTail: past maxDots, every request slower than the
// run's p95 is drawn, and a uniform sample of the others; when more are
// slower than p95 than half the dots, the slowest half are.
func TestScatterKeepsTheTail(t *testing.T) {
	const n = 60_000
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(9, 9))
	results := make([]tare.Result, n)
	lat := make([]float64, n)
	for i := range results {
		at := start.Add(time.Duration(i) * time.Millisecond)
		ms := 5 * math.Exp(0.8*rng.NormFloat64())
		results[i] = tare.Result{Seq: uint64(i), Scheduled: at, Sent: at, Done: at.Add(time.Duration(ms * float64(time.Millisecond)))}
		lat[i] = millis(results[i].Latency())
	}
	// The chart keeps latencies as float32: compare them as it does.
	f32 := func(v float64) float64 { return float64(float32(v)) }
	sorted := slices.Sorted(slices.Values(lat))
	rank := func(q float64) float64 { return sorted[int(math.Ceil(q*n))-1] }
	ticks := make([]tare.Tick, 60)
	for i := range ticks {
		ticks[i] = tare.Tick{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second)}
	}
	for _, tc := range []struct {
		name  string
		p95   float64 // as the summary gives it
		above float64 // every request slower than this is drawn
	}{
		{"p95", rank(0.95), rank(0.95)},
		// A summary p95 under which more than maxDots/2 lie: only the
		// slowest maxDots/2 can all be drawn.
		{"too many above p95", rank(0.5), f32(sorted[n-maxDots/2])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tare.Summary{Latency: tare.LatencyMS{P95: tare.Float(tc.p95)}}
			run := NewRun(s, ticks)
			run.Exposure = func(*tare.Result) (tare.Exposure, bool) { return tare.Exposure{}, true }
			for i := range results {
				run.AddResult(&results[i])
			}
			c := run.scatterChart("run1")
			drawn := map[point]int{}
			total, below := 0, 0
			for _, s := range c.Series {
				for _, p := range s.Points {
					drawn[p]++
					total++
					if p.Y <= tc.above {
						below++
					}
				}
			}
			if total > maxDots || c.Points != n {
				t.Errorf("%d dots drawn of %d (downsampled_from %d), want at most %d", total, n, c.Points, maxDots)
			}
			missed := 0
			for i := range results {
				if f32(lat[i]) <= tc.above {
					continue
				}
				if drawn[point{f32(results[i].Scheduled.Sub(start).Seconds()), f32(lat[i])}] == 0 {
					missed++
				}
			}
			if missed > 0 {
				t.Errorf("%d requests slower than %.3g ms not drawn", missed, tc.above)
			}
			// The rest fills the chart, a uniform sample: as many before
			// the middle of the run as after it (binomial, 5 sd).
			if total != maxDots {
				t.Errorf("%d dots drawn, want the chart filled: %d", total, maxDots)
			}
			early := 0
			for _, s := range c.Series {
				for _, p := range s.Points {
					if p.Y <= tc.above && p.X < 30 {
						early++
					}
				}
			}
			if want, sd := float64(below)/2, math.Sqrt(float64(below))/2; math.Abs(float64(early)-want) > 5*sd {
				t.Errorf("%d of the %d requests drawn from those under %.3g ms were in the first half of the run, want about %.0f", early, below, tc.above, want)
			}
			if i := slices.IndexFunc(c.Marks, func(m markData) bool { return m.Color == colThreshold }); i < 0 || math.Abs(c.Marks[i].Value-tc.above) > 1e-3 {
				t.Errorf("marks %+v: want the line above which every request is drawn at %.4g", c.Marks, tc.above)
			}
		})
	}
}
