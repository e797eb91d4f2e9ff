package load

import (
	"context"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// burst is a schedule of n arrivals all due at the start: the engine
// dispatches them as fast as it can.
type burst struct{ n, i int }

func (b *burst) Next() (time.Duration, bool) {
	if b.i >= b.n {
		return 0, false
	}
	b.i++
	return 0, true
}

// BenchmarkDispatch is the engine's own cost per request: pacing, handing
// the arrival to a worker and streaming its result, with a target that
// does nothing.
func BenchmarkDispatch(b *testing.B) {
	noop := tare.TargetFunc(func(context.Context, *tare.Result) {})
	r := New(noop, Config{MaxInFlight: 64})
	out := make(chan *Batch, 64)
	done := make(chan struct{})
	go func() {
		for b := range out {
			b.Release()
		}
		close(done)
	}()
	b.ReportAllocs()
	b.ResetTimer()
	r.Run(context.Background(), time.Now(), &burst{n: b.N}, out)
	<-done
}
