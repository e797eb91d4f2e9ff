package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

func TestCreateFindRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		runs := []tare.Run{
			{ID: "r1", Label: "checkout", Window: "peak", Target: "http://127.0.0.1:8080/checkout",
				Arrival: "poisson 200/s", Protocol: "p-1", StartedAt: at(0)},
			{ID: "r2", Label: "checkout", Window: "offpeak", Target: "http://127.0.0.1:8080/checkout",
				Arrival: "poisson 200/s", Protocol: "p-1", StartedAt: at(12 * time.Hour)},
			{ID: "r3", Label: "search", Window: "mid", Target: "redis://127.0.0.1:6379/0 queue=jobs",
				Arrival: "constant 50/s", Protocol: "p-2", StartedAt: at(18 * time.Hour)},
			{ID: "r4", Label: "search", Target: "http://127.0.0.1:9090/Search",
				Arrival: "gamma 10/s", StartedAt: at(24 * time.Hour), Version: "v1.2.3",
				Config: map[string]string{"slo": "p95<=2s"}},
		}
		for _, r := range runs {
			mustCreate(t, s, r)
		}
		ids := func(rs []tare.Run) []string {
			out := []string{}
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		tests := []struct {
			name   string
			filter tare.RunFilter
			want   []string
		}{
			{"everything, newest first", tare.RunFilter{}, []string{"r4", "r3", "r2", "r1"}},
			{"id", tare.RunFilter{ID: "r2"}, []string{"r2"}},
			{"unknown id", tare.RunFilter{ID: "nope"}, []string{}},
			{"label", tare.RunFilter{Label: "search"}, []string{"r4", "r3"}},
			{"window", tare.RunFilter{Window: "offpeak"}, []string{"r2"}},
			{"target substring", tare.RunFilter{Target: "8080"}, []string{"r2", "r1"}},
			{"target is case-sensitive", tare.RunFilter{Target: "Search"}, []string{"r4"}},
			{"target with LIKE wildcards is literal", tare.RunFilter{Target: "%"}, []string{}},
			{"protocol", tare.RunFilter{Protocol: "p-1"}, []string{"r2", "r1"}},
			{"since is inclusive", tare.RunFilter{Since: at(12 * time.Hour)}, []string{"r4", "r3", "r2"}},
			{"limit", tare.RunFilter{Limit: 2}, []string{"r4", "r3"}},
			{"all fields", tare.RunFilter{ID: "r1", Label: "checkout", Window: "peak", Target: "checkout",
				Protocol: "p-1", Since: at(-time.Hour), Limit: 5}, []string{"r1"}},
			{"fields that disagree", tare.RunFilter{Label: "checkout", Window: "mid"}, []string{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.FindRuns(ctx, tt.filter)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(ids(got), tt.want) {
					t.Errorf("FindRuns(%+v) = %v, want %v", tt.filter, ids(got), tt.want)
				}
			})
		}

		got, err := s.FindRuns(ctx, tare.RunFilter{ID: "r4"})
		if err != nil || len(got) != 1 {
			t.Fatalf("FindRuns(r4) = %v, %v", got, err)
		}
		want := runs[3]
		want.Status = tare.StatusRunning
		if !reflect.DeepEqual(got[0], want) {
			t.Errorf("run read back\n got %+v\nwant %+v", got[0], want)
		}

		_, err = s.FindRuns(ctx, tare.RunFilter{Limit: -1})
		wantCode(t, err, tare.EINVALID)
	})
}

func TestCreateRunInvalid(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		mustCreate(t, s, newRun("dup", base))
		tests := []struct {
			name string
			run  tare.Run
		}{
			{"no id", newRun("", base)},
			{"duplicate id", newRun("dup", base)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantCode(t, s.CreateRun(ctx, tt.run, testEnv), tare.EINVALID)
			})
		}
	})
}

