package session

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// openSQLite is a store of the test's own.
func openSQLite(t *testing.T) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "tare.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeClock is the keeper's injected clock: Wait moves it to the time
// waited for, Sample moves it on by the sample's length.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Wait(ctx context.Context, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if until.After(c.now) {
		c.now = until
	}
	return nil
}

// TestKeeper: every Every a sample, stored under the host with its figures
// and what it cost; one that overruns its slot makes the keeper skip to
// the next slot on the same grid; a store error costs that sample only;
// a stop ends the keeper without error. The clock is injected: the test
// takes no time.
func TestKeeper(t *testing.T) {
	st := openSQLite(t)
	clock := &fakeClock{now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var starts []time.Time
	lengths := []time.Duration{10 * time.Second, 10 * time.Second, 7 * time.Minute, 10 * time.Second, 10 * time.Second}
	var told []tare.CalendarSample
	var failed int
	k := &Keeper{
		Every: 5 * time.Minute, Store: st, Host: "vm-1", Now: clock.Now, Wait: clock.Wait,
		Sample: func(ctx context.Context) (tare.Summary, error) {
			n := len(starts)
			start := clock.now
			starts = append(starts, start)
			clock.now = clock.now.Add(lengths[n])
			if n == len(lengths)-1 {
				cancel()
			}
			return tare.Summary{
				Run:     tare.Run{StartedAt: start, EndedAt: clock.now},
				Env:     tare.Env{Hostname: "pod-name"},
				Host:    tare.HostSummary{Steal: tare.StealStats{Mean: tare.Float(1)}, CPUBy: &tare.CPUBy{Others: float64(n), Steal: 1}, Ticks: 10},
				Verdict: tare.Verdict{Level: tare.Clean},
			}, nil
		},
		OnSample: func(c tare.CalendarSample) { told = append(told, c) },
		OnError:  func(tare.CalendarSample, error) { failed++ },
	}
	if err := k.Loop(ctx); err != nil {
		t.Fatalf("a stopped keeper: %v", err)
	}
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	want := []time.Time{t0, t0.Add(5 * time.Minute), t0.Add(10 * time.Minute), t0.Add(20 * time.Minute), t0.Add(25 * time.Minute)}
	if len(starts) != len(want) {
		t.Fatalf("%d samples, want %d", len(starts), len(want))
	}
	for i := range want {
		if !starts[i].Equal(want[i]) {
			t.Errorf("sample %d at %s, want %s (the 7-minute one skips the 15-minute slot)", i, starts[i].Format("15:04:05"), want[i].Format("15:04:05"))
		}
	}
	stored, err := st.FindCalendarSamples(context.Background(), tare.CalendarFilter{Host: "vm-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The last sample was stopped mid-way: not stored.
	if len(stored) != 4 || len(told) != 4 || failed != 0 {
		t.Fatalf("%d stored, %d told, %d failed; want 4, 4, 0", len(stored), len(told), failed)
	}
	for i, s := range stored {
		if *s.InterferencePct != float64(i)+1 || s.CostCPUMS == nil || s.Level != tare.Clean || !s.Start.Equal(want[i]) {
			t.Errorf("sample %d: %+v", i, s)
		}
	}

	t.Run("once, and a store that fails", func(t *testing.T) {
		broken := openSQLite(t)
		broken.Close()
		k.Store, k.Once = broken, true
		k.Sample = func(ctx context.Context) (tare.Summary, error) {
			return tare.Summary{Run: tare.Run{StartedAt: clock.now, EndedAt: clock.now.Add(time.Second)}}, nil
		}
		if err := k.Loop(context.Background()); err == nil {
			t.Error("the one sample asked for was not stored, and Loop says nothing")
		}
	})
	t.Run("a sampler that fails stops it", func(t *testing.T) {
		k.Store, k.Once = st, false
		boom := errors.New("no /proc")
		k.Sample = func(ctx context.Context) (tare.Summary, error) { return tare.Summary{}, boom }
		if err := k.Loop(context.Background()); !errors.Is(err, boom) {
			t.Errorf("Loop: %v, want %v", err, boom)
		}
	})
}

// calendarOf fills st with days of host's samples, every 15 minutes up
// to now: busy at 03:00 (a backup), quiet at 11:00.
func calendarOf(t *testing.T, st tare.Store, host string, days int, now time.Time) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(days), 9))
	ctx := context.Background()
	for at := now.AddDate(0, 0, -days); at.Before(now); at = at.Add(15 * time.Minute) {
		v := 8.0
		switch at.Hour() {
		case 3:
			v = 60
		case 11:
			v = 1
		}
		v *= 0.8 + 0.4*rng.Float64()
		err := st.AddCalendarSample(ctx, tare.CalendarSample{Host: host, Start: at, End: at.Add(10 * time.Second), Level: tare.Clean,
			InterferencePct: tare.Float(v), Ticks: 10})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// writePlan writes a plan file and reads it.
func writePlan(t *testing.T, text string) *Plan {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkout.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestChooseWindows: windows: auto picks the busiest hour for peak and
// the quietest for off-peak from the host's calendar, records them with
// every run's configuration, and keeps them: once chosen, a calendar that
// learns otherwise does not move them. A dry run keeps nothing.
func TestChooseWindows(t *testing.T) {
	st := openSQLite(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	calendarOf(t, st, "vm-1", 10, now)
	calendarOf(t, st, "vm-2", 2, now) // another host of the store
	pl := writePlan(t, "url: http://127.0.0.1:9/\nrate: 5/s\nduration: 10m\nwindows: auto\ntz: UTC\n")
	ctx := context.Background()

	s, err := pl.Schedule("", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.ChooseWindows(ctx, st, &s, "vm-1", now, false); err != nil {
		t.Fatal(err)
	}
	if kept, _ := st.FindWindowChoice(ctx, s.Protocol); kept != nil {
		t.Errorf("a dry run kept its choice: %+v", kept)
	}
	got := map[string]string{}
	for _, w := range s.Windows {
		got[w.Name] = protocol.FormatWindow(w)
	}
	if got["peak"] != "03:00-04:00" || got["offpeak"] != "11:00-12:00" || got["mid"] == "" {
		t.Fatalf("windows %v: want peak 03:00-04:00 and offpeak 11:00-12:00", got)
	}
	run := pl.SlotRun(s, protocol.Slot{Window: s.Windows[0]}, false)
	var recorded []tare.WindowChoice
	if err := json.Unmarshal([]byte(run.Config[protocol.ConfigCalendar]), &recorded); err != nil || len(recorded) != 3 || recorded[0].Host != "vm-1" {
		t.Errorf("the run records %q (%v): want the three choices and their host", run.Config[protocol.ConfigCalendar], err)
	}
	if sched, err := protocol.ScheduleFromConfig(s.Protocol, run.Config); err != nil || protocol.WindowList(sched.Windows) != protocol.WindowList(s.Windows) {
		t.Errorf("the run's schedule %v, %v; want the chosen windows", sched.Windows, err)
	}

	// Kept: then the calendar moves the backup to 05:00, and the windows
	// stay where they were chosen.
	s, _ = pl.Schedule("", "", 0)
	if _, err := pl.ChooseWindows(ctx, st, &s, "vm-1", now, true); err != nil {
		t.Fatal(err)
	}
	for day := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC); day.Before(now); day = day.AddDate(0, 0, 1) {
		for i := range 8 {
			at := day.Add(time.Duration(i) * time.Minute)
			if err := st.AddCalendarSample(ctx, tare.CalendarSample{Host: "vm-1", Start: at, End: at, InterferencePct: tare.Float(99)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, _ = pl.Schedule("", "", 0)
	if _, err := pl.ChooseWindows(ctx, st, &s, "vm-1", now, true); err != nil {
		t.Fatal(err)
	}
	if w := s.Windows[0]; protocol.FormatWindow(w) != "03:00-04:00" {
		t.Errorf("peak moved to %s once chosen", protocol.FormatWindow(w))
	}
	// Another protocol id chooses afresh, and sees the 05:00 neighbour.
	s, _ = pl.Schedule("checkout-2", "", 0)
	if _, err := pl.ChooseWindows(ctx, st, &s, "vm-1", now, true); err != nil {
		t.Fatal(err)
	}
	if w := s.Windows[0]; protocol.FormatWindow(w) != "05:00-06:00" {
		t.Errorf("a new protocol's peak %s, want 05:00-06:00", protocol.FormatWindow(w))
	}

	t.Run("too few days", func(t *testing.T) {
		s, _ := pl.Schedule("fresh", "", 0)
		_, err := pl.ChooseWindows(ctx, st, &s, "vm-2", now, true)
		if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), "line 4, key windows") || !strings.Contains(err.Error(), "too few days to tell") {
			t.Errorf("vm-2's 2 days: %v; want EINVALID at the plan's windows, too few days to tell", err)
		}
		if kept, _ := st.FindWindowChoice(ctx, "fresh"); kept != nil {
			t.Errorf("a failed choice was kept: %+v", kept)
		}
	})
	t.Run("no calendar", func(t *testing.T) {
		s, _ := pl.Schedule("fresh", "", 0)
		_, err := pl.ChooseWindows(ctx, st, &s, "vm-9", now, true)
		if err == nil || !strings.Contains(err.Error(), "host vm-9 has no calendar samples") || !strings.Contains(err.Error(), "vm-1 (") {
			t.Errorf("a host with no calendar: %v; want it said, and the hosts that have one", err)
		}
	})
	t.Run("a window given as times stays", func(t *testing.T) {
		pl := writePlan(t, "url: http://127.0.0.1:9/\nrate: 5/s\nduration: 10m\nwindows: {peak: busiest, offpeak: 10:00-12:00}\ntz: UTC\n")
		s, _ := pl.Schedule("mixed", "", 0)
		if _, err := pl.ChooseWindows(ctx, st, &s, "vm-1", now, false); err != nil {
			t.Fatal(err)
		}
		if got := protocol.WindowList(s.Windows); got != "peak 05:00-06:00, offpeak 10:00-12:00" {
			t.Errorf("windows %s", got)
		}
	})
}

// TestCompareSaysWhetherAsPredicted: the comparison of a protocol whose
// windows came from the calendar sets each against what its run measured.
func TestCompareSaysWhetherAsPredicted(t *testing.T) {
	chosen := []tare.WindowChoice{
		{Window: "peak", Choice: tare.ChoiceBusiest, From: "03:00", To: "04:00", Host: "vm-1", Predicted: 60, DayLow: 50, DayHigh: 70},
		{Window: "offpeak", Choice: tare.ChoiceQuietest, From: "11:00", To: "12:00", Host: "vm-1", Predicted: 1, DayLow: 0.8, DayHigh: 1.2},
	}
	b, _ := json.Marshal(chosen)
	input := func(window string, others float64) stats.CompareInput {
		return stats.CompareInput{Summary: tare.Summary{
			Run:  tare.Run{ID: window, Window: window, Config: map[string]string{protocol.ConfigCalendar: string(b)}},
			Host: tare.HostSummary{CPUBy: &tare.CPUBy{Others: others}},
		}}
	}
	got := calendarChecks([]stats.CompareInput{input("peak", 2), input("offpeak", 1)})
	if len(got) != 2 {
		t.Fatalf("%d checks", len(got))
	}
	if p := got[0]; p.Window != "peak" || p.AsPredicted == nil || *p.AsPredicted || !strings.Contains(p.Verdict, "quieter than predicted") {
		t.Errorf("peak measured at 2%%: %+v", p)
	}
	if o := got[1]; o.AsPredicted == nil || !*o.AsPredicted || *o.Measured != 1 {
		t.Errorf("offpeak measured at 1%%: %+v", o)
	}
	if calendarChecks([]stats.CompareInput{{Summary: tare.Summary{Run: tare.Run{Window: "peak"}}}}) != nil {
		t.Error("windows given as times: calendar checks")
	}
}
