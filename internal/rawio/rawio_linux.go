// Package rawio reads and writes non-blocking descriptors (sockets, a
// timerfd) with raw system calls, waiting in Go's poller when a call would
// block.
package rawio

import (
	"io"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn reads and writes a descriptor with raw system calls. net.Conn and
// os.File enter each call through the scheduler's syscall path, which
// wakes the runtime's monitor thread whenever every P had gone idle: for a
// load generator at a moderate rate that is every request, twice, each a
// futex wake and two context switches, nearly a third of its CPU. The
// descriptor is non-blocking, so a raw call returns at once; when it would
// block, RawConn waits in the poller exactly as net.Conn does, deadlines
// and Close included. Like a request and its answer, a Conn's reads and
// writes are for one goroutine at a time.
type Conn struct {
	rc      syscall.RawConn
	pending []byte // kept by Hold, written by the next Read or Write

	// One read's state, for readFn (made once: a closure per call
	// would be an allocation per call).
	p      []byte
	n      int
	err    error
	start  func(fd uintptr) error
	readFn func(fd uintptr) bool
	holdFn func(fd uintptr) error
}

// New returns a Conn for c, or nil where raw calls are not available (not
// Linux, or c has no descriptor).
func New(c syscall.Conn) *Conn {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	r := &Conn{rc: rc}
	r.readFn, r.holdFn = r.read, r.writePending
	return r
}

// Hold keeps a copy of p to be written by the next Read, just before it
// waits for the answer. A request written, then read, costs a read(2)
// that finds nothing (the server has had no time to answer) before the
// wait: a system call per request for nothing. Written inside the read's
// own poller wait, after the poller's readiness was reset, the answer
// cannot be missed however soon it comes, and the first read(2) finds it.
func (r *Conn) Hold(p []byte) { r.pending = append(r.pending, p...) }

// Held is how many bytes Hold keeps for the next Read or Write.
func (r *Conn) Held() int { return len(r.pending) }

// Read is read(2) into p, waiting in the poller until there is something
// to read; io.EOF at the end. What Hold keeps is written first.
func (r *Conn) Read(p []byte) (n int, err error) {
	if len(r.pending) == 0 {
		return r.ReadAfter(p, nil)
	}
	n, err = r.ReadAfter(p, r.holdFn)
	if err == unix.EAGAIN {
		// The descriptor took only part of what is held: the rest waits
		// for room as any write does, then the answer as any read does.
		if _, err := r.Write(nil); err != nil {
			return 0, err
		}
		return r.ReadAfter(p, nil)
	}
	r.pending = r.pending[:0]
	return n, err
}

// writePending is write(2) of what Hold keeps, keeping what the
// descriptor did not take.
func (r *Conn) writePending(fd uintptr) error {
	w, err := writeSome(fd, r.pending)
	r.pending = r.pending[:copy(r.pending, r.pending[w:])]
	return err
}

// ReadAfter is Read with start called on the descriptor first, inside the
// poller's wait: the poller's readiness is reset before start, so what
// start brings about (the answer to a write, a timer's expiry) cannot be
// missed however soon it comes, and no read(2) is made before it, to find
// nothing. An error of start's ends the read.
func (r *Conn) ReadAfter(p []byte, start func(fd uintptr) error) (n int, err error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err, r.start = p, 0, nil, start
	werr := r.rc.Read(r.readFn)
	n, err = r.n, r.err
	r.p, r.err, r.start = nil, nil, nil
	switch {
	case werr != nil:
		return 0, werr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is one call of the poller's read loop: start first, then read(2)
// until it finds something.
func (r *Conn) read(fd uintptr) bool {
	if r.start != nil {
		r.err, r.start = r.start(fd), nil
		return r.err != nil
	}
	r.n, r.err = rawCall(unix.SYS_READ, fd, r.p)
	return r.err != unix.EAGAIN
}

// Write is write(2) of what Hold keeps and then of all of p, waiting in
// the poller while the descriptor cannot take more.
func (r *Conn) Write(p []byte) (n int, err error) {
	if len(r.pending) > 0 {
		_, err = r.write(r.pending)
		r.pending = r.pending[:0]
		if err != nil {
			return 0, err
		}
	}
	return r.write(p)
}

func (r *Conn) write(p []byte) (n int, err error) {
	for n < len(p) && err == nil {
		var w int
		werr := r.rc.Write(func(fd uintptr) bool {
			w, err = rawCall(unix.SYS_WRITE, fd, p[n:])
			return err != unix.EAGAIN
		})
		if werr != nil {
			return n, werr
		}
		n += w
	}
	return n, err
}

// writeSome is write(2) of p until all of it is written or the descriptor
// would block (unix.EAGAIN, with n written).
func writeSome(fd uintptr, p []byte) (n int, err error) {
	for n < len(p) {
		w, err := rawCall(unix.SYS_WRITE, fd, p[n:])
		if err != nil {
			return n, err
		}
		n += w
	}
	return n, nil
}

// rawCall is read(2) or write(2) of p on fd, retried when a signal
// interrupts it.
func rawCall(trap, fd uintptr, p []byte) (int, error) {
	for {
		r, _, e := unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// The calls below are for a thread that waits in an epoll of its own
// (load's event loop), on descriptors Go's poller never sees: each is one
// raw system call, never the scheduler's syscall path.

// Read is read(2) of p on fd: 0 and nil at the end of file, unix.EAGAIN
// when there is nothing to read yet.
func Read(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return rawCall(unix.SYS_READ, uintptr(fd), p)
}

// Write is write(2) of p on fd, until all of it is written or fd would
// block (unix.EAGAIN, with n written).
func Write(fd int, p []byte) (n int, err error) { return writeSome(uintptr(fd), p) }

// EpollWait is epoll_wait(2) for at most msec milliseconds (-1: until an
// event). A signal ends it early with no events and no error: Go's
// preemption signal is one, and the caller's loop, calling back into Go,
// lets the runtime stop it (a garbage collection waits for that).
func EpollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	switch e {
	case 0:
		return int(n), nil
	case unix.EINTR:
		return 0, nil
	}
	return 0, e
}

// SetTimerAt arms the timerfd fd to expire once at the instant at, or
// disarms it when at is the zero Time. Either clears an expiry not yet
// read: a timer re-armed needs no read(2) to stop being ready. The
// instant is absolute: a timer armed for an arrival fires at the
// arrival, however long the caller took since it read the clock (a
// relative timer fired that much late).
func SetTimerAt(fd int, at time.Time) error {
	var spec unix.ItimerSpec
	if !at.IsZero() {
		base := monotonicBase()
		// A past instant fires at once; the zero Timespec would disarm.
		spec.Value = unix.NsecToTimespec(max(base.ns+int64(at.Sub(base.at)), 1))
	}
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(fd), unix.TFD_TIMER_ABSTIME, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// monotonicBase is one instant both as a time.Time and on the kernel's
// CLOCK_MONOTONIC, in nanoseconds: Go's monotonic readings count on that
// clock, from an origin of their own, so the two differ by a constant.
var monotonicBase = sync.OnceValue(func() (b struct {
	at time.Time
	ns int64
}) {
	var ts unix.Timespec
	before := time.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	after := time.Now()
	b.at, b.ns = before.Add(after.Sub(before)/2), ts.Nano()
	return b
})