func TestCreateRunDefaultsStart(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		now := at(time.Hour)
		s.c.set.Now = func() time.Time { return now }
		mustCreate(t, s, newRun("r", time.Time{}))
		runs, err := s.FindRuns(testContext(t), tare.RunFilter{})
		if err != nil || len(runs) != 1 || !runs[0].StartedAt.Equal(now) {
			t.Fatalf("FindRuns = %+v, %v; want one run started at %v", runs, err, now)
		}
	})
}

func TestAppendAndStreamResults(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		want := withMix(makeResults(0, 2500))

		// The engine hands results over as they complete, not in seq
		// order; the store gives them back in seq order.
		shuffled := append([]tare.Result(nil), want...)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		for len(shuffled) > 0 {
			n := min(len(shuffled), 1000)
			if err := s.AppendResults(ctx, id, shuffled[:n]); err != nil {
				t.Fatal(err)
			}
			shuffled = shuffled[n:]
		}
		if err := s.AppendResults(ctx, id, nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}

		got := streamAll(t, s, id)
		if len(got) != len(want) {
			t.Fatalf("streamed %d results, want %d", len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("result %d\n got %+v\nwant %+v", i, got[i], want[i])
			}
		}

		stop := errors.New("enough")
		calls := 0
		err := s.StreamResults(ctx, id, func(*tare.Result) error {
			calls++
			if calls == 10 {
				return stop
			}
			return nil
		})
		if err != stop || calls != 10 {
			t.Errorf("StreamResults stopping at call 10: err %v after %d calls, want %v after 10", err, calls, stop)
		}

		other := NewRunID()
		mustCreate(t, s, newRun(other, base))
		if got := streamAll(t, s, other); len(got) != 0 {
			t.Errorf("a run with no results streamed %d", len(got))
		}
	})
}

func TestAppendRejects(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		if err := s.AppendResults(ctx, id, makeResults(0, 10)); err != nil {
			t.Fatal(err)
		}
		// A batch is one transaction: the new records of a batch that
		// repeats a seq are not stored either.
		err := s.AppendResults(ctx, id, makeResults(5, 10))
		wantCode(t, err, tare.EINVALID)
		if got := streamAll(t, s, id); len(got) != 10 {
			t.Errorf("after a rejected batch %d results are stored, want 10", len(got))
		}

		if err := s.FinishRun(ctx, tare.Summary{Run: tare.Run{ID: id}}); err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.AppendResults(ctx, id, makeResults(10, 1)), tare.EINVALID)
		wantCode(t, s.AppendTicks(ctx, id, makeTicks(0, 1)), tare.EINVALID)
	})
}

func TestUnknownRun(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		const id = "no-such-run"
		tests := []struct {
			name string
			call func() error
		}{
			{"AppendResults", func() error { return s.AppendResults(ctx, id, makeResults(0, 1)) }},
			{"AppendTicks", func() error { return s.AppendTicks(ctx, id, makeTicks(0, 1)) }},
			{"FinishRun", func() error { return s.FinishRun(ctx, tare.Summary{Run: tare.Run{ID: id}}) }},
			{"FindSummary", func() error { _, err := s.FindSummary(ctx, id); return err }},
			{"FindTicks", func() error { _, err := s.FindTicks(ctx, id); return err }},
			{"StreamResults", func() error {
				return s.StreamResults(ctx, id, func(*tare.Result) error { return nil })
			}},
			{"DeleteRun", func() error { return s.DeleteRun(ctx, id) }},
			{"Heartbeat", func() error { return s.c.Heartbeat(ctx, id) }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call()
				wantCode(t, err, tare.ENOTFOUND)
				if msg := tare.ErrorMessage(err); msg != `run "no-such-run" not found` {
					t.Errorf("message %q does not name the run", msg)
				}
			})
		}
	})
}

