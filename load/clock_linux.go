package load

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// timerfdClock waits on a timerfd(2) read through Go's network poller. The
// kernel fires the timer at its nanosecond expiry (a timerfd gets no timer
// slack), and the poller wakes the pacer like any socket: no millisecond
// rounding, no thread blocked in a sleep, the same with one P or many.
type timerfdClock struct {
	ctx     context.Context
	fd      int
	file    *os.File
	unwatch func() bool
	buf     [8]byte
}

// newClock returns a timerfd clock, or a Go timer where timerfd is refused.
func newClock(ctx context.Context) clock {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newTimerClock(ctx)
	}
	// A non-blocking descriptor makes the file pollable: Read parks the
	// goroutine in the poller instead of blocking a thread.
	c := &timerfdClock{ctx: ctx, fd: fd, file: os.NewFile(uintptr(fd), "timerfd")}
	c.unwatch = context.AfterFunc(ctx, func() { c.file.SetReadDeadline(time.Unix(1, 0)) })
	return c
}

func (c *timerfdClock) sleepUntil(at time.Time) bool {
	wait := time.Until(at)
	if wait <= 0 {
		return c.ctx.Err() == nil
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(wait))}
	if err := unix.TimerfdSettime(c.fd, 0, &spec, nil); err != nil {
		time.Sleep(wait)
		return c.ctx.Err() == nil
	}
	// The context's end sets a read deadline in the past, which ends a Read
	// in progress or about to start.
	_, err := c.file.Read(c.buf[:])
	return err == nil && c.ctx.Err() == nil
}

func (c *timerfdClock) stop() {
	c.unwatch()
	c.file.Close()
}
