package scenario

import (
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestOwnTail: the hogs' effect is the run's p99 over that of its
// requests without them, its first second left out, with an interval
// that holds it; too few requests without them measure nothing.
func TestOwnTail(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	// 12 s at 200/s, 1.0-1.6 ms each; one in 25 takes 6 ms where slow
	// says so. The hogs run in odd seconds.
	run := func(slow func(i int, on bool) bool) []*tare.Result {
		var out []*tare.Result
		for i := range 2400 {
			at := t0.Add(time.Duration(i) * 5 * time.Millisecond)
			on := int(at.Sub(t0)/time.Second)%2 == 1
			lat := time.Millisecond + time.Duration(i%7)*100*time.Microsecond
			if slow(i, on) {
				lat = 6 * time.Millisecond
			}
			if i < 200 {
				lat = 50 * time.Millisecond // the cold first second
			}
			out = append(out, &tare.Result{Scheduled: at, Done: at.Add(lat)})
		}
		return out
	}
	evenSeconds := func(at time.Time) bool { return int(at.Sub(t0)/time.Second)%2 == 0 }
	for _, tt := range []struct {
		name          string
		slow          func(i int, on bool) bool
		without       func(time.Time) bool
		ratio, lo, hi float64 // the interval must lie within [lo, hi]
		withoutN      int
	}{
		{"the hogs slowed their seconds", func(i int, on bool) bool { return on && i%25 == 0 }, evenSeconds, 6 / 1.6, 1.5, 4, 1000},
		{"the hogs slowed nothing", func(i int, on bool) bool { return i%25 == 0 }, evenSeconds, 1, 0.9, 1.1, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			own := ownTail(run(tt.slow), tt.without)
			if own == nil {
				t.Fatal("ownTail = nil")
			}
			if r := own.Ratio(); r < tt.ratio*0.999 || r > tt.ratio*1.001 {
				t.Errorf("ratio %.3f (p99 %.2f over %.2f ms), want %.3f", r, own.P99, own.Without, tt.ratio)
			}
			if own.Requests != 2200 || own.WithoutRequests != tt.withoutN {
				t.Errorf("requests %d, without the hogs %d; want 2200 (the first second left out) and %d", own.Requests, own.WithoutRequests, tt.withoutN)
			}
			if own.Lo < tt.lo || own.Hi > tt.hi || own.Lo > own.Ratio() || own.Hi < own.Ratio() {
				t.Errorf("interval %.2f-%.2f×, want it within %.2f-%.2f× and holding the ratio %.2f", own.Lo, own.Hi, tt.lo, tt.hi, own.Ratio())
			}
		})
	}
	if own := ownTail(run(func(int, bool) bool { return false }), func(at time.Time) bool { return at.Sub(t0) < 1490*time.Millisecond }); own != nil {
		t.Errorf("ownTail of 99 requests without the hogs = %+v, want nil", own)
	}
}
