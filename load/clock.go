package load

import (
	"context"
	"time"
)

// clock is the pacer's way of waiting for an instant. Implementations
// belong to one goroutine.
type clock interface {
	// sleepUntil waits until at, and reports false if the run's context
	// ended first.
	sleepUntil(at time.Time) bool
	stop()
}

// timerClock waits on a Go timer. Go's timers wake through the network
// poller, whose timeout counts whole milliseconds, so a wait can end up to a
// millisecond late: a send lag the generator would invent. It is the
// fallback where the kernel has no timerfd.
type timerClock struct {
	ctx   context.Context
	timer *time.Timer
}

func newTimerClock(ctx context.Context) *timerClock {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerClock{ctx: ctx, timer: t}
}

func (c *timerClock) sleepUntil(at time.Time) bool {
	if wait := time.Until(at); wait > 0 {
		c.timer.Reset(wait)
		select {
		case <-c.ctx.Done():
			c.timer.Stop()
			return false
		case <-c.timer.C:
		}
	}
	return c.ctx.Err() == nil
}

func (c *timerClock) stop() { c.timer.Stop() }
