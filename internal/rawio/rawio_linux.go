// Package rawio reads and writes non-blocking descriptors (sockets, a
// timerfd) with raw system calls, waiting in Go's poller when a call would
// block.
package rawio

import (
	"io"
	"syscall"
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
// and Close included.
type Conn struct {
	rc syscall.RawConn
}

// New returns a Conn for c, or nil where raw calls are not available (not
// Linux, or c has no descriptor).
func New(c syscall.Conn) *Conn {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	return &Conn{rc: rc}
}

// Read is read(2) into p, waiting in the poller until there is something
// to read; io.EOF at the end.
func (r *Conn) Read(p []byte) (n int, err error) {
	if len(p) == 0 {
		return 0, nil
	}
	werr := r.rc.Read(func(fd uintptr) bool {
		n, err = rawCall(unix.SYS_READ, fd, p)
		return err != unix.EAGAIN
	})
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

// Write is write(2) of all of p, waiting in the poller while the
// descriptor cannot take more.
func (r *Conn) Write(p []byte) (n int, err error) {
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
