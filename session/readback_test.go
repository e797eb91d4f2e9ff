package session

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// TestReadBackKeepsTheTail: a run stored with its ticks' probe waits and
// read back (ReadBack) has the per-request blame and the verdict the live
// run had: the same Tail, the same code's own latency, the same level and
// signals. The live run is synthetic (results and measured host samples
// fed in time order, as Measure's consumer does) and finished by the same
// step as Measure's.
func TestReadBackKeepsTheTail(t *testing.T) {
	const tick = 100 * time.Millisecond
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	th := judge.DefaultThresholds()
	rec, err := stats.NewRecorder(stats.Config{Start: start, Tick: tick, Threshold: th.Steal})
	if err != nil {
		t.Fatal(err)
	}
	// 3 s of requests every 10 ms taking 1 ms, but for 6 of the 10 of
	// tick 12, which a neighbour's wait over the whole tick held up to 40 ms.
	hog := tare.Wait{Start: at(1200), End: at(1300), Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "hog", PID: 42, Root: 42, Waited: 100 * time.Millisecond}
	var results []tare.Result
	seq := uint64(0)
	for k := range 30 {
		for i := range 10 {
			from := float64(k*100 + i*10)
			took := 1.0
			if k == 12 && i < 6 {
				from, took = 1200+float64(i)*10, 40
			}
			res := tare.Result{Seq: seq, Scheduled: at(from), Sent: at(from), Done: at(from + took), Status: 200}
			seq++
			rec.AddResult(&res)
			results = append(results, res)
		}
		h := tare.HostSample{Start: at(float64(k * 100)), End: at(float64(k*100 + 100)),
			CPU:   tare.CPUShares{CPU: -1, User: 40, System: 10, Idle: 50},
			Blame: &tare.Blame{Source: tare.BlameMeasured, Behind: []tare.Behind{}}}
		if k == 12 {
			h.Blame.Waits = []tare.Wait{hog}
		}
		rec.AddHost(h)
	}
	run := tare.Run{ID: store.NewRunID(), Label: "live", Target: "synthetic", Arrival: "constant 100/s",
		StartedAt: start, EndedAt: at(3000), Status: tare.StatusComplete}
	live, ticks := finish(rec, closing{run: run, span: arrivalSpan(2990*time.Millisecond, len(results), 10*time.Millisecond), thresholds: th})
	if live.Tail == nil || live.Tail.Overlapped != 10 {
		t.Fatalf("live tail = %+v, want the 10 requests of tick 12 overlapped by the hog's wait", live.Tail)
	}

	ctx := context.Background()
	st := sqlite(t)
	stored := run
	stored.Status = tare.StatusRunning
	if err := st.CreateRun(ctx, stored, live.Env); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendResults(ctx, run.ID, results); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendTicks(ctx, run.ID, ticks); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, live); err != nil {
		t.Fatal(err)
	}

	back, _, err := ReadBack(ctx, st, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Tail, live.Tail) {
		t.Errorf("tail read back\n%+v\nwant the live run's\n%+v", back.Tail, live.Tail)
	}
	if !reflect.DeepEqual(back.CleanLatency, live.CleanLatency) {
		t.Errorf("code's own latency read back %+v, want the live run's %+v", back.CleanLatency, live.CleanLatency)
	}
	if back.Verdict.Level != live.Verdict.Level || !reflect.DeepEqual(fired(back.Verdict), fired(live.Verdict)) {
		t.Errorf("verdict read back %s %v, want the live run's %s %v", back.Verdict.Level, fired(back.Verdict), live.Verdict.Level, fired(live.Verdict))
	}
	if !slices.Contains(fired(live.Verdict), judge.SignalTail) {
		t.Errorf("live signals fired %v: want the tail's", fired(live.Verdict))
	}
}

func fired(v tare.Verdict) []string {
	var names []string
	for _, s := range judge.Fired(v) {
		names = append(names, s.Name)
	}
	return names
}
