package stats

import (
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestRunBlameHasNoWaits: the run's blame, the mean over the ticks', has
// no Waits and no WaitsLost: only the ticks keep them.
func TestRunBlameHasNoWaits(t *testing.T) {
	var totals blameTotals
	start := time.Unix(1000, 0)
	for i := range 3 {
		s := start.Add(time.Duration(i) * time.Second)
		totals.add(&tare.HostSample{Start: s, End: s.Add(time.Second), Blame: &tare.Blame{
			Source: tare.BlameMeasured, WaitPct: 2, Behind: []tare.Behind{{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7}, WaitPct: 2}},
			Waits:     []tare.Wait{{Start: s, End: s.Add(time.Millisecond), Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "sh", PID: 7, Waited: time.Millisecond}},
			WaitsLost: 4,
		}}, 1)
	}
	b := totals.summary()
	if b == nil || b.Source != tare.BlameMeasured {
		t.Fatalf("the run's blame = %+v, want it measured", b)
	}
	if b.Waits != nil || b.WaitsLost != 0 {
		t.Errorf("the run's blame has %d waits, %d lost; want none", len(b.Waits), b.WaitsLost)
	}
}
