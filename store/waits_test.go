package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestTickWaits: a tick's measured blame keeps its Waits (each key, times
// to the nanosecond) and WaitsLost through the store, as a stored run is
// judged again from them.
func TestTickWaits(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		ticks := makeTicks(0, 3)
		h := ticks[2].Host
		at := func(ns int) time.Time { return h.Start.Add(time.Duration(ns)) }
		h.Blame.Waits = []tare.Wait{
			{Start: at(1_000_001), End: at(3_500_007), CPU: 1, Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "nightly-batch", PID: 4121, Root: 4120, Waited: 2_500_006},
			{Start: at(2_000_000), End: at(2_040_000), CPU: 0, Group: tare.OwnerTare, Owner: tare.OwnerWakeup, Waited: 80_000},
		}
		h.Blame.WaitsLost = 17
		if err := s.AppendTicks(ctx, id, ticks); err != nil {
			t.Fatal(err)
		}
		got, err := s.FindTicks(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ticks) || got[2].Host == nil || got[2].Host.Blame == nil {
			t.Fatalf("FindTicks = %+v, want %d ticks, the last with blame", got, len(ticks))
		}
		if b := got[2].Host.Blame; !reflect.DeepEqual(b.Waits, h.Blame.Waits) || b.WaitsLost != h.Blame.WaitsLost {
			t.Errorf("waits\n%+v, %d lost\nwant\n%+v, %d lost", b.Waits, b.WaitsLost, h.Blame.Waits, h.Blame.WaitsLost)
		}
	})
}