func TestTicks(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		want := makeTicks(0, 7)
		if err := s.AppendTicks(ctx, id, want[:4]); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendTicks(ctx, id, want[4:]); err != nil {
			t.Fatal(err)
		}
		got, err := s.FindTicks(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("FindTicks = %d ticks, want %d", len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("tick %d\n got %+v host %+v\nwant %+v host %+v", i, got[i], got[i].Host, want[i], want[i].Host)
			}
		}

		// The derived columns are there for SQL readers.
		var steal, busy, maxSteal float64
		err = s.c.b.queryRow(ctx, `SELECT steal, busy, max_cpu_steal FROM ticks
			WHERE run = (SELECT pk FROM runs WHERE id = ?) AND idx = 2`, id).Scan(&steal, &busy, &maxSteal)
		if err != nil {
			t.Fatal(err)
		}
		if h := want[2].Host; steal != h.CPU.Steal || busy != h.CPU.Busy() || maxSteal != h.MaxCPUSteal() {
			t.Errorf("derived columns steal %v busy %v max %v, want %v %v %v",
				steal, busy, maxSteal, h.CPU.Steal, h.CPU.Busy(), h.MaxCPUSteal())
		}

		bad := makeTicks(0, 1)
		bad[0].Start = time.Time{}
		if err := s.AppendTicks(ctx, id, bad); err == nil {
			t.Error("a tick with no start was stored")
		}
	})
}

func readSummaryFixture(t testing.TB, name string) tare.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var s tare.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func TestSummaryRoundTrip(t *testing.T) {
	for _, fixture := range []string{"summary_full.json", "summary_nulls.json"} {
		t.Run(fixture, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s testStore) {
				ctx := testContext(t)
				sum := readSummaryFixture(t, fixture)
				run := sum.Run
				run.Status = tare.StatusRunning
				run.EndedAt = time.Time{}
				mustCreate(t, s, run)
				if err := s.FinishRun(ctx, sum); err != nil {
					t.Fatal(err)
				}
				got, err := s.FindSummary(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				wantJSON, _ := json.Marshal(sum)
				gotJSON, _ := json.Marshal(got)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("summary changed in the store\n got %s\nwant %s", gotJSON, wantJSON)
				}
				runs, err := s.FindRuns(ctx, tare.RunFilter{ID: run.ID})
				if err != nil || len(runs) != 1 {
					t.Fatalf("FindRuns = %v, %v", runs, err)
				}
				if runs[0].Status != sum.Run.Status || !runs[0].EndedAt.Equal(sum.Run.EndedAt) {
					t.Errorf("run after FinishRun: status %q ended %v, want %q %v",
						runs[0].Status, runs[0].EndedAt, sum.Run.Status, sum.Run.EndedAt)
				}
			})
		})
	}
}

func TestFinishRun(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		now := at(time.Hour)
		s.c.set.Now = func() time.Time { return now }
		tests := []struct {
			name       string
			run        tare.Run
			code       string
			wantStatus tare.RunStatus
		}{
			{"empty status is complete", tare.Run{ID: "a"}, "", tare.StatusComplete},
			{"failed", tare.Run{ID: "b", Status: tare.StatusFailed}, "", tare.StatusFailed},
			{"interrupted", tare.Run{ID: "c", Status: tare.StatusInterrupted}, "", tare.StatusInterrupted},
			{"running is not final", tare.Run{ID: "d", Status: tare.StatusRunning}, tare.EINVALID, ""},
			{"unknown status", tare.Run{ID: "e", Status: "done"}, tare.EINVALID, ""},
			{"no id", tare.Run{}, tare.EINVALID, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.run.ID != "" {
					mustCreate(t, s, newRun(tt.run.ID, base))
				}
				err := s.FinishRun(ctx, tare.Summary{Schema: tare.SummarySchema, Run: tt.run})
				if tt.code != "" {
					wantCode(t, err, tt.code)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				sum, err := s.FindSummary(ctx, tt.run.ID)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Run.Status != tt.wantStatus || !sum.Run.EndedAt.Equal(now) {
					t.Errorf("finished run: status %q ended %v, want %q %v", sum.Run.Status, sum.Run.EndedAt, tt.wantStatus, now)
				}
			})
		}
	})
}

