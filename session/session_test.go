package session

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// server answers every request after delay.
func server(t *testing.T, delay time.Duration) *httptarget.Target {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
	}))
	t.Cleanup(srv.Close)
	target, err := httptarget.New(httptarget.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	return target
}

// sqlite is a store of the test's own, in a temp dir.
func sqlite(t *testing.T) tare.Store {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "tare.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// window is n constant arrivals at rate against target (no schedule when
// n is 0), sampled every 100 ms, with tare as the test process.
func window(target tare.Target, rate float64, n int) Config {
	cfg := DefaultConfig()
	cfg.Run = tare.Run{Label: "test", Target: "test target"}
	cfg.Target = target
	if n > 0 {
		cfg.Schedule, cfg.Rate = arrival.Bound(arrival.NewConstant(rate), n, 0), rate
	}
	cfg.Host = host.Config{Tick: 100 * time.Millisecond, Tare: []int{os.Getpid()}}
	return cfg
}

func TestLastOffsetSpan(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		n    int
		want time.Duration
	}{
		{"none", 10, 0, 0},
		{"one", 10, 1, 100 * time.Millisecond},
		{"n over r", 10, 5, 500 * time.Millisecond},
		{"no rate", 0, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lastOffset{Process: arrival.Bound(arrival.NewConstant(max(tt.rate, 1)), max(tt.n, 1), 0)}
			for range tt.n {
				l.Next()
			}
			if got := l.span(tt.rate); got != tt.want {
				t.Errorf("span %s, want %s", got, tt.want)
			}
		})
	}
}

// TestMeasure: every arrival is a result, streamed to the store with the
// ticks and the summary; the hooks are called in order.
func TestMeasure(t *testing.T) {
	st := sqlite(t)
	cfg := window(server(t, time.Millisecond), 50, 20)
	cfg.Store = st
	var shown, done, finished int
	cfg.ProgressEvery = 50 * time.Millisecond
	cfg.OnProgress = func(stats.Progress, load.Progress) {
		if done > 0 {
			t.Error("progress after done")
		}
		shown++
	}
	cfg.OnDone = func() { done++ }
	cfg.Finish = func(s *tare.Summary) {
		if done != 1 {
			t.Errorf("finish before done")
		}
		finished++
		s.Verdict.Warnings = append(s.Verdict.Warnings, "finished")
	}
	s, ticks, storeErr, err := Measure(context.Background(), cfg)
	if err != nil || storeErr != nil {
		t.Fatalf("err %v, store %v", err, storeErr)
	}
	if s.Requests.Total != 20 || s.Requests.OK != 20 || s.Run.Status != tare.StatusComplete {
		t.Errorf("requests %+v status %q: want 20 ok, complete", s.Requests, s.Run.Status)
	}
	if s.Run.ID == "" || s.Run.Label != "test" || s.Schema != tare.SummarySchema {
		t.Errorf("run %+v schema %q", s.Run, s.Schema)
	}
	if shown == 0 || done != 1 || finished != 1 {
		t.Errorf("progress %d, done %d, finish %d: want some, 1, 1", shown, done, finished)
	}
	if s.Rate.Offered == nil || *s.Rate.Offered < 49 || *s.Rate.Offered > 51 {
		t.Errorf("offered %v: want 50/s, over the arrival span", s.Rate.Offered)
	}
	ctx := context.Background()
	stored, err := st.FindSummary(ctx, s.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Requests != s.Requests || !strings.Contains(strings.Join(stored.Verdict.Warnings, "\n"), "finished") {
		t.Errorf("stored requests %+v warnings %q: want %+v and the finish hook's", stored.Requests, stored.Verdict.Warnings, s.Requests)
	}
	storedTicks, err := st.FindTicks(ctx, s.Run.ID)
	if err != nil || len(storedTicks) != len(ticks) {
		t.Errorf("stored %d ticks (%v), measured %d", len(storedTicks), err, len(ticks))
	}
	n := 0
	if err := st.StreamResults(ctx, s.Run.ID, func(*tare.Result) error { n++; return nil }); err != nil || n != 20 {
		t.Errorf("stored %d results (%v), want 20", n, err)
	}
}

// TestMeasureInterrupted: a cancelled context stops the arrivals; the
// summary of what was measured is marked interrupted, and unstored runs
// get no id.
func TestMeasureInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, _, storeErr, err := Measure(ctx, window(server(t, 0), 20, 1000))
	if err != nil || storeErr != nil {
		t.Fatalf("err %v, store %v", err, storeErr)
	}
	if s.Run.Status != tare.StatusInterrupted || s.Requests.Total == 0 || s.Requests.Total >= 1000 {
		t.Errorf("status %q requests %+v: want interrupted, part of the arrivals", s.Run.Status, s.Requests)
	}
	if s.Run.ID != "" {
		t.Errorf("run id %q: an unstored run to no queue has none", s.Run.ID)
	}
}

