package load

import (
	"context"
	"runtime"
	"time"
)

// precise is how much of a wait the pacer sleeps with a precise sleep
// rather than a Go timer. Go's timers wake through the network poller,
// whose timeout counts whole milliseconds, so a timer fires up to a
// millisecond late: a send lag the generator would invent. The timer
// covers the bulk of a long wait cheaply and wakes early; nanosleep(2)
// covers the rest, within the kernel's timer slack (50 µs by default).
//
// With a single P (GOMAXPROCS=1, or tare confined to one CPU) a goroutine
// coming back from a blocking syscall waits for the P behind the workers,
// up to a scheduler time slice: there the timer alone is more punctual.
const precise = 1500 * time.Microsecond

// clock is the pacer's way of waiting for an instant. It belongs to one
// goroutine.
type clock struct {
	timer   *time.Timer
	precise time.Duration
}

func newClock() *clock {
	t := time.NewTimer(time.Hour)
	t.Stop()
	c := &clock{timer: t}
	if runtime.GOMAXPROCS(0) >= 2 {
		c.precise = precise
	}
	return c
}

// sleepUntil waits until at, and reports false if ctx ended first. Only
// the timer part of the wait can be cut short; the precise part is at most
// `precise` long.
func (c *clock) sleepUntil(ctx context.Context, at time.Time) bool {
	if wait := time.Until(at) - c.precise; wait > 0 {
		c.timer.Reset(wait)
		select {
		case <-ctx.Done():
			c.timer.Stop()
			return false
		case <-c.timer.C:
		}
	}
	if wait := time.Until(at); wait > 0 && c.precise > 0 {
		sleepPrecise(wait)
	}
	return ctx.Err() == nil
}

func (c *clock) stop() { c.timer.Stop() }
