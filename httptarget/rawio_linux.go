package httptarget

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIO reads and writes a connection's socket with raw system calls.
// net.Conn enters each call through the scheduler's syscall path, which
// wakes the runtime's monitor thread whenever every P had gone idle: at a
// moderate rate that is every request, twice, each a futex wake and two
// context switches, nearly a third of the generator's CPU. The socket is
// non-blocking, so a raw call returns at once; when it would block,
// RawConn waits in the poller exactly as net.Conn does, deadlines and
// Close included.
type rawIO struct {
	rc syscall.RawConn
}

func newRawIO(c net.Conn) *rawIO {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawIO{rc: rc}
}

func (r *rawIO) read(p []byte) (n int, err error) {
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

func (r *rawIO) write(p []byte) (n int, err error) {
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
