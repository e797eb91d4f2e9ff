package stats

import (
	"math"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// t0 is the start of every synthetic run: a fixed instant, so golden output
// never drifts.
var t0 = time.Date(2025, 3, 1, 14, 0, 0, 0, time.UTC)

// sec is an instant s seconds into the run.
func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// msd is a duration of v milliseconds.
func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// result is a sent request scheduled at sched seconds, sent lag ms later,
// and done after service ms more.
func result(sched, lag, service float64) *tare.Result {
	s := sec(sched)
	return &tare.Result{
		Scheduled: s,
		Sent:      s.Add(msd(lag)),
		Done:      s.Add(msd(lag + service)),
		Status:    200,
	}
}

// span is a request scheduled at from and done at to, in seconds.
func span(from, to float64) *tare.Result {
	return &tare.Result{Scheduled: sec(from), Sent: sec(from), Done: sec(to), Status: 200}
}

// sample is a host sample over [from, to) seconds with the given aggregate
// steal.
func sample(from, to, steal float64) tare.HostSample {
	return tare.HostSample{
		Start: sec(from),
		End:   sec(to),
		CPU:   tare.CPUShares{CPU: -1, User: 40, System: 10, Steal: steal, Idle: 50 - steal},
	}
}

// newRecorder is NewRecorder that fails the test on error.
func newRecorder(t testing.TB, cfg Config) *Recorder {
	t.Helper()
	if cfg.Start.IsZero() {
		cfg.Start = t0
	}
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatalf("NewRecorder(%+v): %v", cfg, err)
	}
	return r
}

// near checks an optional figure against want. HDR percentiles are within
// 0.1 % (three significant figures); exact figures pass with a tolerance of 0.
func near(t *testing.T, name string, got *float64, want, relTol float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %g", name, want)
		return
	}
	if d := math.Abs(*got - want); d > relTol*math.Abs(want)+1e-9 {
		t.Errorf("%s = %g, want %g (±%g %%)", name, *got, want, 100*relTol)
	}
}

// isNil checks that an optional figure was not measured.
func isNil(t *testing.T, name string, got *float64) {
	t.Helper()
	if got != nil {
		t.Errorf("%s = %g, want nil", name, *got)
	}
}

// hdrTol is the relative error of a three-significant-figure HDR percentile.
const hdrTol = 0.001