func TestDeleteRun(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		gone, kept := NewRunID(), NewRunID()
		for _, id := range []string{gone, kept} {
			mustCreate(t, s, newRun(id, base))
			if err := s.AppendResults(ctx, id, makeResults(0, 50)); err != nil {
				t.Fatal(err)
			}
			if err := s.AppendTicks(ctx, id, makeTicks(0, 3)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteRun(ctx, gone); err != nil {
			t.Fatal(err)
		}
		runs, err := s.FindRuns(ctx, tare.RunFilter{})
		if err != nil || len(runs) != 1 || runs[0].ID != kept {
			t.Errorf("after delete FindRuns = %+v, %v; want only %s", runs, err, kept)
		}
		_, err = s.FindSummary(ctx, gone)
		wantCode(t, err, tare.ENOTFOUND)
		wantCode(t, s.DeleteRun(ctx, gone), tare.ENOTFOUND)
		for table, want := range map[string]int{"result_batches": 50, "ticks": 3} {
			count := "COUNT(*)"
			if table == "result_batches" {
				count = "COALESCE(SUM(records), 0)"
			}
			var n int
			if err := s.c.b.queryRow(ctx, "SELECT "+count+" FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("%d records left in %s, want the other run's %d", n, table, want)
			}
		}
		if got := streamAll(t, s, kept); len(got) != 50 {
			t.Errorf("the other run has %d results, want 50", len(got))
		}
	})
}

// TestLiveness covers the heartbeat rule, with a writer this process
// cannot look at (another machine, as far as the store can tell).
func TestLiveness(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		clock := at(time.Hour)
		s.c.set.Now = func() time.Time { return clock }

		mine := NewRunID()
		mustCreate(t, s, newRun(mine, base))
		s.c.set.Processes = nil // now the store cannot see processes
		foreign := NewRunID()
		mustCreate(t, s, newRun(foreign, base))
		heartbeat := clock

		status := func(id string) tare.Run {
			t.Helper()
			runs, err := s.FindRuns(ctx, tare.RunFilter{ID: id})
			if err != nil || len(runs) != 1 {
				t.Fatalf("FindRuns(%s) = %v, %v", id, runs, err)
			}
			return runs[0]
		}
		steps := []struct {
			name    string
			advance time.Duration
			want    tare.RunStatus
		}{
			{"fresh heartbeat", 0, tare.StatusRunning},
			{"heartbeat as old as StaleAfter", DefaultStaleAfter, tare.StatusRunning},
			{"stale heartbeat", time.Nanosecond, tare.StatusInterrupted},
		}
		for _, st := range steps {
			clock = clock.Add(st.advance)
			if r := status(foreign); r.Status != st.want {
				t.Errorf("%s: status %q, want %q", st.name, r.Status, st.want)
			}
		}
		if r := status(foreign); !r.EndedAt.Equal(heartbeat) {
			t.Errorf("interrupted run ended %v, want its last heartbeat %v", r.EndedAt, heartbeat)
		}

		// A heartbeat brings it back: the stored status never changed.
		if err := s.c.Heartbeat(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		if r := status(foreign); r.Status != tare.StatusRunning || !r.EndedAt.IsZero() {
			t.Errorf("after a heartbeat: status %q ended %v, want running", r.Status, r.EndedAt)
		}
		clock = clock.Add(2 * DefaultStaleAfter)
		s.c.set.StaleAfter = 3 * DefaultStaleAfter
		if r := status(foreign); r.Status != tare.StatusRunning {
			t.Errorf("with StaleAfter %v: status %q, want running", s.c.set.StaleAfter, r.Status)
		}
	})
}

