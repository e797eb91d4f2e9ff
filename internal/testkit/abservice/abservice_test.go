package abservice

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestCalibratedWorkIsTheHandlersWork: UnitsFor times the work the
// handler does. Inlined into a caller that dropped its result, Work's
// loop lost its work and UnitsFor timed an empty loop: the handler took
// six times the duration asked for, and the benchmark's "2 ms" service
// was a 12 ms one, saturated. Both are timed here, the quickest of a
// few, and compared with each other, not with a clock's figure.
func TestCalibratedWorkIsTheHandlersWork(t *testing.T) {
	units := UnitsFor(2 * time.Millisecond)
	quickest := func(f func()) time.Duration {
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			f()
			best = min(best, time.Since(start))
		}
		return best
	}
	//lint:ignore SA4017 the result dropped is what is tested
	dropped := quickest(func() { Work(units) })
	h := Handler(units)
	served := quickest(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
	if ratio := float64(served) / float64(dropped); ratio > 2 {
		t.Errorf("the handler took %v with %d units, Work alone with its result dropped %v: %.1f×, want about 1×", served, units, dropped, ratio)
	}
}
