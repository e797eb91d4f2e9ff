package protocol

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/store"
)

// fakeClock is the injected clock: Wait moves it, nothing sleeps.
type fakeClock struct{ now time.Time }

// harness is a scheduler on a fake clock over a real SQLite store, whose
// Run stores a run at the clock's time and takes the load's length.
type harness struct {
	t      *testing.T
	st     tare.Store
	clock  *fakeClock
	ran    []string // window@date of each run, in order
	missed []string // key and why of each missed slot
	waits  int
}

func newHarness(t *testing.T, now time.Time) *harness {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "tare.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &harness{t: t, st: st, clock: &fakeClock{now: now}}
}

// scheduler returns a scheduler as a fresh tare process would make it.
func (h *harness) scheduler(s Schedule) *Scheduler {
	return &Scheduler{
		Schedule: s,
		Store:    h.st,
		Now:      func() time.Time { return h.clock.now },
		Wait: func(ctx context.Context, until time.Time, _ Slot) error {
			h.waits++
			if until.After(h.clock.now) {
				h.clock.now = until
			}
			return ctx.Err()
		},
		Run: func(ctx context.Context, slot Slot) error {
			return h.store(slot, tare.StatusComplete)
		},
		Missed: func(slot Slot) { h.missed = append(h.missed, slot.Key()+": "+slot.Why) },
	}
}

// store records one run of the slot as measure would: created running at
// the clock's time, finished one load length later.
func (h *harness) store(slot Slot, status tare.RunStatus) error {
	ctx := context.Background()
	run := tare.Run{ID: store.NewRunID(), Label: "checkout", Window: slot.Window.Name, Protocol: "checkout", Target: "GET http://127.0.0.1:9/",
		StartedAt: h.clock.now, Status: tare.StatusRunning}
	if err := h.st.CreateRun(ctx, run, tare.Env{}); err != nil {
		return err
	}
	h.ran = append(h.ran, slot.Key()+" at "+h.clock.now.Format("15:04:05"))
	h.clock.now = h.clock.now.Add(10 * time.Minute)
	run.Status, run.EndedAt = status, h.clock.now
	return h.st.FinishRun(ctx, tare.Summary{Schema: tare.SummarySchema, Run: run})
}

func TestSchedulerCycle(t *testing.T) {
	h := newHarness(t, at(12, 1, 13, 0))
	s := schedule()
	slots := s.Cycle(nil, h.clock.now)
	if err := h.scheduler(s).Loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sl := range slots {
		want = append(want, sl.Key()+" at "+sl.At.Format("15:04:05"))
	}
	if strings.Join(h.ran, ", ") != strings.Join(want, ", ") {
		t.Errorf("ran %v\nwant each window once at its seeded start: %v", h.ran, want)
	}
	if len(h.missed) != 0 || h.waits != 3 {
		t.Errorf("missed %v, waited %d times; want none missed and one wait per window", h.missed, h.waits)
	}
	runs, err := h.st.FindRuns(context.Background(), tare.RunFilter{Protocol: "checkout"})
	if err != nil || len(runs) != 3 {
		t.Fatalf("stored runs %d, %v; want 3", len(runs), err)
	}
	// Run again when it is all over: nothing to do, nothing rerun.
	if err := h.scheduler(s).Loop(context.Background()); err != nil || len(h.ran) != 3 {
		t.Errorf("a finished protocol ran again: %v, %v", h.ran, err)
	}
}

// TestSchedulerRestart: tare is killed after the peak window; when it
// comes back the off-peak window has passed. The peak is not rerun, the
// off-peak is reported missed (and not faked), and the mid window runs.
func TestSchedulerRestart(t *testing.T) {
	h := newHarness(t, at(12, 1, 13, 0))
	s := schedule()
	killed := errors.New("killed")
	first := h.scheduler(s)
	wait := first.Wait
	first.Wait = func(ctx context.Context, until time.Time, next Slot) error {
		if next.Window.Name == tare.WindowOffpeak {
			return killed // the process dies while waiting for the night
		}
		return wait(ctx, until, next)
	}
	if err := first.Loop(context.Background()); !errors.Is(err, killed) {
		t.Fatalf("first loop: %v", err)
	}
	if len(h.ran) != 1 || !strings.HasPrefix(h.ran[0], "peak@2026-12-01") {
		t.Fatalf("before the kill ran %v, want the peak", h.ran)
	}

	h.clock.now = at(12, 2, 5, 30) // back after the off-peak window closed
	if err := h.scheduler(s).Loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.ran) != 2 || !strings.HasPrefix(h.ran[1], "mid@2026-12-02") {
		t.Errorf("after the restart ran %v, want the peak (before) and the mid window only", h.ran)
	}
	if len(h.missed) != 1 || h.missed[0] != "offpeak@2026-12-02: the window passed while tare was not running" {
		t.Errorf("missed %q, want the off-peak window, once", h.missed)
	}
	runs, _ := h.st.FindRuns(context.Background(), tare.RunFilter{Protocol: "checkout", Window: tare.WindowOffpeak})
	if len(runs) != 0 {
		t.Errorf("a run was stored for the missed window: %+v", runs)
	}
}

// TestSchedulerInterruptedRun: Ctrl-C during the peak's load stores it
// interrupted; restarted inside the window, the peak runs again.
func TestSchedulerInterruptedRun(t *testing.T) {
	h := newHarness(t, at(12, 1, 13, 0))
	s := schedule()
	ctx, cancel := context.WithCancel(context.Background())
	first := h.scheduler(s)
	first.Run = func(ctx context.Context, slot Slot) error {
		cancel()
		return h.store(slot, tare.StatusInterrupted)
	}
	if err := first.Loop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted loop: %v", err)
	}
	second := h.scheduler(s)
	second.Only, second.Once = tare.WindowPeak, true
	if err := second.Loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.ran) != 2 || !strings.HasPrefix(h.ran[0], "peak@2026-12-01") || !strings.HasPrefix(h.ran[1], "peak@2026-12-01") {
		t.Errorf("ran %v, want the peak twice: interrupted, then complete", h.ran)
	}
	slots, err := second.Slots(context.Background(), h.clock.now)
	if err != nil || len(slots) != 1 || slots[0].State != SlotDone {
		t.Errorf("peak slots %+v, %v: want one, done", slots, err)
	}
}

// TestSchedulerRunStoresNothing: a Run that stores no complete run stops
// the loop with an error rather than running the window for ever.
func TestSchedulerRunStoresNothing(t *testing.T) {
	h := newHarness(t, at(12, 1, 15, 0))
	sc := h.scheduler(schedule())
	calls := 0
	sc.Run = func(context.Context, Slot) error { calls++; return nil }
	err := sc.Loop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no complete run of it is in the store") || calls != 1 {
		t.Errorf("error %v after %d runs", err, calls)
	}
}

func TestSchedulerBadSchedule(t *testing.T) {
	h := newHarness(t, at(12, 1, 15, 0))
	s := schedule()
	s.RunLength = 5 * time.Hour
	err := h.scheduler(s).Loop(context.Background())
	if tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("error %v, want EINVALID", err)
	}
}