// TestLiveOwner: a run whose writer is this very process reads as running
// however old its heartbeat, until the heartbeat is stale.
func TestLiveOwner(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		if s.c.me().Boot == "" {
			t.Skip("no /proc here: liveness is judged by heartbeat alone")
		}
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		runs, err := s.FindRuns(ctx, tare.RunFilter{ID: id})
		if err != nil || len(runs) != 1 || runs[0].Status != tare.StatusRunning {
			t.Fatalf("FindRuns = %+v, %v; want one running run", runs, err)
		}
		sum, err := s.FindSummary(ctx, id)
		if err != nil || sum.Run.Status != tare.StatusRunning {
			t.Fatalf("FindSummary: status %q, %v; want running", sum.Run.Status, err)
		}
	})
}

// TestUnfinishedSummary is the summary built for a run that never
// finished, against testdata/unfinished_summary.golden.json.
func TestUnfinishedSummary(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		clock := at(10 * time.Minute)
		s.c.set.Now = func() time.Time { return clock }
		s.c.set.Processes = nil
		const id = "0195a3c4-0000-7000-8000-000000000001"
		mustCreate(t, s, newRun(id, base))
		if err := s.AppendResults(ctx, id, makeResults(0, 100)); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendTicks(ctx, id, makeTicks(0, 6)); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(DefaultStaleAfter + time.Second)
		sum, err := s.FindSummary(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		goldenfile.Check(t, "unfinished_summary.golden.json", append(got, '\n'))
	})
}

func TestRedactsStoredConfig(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		run := newRun(NewRunID(), base)
		run.Target = "redis://:hunter2@127.0.0.1:6379/0"
		run.Config = map[string]string{
			"header":     "Authorization: Bearer sk-live-abcdefghijklmnop",
			"api_key":    "sk-live-abcdefghijklmnop",
			"model":      "http://127.0.0.1:8000/v1?api_key=sk-live-abcdefghijklmnop",
			"max_tokens": "256",
		}
		mustCreate(t, s, run)
		want := map[string]string{
			"header":     "Authorization: [redacted]",
			"api_key":    "[redacted]",
			"model":      "http://127.0.0.1:8000/v1?api_key=[redacted]",
			"max_tokens": "256",
		}
		runs, err := s.FindRuns(ctx, tare.RunFilter{ID: run.ID})
		if err != nil || len(runs) != 1 {
			t.Fatalf("FindRuns = %v, %v", runs, err)
		}
		if !reflect.DeepEqual(runs[0].Config, want) {
			t.Errorf("stored config %v, want %v", runs[0].Config, want)
		}
		if runs[0].Target != "redis://:redacted@127.0.0.1:6379/0" {
			t.Errorf("stored target %q still has its password", runs[0].Target)
		}

		run.Status = tare.StatusComplete
		if err := s.FinishRun(ctx, tare.Summary{Run: run}); err != nil {
			t.Fatal(err)
		}
		sum, err := s.FindSummary(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sum.Run.Config, want) || sum.Run.Target != runs[0].Target {
			t.Errorf("stored summary run config %v target %q, want redacted", sum.Run.Config, sum.Run.Target)
		}
		if run.Config["api_key"] != "sk-live-abcdefghijklmnop" {
			t.Error("the caller's config map was changed")
		}
	})
}

// TestConcurrentAppends: writers of different runs share one store (the
// CLI's protocol command, or two tare processes on one SQLite file) without
// failing on each other's locks.
func TestConcurrentAppends(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		second, err := Open(ctx, s.dsn) // another connection pool, as another process has
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		const writers, batches, size = 4, 8, 100
		errs := make(chan error, writers)
		ids := make([]string, writers)
		for i := range ids {
			ids[i] = NewRunID()
			mustCreate(t, s, newRun(ids[i], base))
		}
		for i, id := range ids {
			st := tare.Store(s)
			if i%2 == 1 {
				st = second
			}
			go func() {
				for b := range batches {
					if err := st.AppendResults(ctx, id, makeResults(b*size, size)); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range writers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		for _, id := range ids {
			if got := streamAll(t, s, id); len(got) != batches*size {
				t.Errorf("run %s has %d results, want %d", id, len(got), batches*size)
			}
		}
	})
}
