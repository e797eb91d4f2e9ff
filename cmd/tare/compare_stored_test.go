package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// window is a stored run made for a comparison: requests at rate a
// second, each taking latency(r) ms, sent sendLag ms late, on a host whose
// ledger each second holds the neighbours (% of all its CPU time), steal
// and the measured processes' run delay.
type window struct {
	name       string
	requests   int
	rate       float64
	seed       uint64
	latency    func(r *rand.Rand) float64
	sendLag    float64
	steal      float64
	runDelay   float64
	neighbours []tare.ProcessShare
}

// windowStart is when each window ran: its hours, on two days.
var windowStart = map[string]time.Time{
	tare.WindowPeak:    time.Date(2026, 11, 30, 14, 30, 0, 0, time.UTC),
	tare.WindowOffpeak: time.Date(2026, 12, 1, 2, 30, 0, 0, time.UTC),
	tare.WindowMid:     time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC),
}

// lognormal draws latencies log-normal about median ms.
func lognormal(median, sigma float64) func(r *rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return median * math.Exp(sigma*r.NormFloat64()) }
}

// spiky draws most latencies in base … base+spread ms, and one in
// every 1/p in spike … spike+spread ms: a service whose rare slow
// requests are its own, the same in every window.
func spiky(base, spike, spread, p float64) func(r *rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		if r.Float64() < p {
			return spike + spread*r.Float64()
		}
		return base + spread*r.Float64()
	}
}