// TestObserve: a window with no load ends when stop is closed, and is
// judged and stored with its ticks; with a tool's results, they are its
// requests, stored as its raw records (what tare report draws).
func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results int // lines of the tool's results; -1 for no --results
		stored  bool
	}{
		{"stored", -1, true},
		{"results stored", 3, true},
		{"results, no store", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := window(nil, 0, 0)
			var st tare.Store
			if tc.stored {
				st = sqlite(t)
				cfg.Run.ID, cfg.Store = store.NewRunID(), st
			}
			path := filepath.Join(t.TempDir(), "r.jsonl")
			if tc.results >= 0 {
				spec, err := peer.ParseSpec("jsonl:" + path)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Results = &spec
			}
			stop := make(chan struct{})
			started := 0
			cfg.OnStart = func(*host.Sampler) {
				started++
				// The tool: its results, one instant each, written before
				// the window ends.
				var lines strings.Builder
				for range max(tc.results, 0) {
					fmt.Fprintf(&lines, "{\"timestamp\": %q, \"latency_ms\": 2, \"status\": 200}\n", time.Now().Format(time.RFC3339Nano))
				}
				if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
					t.Error(err)
				}
				time.AfterFunc(350*time.Millisecond, func() { close(stop) })
			}
			s, ticks, storeErr, err := Observe(context.Background(), cfg, stop)
			if err != nil || storeErr != nil {
				t.Fatalf("err %v, store %v", err, storeErr)
			}
			if want := max(tc.results, 0); started != 1 || s.Run.Status != tare.StatusComplete || s.Requests.Total != want || len(ticks) < 2 {
				t.Errorf("started %d, status %q, requests %+v, %d ticks: want 1, complete, %d, a few", started, s.Run.Status, s.Requests, len(ticks), want)
			}
			if s.Thresholds == nil || len(s.Verdict.Signals) == 0 {
				t.Errorf("thresholds %v signals %v: want the window judged", s.Thresholds, s.Verdict.Signals)
			}
			if st == nil {
				return
			}
			ctx := context.Background()
			stored, err := st.FindTicks(ctx, s.Run.ID)
			if err != nil || len(stored) != len(ticks) {
				t.Errorf("stored %d ticks (%v), want %d", len(stored), err, len(ticks))
			}
			records := 0
			if err := StreamResults(ctx, st, s.Run.ID, func(*tare.Result) error { records++; return nil }); err != nil || records != max(tc.results, 0) {
				t.Errorf("stored %d raw records (%v), want the tool's %d results", records, err, max(tc.results, 0))
			}
			if sum, err := st.FindSummary(ctx, s.Run.ID); err != nil || sum.Requests.Total != s.Requests.Total {
				t.Errorf("stored summary: %+v (%v), want the window's", sum.Requests, err)
			}
		})
	}
}

// TestSweep: against a fast service every step holds, so the capacity is
// at least the highest rate; with an SLO the service cannot meet, the
// first step fails and there is no capacity. Each step is stored with
// the sweep's keys.
func TestSweep(t *testing.T) {
	t.Run("holds", func(t *testing.T) {
		st := sqlite(t)
		cfg := sweepConfig(server(t, 0), st, "p95<=1s")
		var steps []int
		cfg.OnStep = func(n int, _ tare.SweepStep) { steps = append(steps, n) }
		r, err := Sweep(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Steps) != 3 || r.CapacityPerS == nil || *r.CapacityPerS != 40 || !r.AtLeast || len(steps) != 3 {
			t.Fatalf("steps %+v capacity %v at least %v, heard %v: want 3 held, at least 40/s", r.Steps, r.CapacityPerS, r.AtLeast, steps)
		}
		for i, step := range r.Steps {
			s, err := st.FindSummary(context.Background(), step.RunID)
			if err != nil {
				t.Fatal(err)
			}
			want := judge.FormatRate(step.OfferedPerS)
			if s.Run.Label != "test "+want || s.Run.Config[ConfigSweepRate] == "" || s.Run.Config[ConfigSweepSlot] != "slot" || s.Run.Config[ConfigSweepStep] != string(rune('1'+i)) {
				t.Errorf("step %d: label %q config %v", i+1, s.Run.Label, s.Run.Config)
			}
		}
	})
	t.Run("fails", func(t *testing.T) {
		r, err := Sweep(context.Background(), sweepConfig(server(t, 20*time.Millisecond), nil, "p95<=1ms"))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Steps) != 1 || r.Steps[0].Status != tare.StepSLOFailed || r.CapacityPerS != nil || r.SLO != "p95<=1ms" || r.Target != "test target" {
			t.Errorf("steps %+v capacity %v slo %q: want one step, failed on the SLO, no capacity", r.Steps, r.CapacityPerS, r.SLO)
		}
	})
}

// sweepConfig sweeps 10/s, 20/s, 40/s, 400 ms steps, against slo.
func sweepConfig(target tare.Target, st tare.Store, slo string) SweepConfig {
	cfg := SweepConfig{
		Run: tare.Run{Label: "test"}, Target: "test target",
		Plan: judge.SweepPlan{From: 10, To: 40, Narrow: 1},
		Slot: "slot",
	}
	cfg.SLO, _ = judge.ParseSLO(slo)
	cfg.Window = func(rate float64, run tare.Run) (Config, error) {
		w := window(target, rate, 0)
		w.Run, w.Store, w.SLO = run, st, cfg.SLO
		w.Schedule, w.Rate = arrival.Bound(arrival.NewConstant(rate), 0, 400*time.Millisecond), rate
		return w, nil
	}
	return cfg
}
