// Command gofloor is bench/floor written in Go: one goroutine, one
// keep-alive connection, a timerfd for the schedule, and nothing else: no
// HTTP parsing beyond counting responses, no results kept. Beside the C
// floor it shows what the Go runtime alone costs per request.
//
//	gofloor 127.0.0.1:8080 2000 10000         # address, rate per second, requests
//	gofloor -epoll 127.0.0.1:8080 2000 10000  # the same outside Go's poller
//
// By default each wait is in Go's poller, with raw system calls, as
// tare's engine waits (internal/rawio). With -epoll the goroutine keeps
// its OS thread and waits in an epoll of its own with a raw epoll_wait,
// as the C floor does: what an engine outside Go's scheduler would cost.
//
// Prints "cpu_s <user+system seconds> requests <n>". Loopback only.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare/internal/rawio"
)

var (
	request = []byte("GET / HTTP/1.1\r\nHost: floor\r\n\r\n")
	mark    = []byte("HTTP/1.1 ")
)

func main() {
	ownEpoll := flag.Bool("epoll", false, "wait in an epoll of its own on a locked OS thread, not in Go's poller")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: gofloor [-epoll] 127.0.0.1:PORT RATE REQUESTS")
		os.Exit(2)
	}
	addr, err := net.ResolveTCPAddr("tcp", flag.Arg(0))
	if err != nil || !addr.IP.IsLoopback() {
		fmt.Fprintf(os.Stderr, "gofloor: %s is not a loopback address\n", flag.Arg(0))
		os.Exit(2)
	}
	rate, _ := strconv.Atoi(flag.Arg(1))
	n, _ := strconv.Atoi(flag.Arg(2))
	gap := time.Second / time.Duration(rate)

	var got int
	if *ownEpoll {
		got, err = ownLoop(addr, gap, n)
	} else {
		got, err = pollerLoop(addr, gap, n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(1)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("cpu_s %.3f requests %d\n", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), got)
}

// pollerLoop waits in Go's poller: the timer armed and the request written
// inside the read's wait (rawio's ReadAfter and Hold), as tare does.
func pollerLoop(addr *net.TCPAddr, gap time.Duration, n int) (int, error) {
	c, err := net.DialTCP("tcp", nil, addr)
	if err != nil {
		return 0, err
	}
	conn := rawio.New(c)
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("timerfd: %w", err)
	}
	timer := rawio.New(fileConn{os.NewFile(uintptr(fd), "timerfd")})
	buf := make([]byte, 8192)
	var ticks [8]byte
	start := time.Now()
	got := 0
	for sent := 0; sent < n; sent++ {
		if wait := time.Until(start.Add(time.Duration(sent) * gap)); wait > 0 {
			spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(wait))}
			timer.ReadAfter(ticks[:], func(fd uintptr) error { return settime(int(fd), 0, &spec) })
		}
		conn.Hold(request)
		// One response per request: the server answers before the next.
		for want := got + 1; got < want; {
			k, err := conn.Read(buf)
			if err != nil {
				return got, fmt.Errorf("read: %w", err)
			}
			got += bytes.Count(buf[:k], mark)
		}
	}
	return got, nil
}

// ownLoop is bench/floor's loop in Go: descriptors Go's poller never sees,
// one epoll, every call raw, on a thread of its own.
func ownLoop(addr *net.TCPAddr, gap time.Duration, n int) (int, error) {
	runtime.LockOSThread()
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	sa := &unix.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := unix.Connect(s, sa); err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	tf, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("timerfd: %w", err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return 0, err
	}
	for _, fd := range []int{tf, s} {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return 0, err
		}
	}
	var t0 unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &t0)
	arm := func(sent int) {
		at := t0.Nano() + int64(sent)*int64(gap)
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(at)}
		settime(tf, unix.TFD_TIMER_ABSTIME, &spec)
	}
	arm(0)
	buf := make([]byte, 8192)
	var ticks [8]byte
	var events [2]unix.EpollEvent
	sent, got := 0, 0
	for got < n {
		k, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), 2, ^uintptr(0), 0, 0)
		if e == unix.EINTR {
			continue
		} else if e != 0 {
			return got, fmt.Errorf("epoll_wait: %w", e)
		}
		for _, ev := range events[:k] {
			if int(ev.Fd) == tf {
				rawCall(unix.SYS_READ, tf, ticks[:])
				if sent < n {
					rawCall(unix.SYS_WRITE, s, request)
					sent++
					arm(sent)
				}
				continue
			}
			r := rawCall(unix.SYS_READ, s, buf)
			if r <= 0 {
				return got, fmt.Errorf("the server closed the connection")
			}
			got += bytes.Count(buf[:r], mark)
		}
	}
	return got, nil
}

// settime is timerfd_settime(2), raw, as tare's clock calls it.
func settime(fd, flags int, spec *unix.ItimerSpec) error {
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(fd), uintptr(flags), uintptr(unsafe.Pointer(spec)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawCall is read(2) or write(2) of p on fd, raw; -1 on an error.
func rawCall(trap uintptr, fd int, p []byte) int {
	r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1
	}
	return int(r)
}

// fileConn gives an *os.File the syscall.Conn rawio takes.
type fileConn struct{ *os.File }
