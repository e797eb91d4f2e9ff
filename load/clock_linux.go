package load

import (
	"context"
	"errors"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare/internal/rawio"
)

// timerfdClock waits on a timerfd(2) read through Go's network poller. The
// kernel fires the timer at its nanosecond expiry (a timerfd gets no timer
// slack), and the poller wakes the pacer like any socket: no millisecond
// rounding, no thread blocked in a sleep, the same with one P or many.
//
// Both calls are raw: a system call through the scheduler's syscall path
// wakes the runtime's monitor thread when every P had gone idle, which at
// a moderate rate is every arrival (see internal/rawio).
type timerfdClock struct {
	ctx     context.Context
	fd      int
	file    *os.File
	raw     *rawio.Conn
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
	if c.raw = rawio.New(c.file); c.raw == nil {
		c.file.Close()
		return newTimerClock(ctx)
	}
	c.unwatch = context.AfterFunc(ctx, func() { c.file.SetReadDeadline(time.Unix(1, 0)) })
	return c
}

func (c *timerfdClock) sleepUntil(at time.Time) bool {
	wait := time.Until(at)
	if wait <= 0 {
		return c.ctx.Err() == nil
	}
	// The poller is consulted only when a P runs out of work: while every P
	// is kept busy (goroutines that yield, never block) the timerfd's wake
	// would wait for the runtime's 10 ms network poll. A read deadline at
	// the same instant is a runtime timer, checked whenever a P schedules,
	// so the wait ends on time either way.
	c.file.SetReadDeadline(at)
	if c.ctx.Err() != nil {
		// The context's end set a deadline in the past, which the line
		// above may have overwritten.
		return false
	}
	// Armed inside the read's poller wait, the timer's expiry cannot be
	// missed, and the one read(2) is the one that finds it.
	armed := true
	_, err := c.raw.ReadAfter(c.buf[:], func(fd uintptr) error {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(wait))}
		_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
		if e != 0 {
			armed = false
			return e
		}
		return nil
	})
	switch {
	case !armed:
		time.Sleep(time.Until(at))
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
		return false
	}
	return c.ctx.Err() == nil
}

func (c *timerfdClock) stop() {
	c.unwatch()
	c.file.Close()
}
