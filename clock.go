package tare

import (
	"context"
	"time"
)

// MeasureOffset measures another clock against the local one: read returns
// the other clock's time, now the local one. Of n readings, the one with
// the shortest round trip, taken as made at its middle, gives offset =
// other − local, with an error of at most rtt/2.
func MeasureOffset(now func() time.Time, read func() (time.Time, error), n int) (offset, rtt time.Duration, at time.Time, err error) {
	for i := range max(n, 1) {
		t0 := now()
		other, err := read()
		t1 := now()
		if err != nil {
			return 0, 0, time.Time{}, err
		}
		if r := t1.Sub(t0); i == 0 || r < rtt {
			mid := t0.Add(r / 2)
			offset, rtt, at = other.Sub(mid), r, mid
		}
	}
	return offset, rtt, at, nil
}

// Sleep waits for d, or until ctx is done, whichever comes first, and
// returns ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
