// Package abservice is the service tare ab's tests and benchmark load: a
// loopback HTTP server whose every answer costs a fixed amount of CPU
// work, so that a neighbour taking the CPU slows it as it would a real
// service, and a variant with more work per request is slower by a known
// share.
package abservice

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"
)

// Work does n rounds of a small integer loop and returns its result, so
// that the compiler cannot drop it: CPU work of a fixed size, which
// takes longer when the CPU is shared. It is never inlined: inlined into
// a caller that drops the result (UnitsFor's timing did), the loop's
// work was dead code and went, and the loop that was left counted to n
// six times faster than the handler did the work.
//
//go:noinline
func Work(n int) uint64 {
	x := uint64(88172645463325252)
	for range n * 64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// UnitsFor is about how many rounds of Work take d on this machine now:
// the quickest of a few timings, the one least disturbed by neighbours.
func UnitsFor(d time.Duration) int {
	const probe = 20000
	best := time.Duration(1 << 62)
	var sink uint64
	for range 5 {
		start := time.Now()
		sink ^= Work(probe)
		best = min(best, time.Since(start))
	}
	_ = sink
	return max(1, int(float64(probe)*float64(d)/float64(best)))
}

// Handler answers every request after n rounds of Work.
func Handler(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(strconv.FormatUint(Work(n), 16) + "\n"))
	})
}

// Start serves Handler(n) on a loopback port.
func Start(n int) *httptest.Server { return httptest.NewServer(Handler(n)) }
