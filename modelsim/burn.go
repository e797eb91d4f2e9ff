package modelsim

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// spin runs n rounds of a 64-bit mixing function (the finaliser of
// splitmix64). Each round depends on the previous one, so the CPU cannot
// overlap them and the time per round is steady; the result is returned so
// the compiler cannot drop the loop.
func spin(x uint64, n int) uint64 {
	for range n {
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
	}
	return x
}

// burnSlice is how many rounds run between two looks at the context: about
// ten microseconds of work, so a cancelled request stops burning at once
// while the check itself costs nothing measurable.
const burnSlice = 4096

// burner turns a duration of CPU work into rounds of spin.
type burner struct {
	perMS float64 // rounds per millisecond of an idle core
}

// rounds is how many rounds d of work is on an idle core.
func (b burner) rounds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(b.perMS * float64(d) / float64(time.Millisecond))
}

// burn does d of CPU work (as measured on an idle core) and returns the
// mixed value, or stops early with ctx's error. Under steal, throttling or
// contention the same work takes longer: burn never looks at the clock.
func (b burner) burn(ctx context.Context, seed uint64, d time.Duration) (uint64, error) {
	x := seed
	n := b.rounds(d)
	done := ctx.Done()
	for n > 0 {
		k := min(n, burnSlice)
		x = spin(x, k)
		n -= k
		select {
		case <-done:
			return x, ctx.Err()
		default:
		}
		// Yield between slices, as the kernel preempts a model in a process
		// of its own: in tare demo the model shares tare's Go scheduler,
		// and a burn holding its P for a whole time slice would make the
		// load generator's pacer beside it late.
		runtime.Gosched()
	}
	return x, nil
}

var (
	calibrateOnce sync.Once
	calibrated    float64
)

// Calibrate returns how many rounds of the work loop one millisecond of this
// machine's CPU runs, measured once per process (the first call takes a few
// milliseconds) and reused after. Each trial is timed on the wall clock and
// the fastest of several wins: steal, throttling or a busy neighbour can only
// slow a trial down, so the fastest one is the closest to an idle core.
func Calibrate() float64 {
	calibrateOnce.Do(func() { calibrated = calibrate(time.Now) })
	return calibrated
}

// calibrate measures rounds per millisecond: it doubles the trial size until
// one trial lasts at least a millisecond (so timer resolution does not
// matter), then keeps the best of five trials of that size.
func calibrate(now func() time.Time) float64 {
	const trials = 5
	n := 1 << 12
	var x uint64 = 1
	var best time.Duration
	for {
		start := now()
		x = spin(x, n)
		best = now().Sub(start)
		if best >= time.Millisecond || n >= 1<<30 {
			break
		}
		n *= 2
	}
	for range trials {
		start := now()
		x = spin(x, n)
		if d := now().Sub(start); d > 0 && d < best {
			best = d
		}
	}
	sink.Store(x)
	if best <= 0 {
		best = time.Nanosecond
	}
	return float64(n) * float64(time.Millisecond) / float64(best)
}
