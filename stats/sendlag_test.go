package stats

import (
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestTickSendLagMax: each tick keeps the latest send of the arrivals
// scheduled in it, so the verdict can tell in which seconds tare sent late.
func TestTickSendLagMax(t *testing.T) {
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	rec, err := NewRecorder(Config{Start: start, Tick: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, lag := range []time.Duration{time.Millisecond, 15 * time.Millisecond, 2 * time.Millisecond, 0} {
		at := start.Add(time.Second + time.Duration(i)*200*time.Millisecond) // all in tick 1
		if i == 3 {
			at = start.Add(2500 * time.Millisecond) // tick 2
		}
		rec.AddResult(&tare.Result{Seq: uint64(i), Scheduled: at, Sent: at.Add(lag), Done: at.Add(lag + time.Millisecond)})
	}
	rec.AddResult(&tare.Result{Seq: 4, Scheduled: start.Add(2600 * time.Millisecond), Dropped: true})
	ticks := rec.Ticks()
	want := []time.Duration{0, 15 * time.Millisecond, 0}
	if len(ticks) < len(want) {
		t.Fatalf("%d ticks, want %d", len(ticks), len(want))
	}
	for i, w := range want {
		if got := ticks[i].SendLagMax; got != w {
			t.Errorf("tick %d: send lag max %v, want %v", i, got, w)
		}
	}
}