// storeWindows writes the windows into a SQLite store at db as the runs of
// protocol id, with their raw records, ticks and summaries, as tare
// protocol would: summarised by the stats recorder and judged.
func storeWindows(t *testing.T, db, id string, windows ...window) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th := judge.DefaultThresholds()
	env := tare.Env{Hostname: "host", VCPUs: 2, ClkTck: 100, Cgroup: "v2", PSI: true}
	for i, w := range windows {
		start := windowStart[w.name]
		run := tare.Run{ID: fmt.Sprintf("01a2%04d-0000-7000-8000-0000000000%02d", i, i), Label: "checkout", Window: w.name, Protocol: id,
			Target: "GET http://127.0.0.1:8080/", Arrival: fmt.Sprintf("constant %g/s", w.rate), StartedAt: start, Status: tare.StatusRunning}
		if err := st.CreateRun(ctx, run, env); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(w.seed, 7))
		results := make([]tare.Result, w.requests)
		end := start
		for k := range results {
			sched := start.Add(time.Duration(float64(k) / w.rate * float64(time.Second)))
			sent := sched.Add(time.Duration(w.sendLag * float64(time.Millisecond)))
			done := sent.Add(time.Duration(w.latency(r) * float64(time.Millisecond)))
			results[k] = tare.Result{Seq: uint64(k), Scheduled: sched, Sent: sent, Done: done, Status: 200}
			if done.After(end) {
				end = done
			}
		}
		rec, err := stats.NewRecorder(stats.Config{Start: start, Grace: end.Sub(start) + time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for k := range results {
			rec.AddResult(&results[k])
		}
		others := 0.0
		for _, p := range w.neighbours {
			others += p.CPUPct
		}
		for s := 0; start.Add(time.Duration(s) * time.Second).Before(end); s++ {
			from := start.Add(time.Duration(s) * time.Second)
			busy := 12 + others + 1
			shares := tare.CPUShares{CPU: -1, User: busy - 1, System: 1, Steal: w.steal, Idle: 100 - busy - w.steal}
			cpu0, cpu1 := shares, shares
			cpu0.CPU, cpu1.CPU = 0, 1
			rec.AddHost(tare.HostSample{
				Start: from, End: from.Add(time.Second), CPU: shares, PerCPU: []tare.CPUShares{cpu0, cpu1},
				PSISome: tare.Float(w.runDelay), Throttled: tare.Float(0), RunDelay: tare.Float(w.runDelay),
				SUTRunDelay: tare.Float(w.runDelay), TareRunDelay: tare.Float(w.runDelay),
				CPUBy: &tare.CPUBy{SystemUnderTest: 10, Tare: 2, Others: others, Kernel: 1, Steal: w.steal, Idle: 100 - busy - w.steal,
					TopOthers: append([]tare.ProcessShare(nil), w.neighbours...)},
			})
		}
		ticks := rec.Ticks()
		s := rec.Summary(end, time.Duration(float64(w.requests)/w.rate*float64(time.Second)))
		s.Run, s.Env, s.Thresholds = run, env, th.Map()
		s.Run.Status, s.Run.EndedAt = tare.StatusComplete, end
		s.Verdict = judge.Judge(&s, ticks, th, nil)
		if err := st.AppendResults(ctx, run.ID, results); err != nil {
			t.Fatal(err)
		}
		if err := st.AppendTicks(ctx, run.ID, ticks); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// compareStored compares protocol id in db, as text and as JSON.
func compareStored(t *testing.T, db, id string) (string, tare.Comparison) {
	t.Helper()
	code, stdout, stderr := tareCmd(t, "compare", "--db", db, id)
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	code, js, stderr := tareCmd(t, "compare", "--db", db, id, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d; stderr %s", code, stderr)
	}
	var c tare.Comparison
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	return stdout, c
}

func verdictOf(t *testing.T, c tare.Comparison, metric string) tare.MetricVerdict {
	t.Helper()
	for _, m := range c.Verdict.Metrics {
		if m.Metric == metric {
			return m
		}
	}
	t.Fatalf("no verdict on %s in %+v", metric, c.Verdict.Metrics)
	return tare.MetricVerdict{}
}

// TestCompareWindows: stored windows made for each case the comparison
// must tell apart, compared as tare compare does (records streamed from
// the store, tested, judged, printed).
func TestCompareWindows(t *testing.T) {
	backup := []tare.ProcessShare{{Name: "backup", PID: 4711, CPUPct: 15.5}}
	tests := []struct {
		name    string
		windows []window
		check   func(t *testing.T, out string, c tare.Comparison)
	}{{
		// A host 35 % slower at peak, on 3,000 requests a window: beyond
		// noise, host-variable, with the interval.
		name: "compare-35pct",
		windows: []window{
			{name: "peak", requests: 3000, rate: 50, seed: 1, latency: lognormal(13.5, 0.3), steal: 8, runDelay: 12},
			{name: "offpeak", requests: 3000, rate: 50, seed: 2, latency: lognormal(10, 0.3), steal: 0.5, runDelay: 2},
		},
		check: func(t *testing.T, out string, c tare.Comparison) {
			p95 := verdictOf(t, c, "p95")
			if c.Verdict.Level != tare.HostVariable || p95.Status != tare.MetricDiverged || p95.A != "peak" ||
				!(*p95.RatioLow > 1.2 && *p95.RatioHigh < 1.5) || p95.RequestsA != 3000 {
				t.Errorf("level %s, p95 %+v; want host-variable on p95 ×1.35 in peak, its interval within ×1.2 … ×1.5 on 3,000 requests", c.Verdict.Level, p95)
			}
			for _, want := range []string{"higher in peak than in offpeak", "interval ×1.", "on 3,000 and 3,000 requests", "steal took 8.0% of the host's CPU against 0.5% in offpeak"} {
				if !strings.Contains(c.Verdict.Advice[0], want) {
					t.Errorf("advice %q lacks %q", c.Verdict.Advice[0], want)
				}
			}
		},
	}, {
		// One service, whose rare slow requests (0.80-0.85 ms against
		// 0.15-0.20 ms, one in 67) fell more often in one window of 300
		// requests than in the other, by chance: its p99 diverges by 300 %,
		// by less than the latency floor. Not the host.
		name: "compare-chance-sub-ms",
		windows: []window{
			{name: "peak", requests: 300, rate: 50, seed: 3, latency: spiky(0.15, 0.8, 0.05, 0.015)},
			{name: "offpeak", requests: 300, rate: 50, seed: 4, latency: spiky(0.15, 0.8, 0.05, 0.015)},
		},
		check: func(t *testing.T, out string, c tare.Comparison) {
			if d := c.DivergencePct.P99; d == nil || *d < 300 {
				t.Fatalf("p99 diverges by %v: the fixture must diverge by 300 %% or more by chance", show(d))
			}
			if c.Verdict.Level == tare.HostVariable || verdictOf(t, c, "p99").Status != tare.MetricBelowFloor {
				t.Errorf("level %s, p99 %+v; want not host-variable: below the latency floor", c.Verdict.Level, verdictOf(t, c, "p99"))
			}
		},
	}, {
		// The same ten times slower: above the floor, but on 300 requests
		// the interval of p99 includes no difference: too little data,
		// with how many to run.
		name: "compare-chance-ms",
		windows: []window{
			{name: "peak", requests: 300, rate: 50, seed: 3, latency: spiky(1.5, 8, 0.5, 0.015)},
			{name: "offpeak", requests: 300, rate: 50, seed: 4, latency: spiky(1.5, 8, 0.5, 0.015)},
		},
		check: func(t *testing.T, out string, c tare.Comparison) {
			if d := c.DivergencePct.P99; d == nil || *d < 300 {
				t.Fatalf("p99 diverges by %v: the fixture must diverge by 300 %% or more by chance", show(d))
			}
			n := c.Verdict.Need
			if c.Verdict.Level != tare.Inconclusive || verdictOf(t, c, "p99").Status != tare.MetricTooLittleData || n == nil || n.RequestsPerWindow < 600 {
				t.Errorf("level %s, p99 %+v, need %+v; want inconclusive: too little data, and at least twice the 300 requests a window", c.Verdict.Level, verdictOf(t, c, "p99"), n)
			}
			if !strings.Contains(out, "verdict: INCONCLUSIVE: too little data") || !strings.Contains(out, "requests a window (about") {
				t.Errorf("the text does not say too little data and what to run:\n%s", out)
			}
		},
	}, {
		// Peak was the quietest window and off-peak the busiest: the range
		// in measured order, and the finding said.
		name: "compare-peak-quieter",
		windows: []window{
			{name: "peak", requests: 2000, rate: 50, seed: 5, latency: lognormal(10, 0.3)},
			{name: "offpeak", requests: 2000, rate: 50, seed: 6, latency: lognormal(14, 0.3)},
			{name: "mid", requests: 2000, rate: 50, seed: 7, latency: lognormal(12, 0.3)},
		},
		check: func(t *testing.T, out string, c tare.Comparison) {
			cp := c.Capacity
			if cp.BestWindow != "peak" || cp.WorstWindow != "offpeak" || cp.TypicalWindow != "mid" || *cp.Best >= *cp.Typical || *cp.Typical >= *cp.Worst || *cp.Gap <= 0 {
				t.Errorf("range %+v; want best peak < typical mid < worst offpeak, a positive gap", cp.MetricRange)
			}
			found := strings.Join(cp.Findings, "\n")
			for _, want := range []string{"Off-peak, the window expected to be the quietest, was not", "Peak, the window expected to be the busiest, was not", "beyond noise"} {
				if !strings.Contains(found, want) {
					t.Errorf("findings lack %q:\n%s", want, found)
				}
			}
		},
	}, {
		// A neighbour in mid only, and the service waiting behind it: named
		// as the difference.
		name: "compare-neighbour",
		windows: []window{
			{name: "offpeak", requests: 1500, rate: 50, seed: 8, latency: lognormal(4, 0.25), runDelay: 1},
			{name: "mid", requests: 1500, rate: 50, seed: 9, latency: spiky(4, 20, 8, 0.12), runDelay: 16, neighbours: backup},
		},
		check: func(t *testing.T, out string, c tare.Comparison) {
			if c.Verdict.Level != tare.HostVariable || len(c.Changes) != 1 || c.Changes[0].Window != "mid" || c.Changes[0].Against != "offpeak" {
				t.Fatalf("level %s changes %+v; want host-variable, mid against offpeak", c.Verdict.Level, c.Changes)
			}
			first := c.Changes[0].Items[0]
			if first.Kind != tare.ChangeNeighbour || first.Name != "backup" || *first.Value != 31 || *first.Against != 0 {
				t.Errorf("first change %+v; want backup at 31%% of a CPU against none", first)
			}
			for _, want := range []string{"in mid, `backup` (pid 4711) used 31% of a CPU (absent in offpeak)", "waited for a CPU behind neighbours 9.0% of the time"} {
				if !strings.Contains(c.Verdict.Advice[0], want) {
					t.Errorf("advice %q lacks %q", c.Verdict.Advice[0], want)
				}
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "tare.db")
			storeWindows(t, db, "checkout", tt.windows...)
			out, c := compareStored(t, db, "checkout")
			golden(t, tt.name+".stdout", out)
			tt.check(t, out, c)
		})
	}
}

// TestCompareRecordsFiles: the raw records tare runs export writes are
// compared as the stored runs are, tested request by request (a summary
// file keeps no records, so its divergences are not).
func TestCompareRecordsFiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tare.db")
	storeWindows(t, db, "checkout",
		window{name: "peak", requests: 3000, rate: 50, seed: 1, latency: lognormal(13.5, 0.3)},
		window{name: "offpeak", requests: 3000, rate: 50, seed: 2, latency: lognormal(10, 0.3)})
	var files []string
	for i, name := range []string{"peak", "offpeak"} {
		file := filepath.Join(dir, name+".jsonl")
		id := fmt.Sprintf("01a2%04d-0000-7000-8000-0000000000%02d", i, i)
		if code, _, stderr := tareCmd(t, "runs", "export", id, "--db", db, "--format", "jsonl", "-o", file); code != 0 {
			t.Fatalf("export: exit %d: %s", code, stderr)
		}
		files = append(files, file)
	}
	code, js, stderr := tareCmd(t, "compare", files[0], files[1], "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var c tare.Comparison
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	p95 := verdictOf(t, c, "p95")
	if len(c.Tests) != 1 || c.Tests[0].Requests == nil || c.Tests[0].Requests.RequestsA != 3000 ||
		c.Verdict.Level != tare.HostVariable || !p95.Tested || p95.A != "peak.jsonl" || *p95.RatioLow <= 1 {
		t.Errorf("tests %+v, level %s, p95 %+v; want 3,000 requests tested, host-variable on p95 higher in peak.jsonl", c.Tests, c.Verdict.Level, p95)
	}
}
