// Command gofloor is bench/floor written in Go: one goroutine, one
// keep-alive connection, a timerfd for the schedule, each waited on in
// Go's poller with raw system calls (as tare's engine does), and nothing
// else: no HTTP parsing beyond counting responses, no results kept. Beside
// the C floor it shows what the Go runtime alone costs per request.
//
//	gofloor 127.0.0.1:8080 2000 10000   # address, rate per second, requests
//
// Prints "cpu_s <user+system seconds> requests <n>". Loopback only.
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare/internal/rawio"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gofloor 127.0.0.1:PORT RATE REQUESTS")
		os.Exit(2)
	}
	addr, err := net.ResolveTCPAddr("tcp", os.Args[1])
	if err != nil || !addr.IP.IsLoopback() {
		fmt.Fprintf(os.Stderr, "gofloor: %s is not a loopback address\n", os.Args[1])
		os.Exit(2)
	}
	rate, _ := strconv.Atoi(os.Args[2])
	n, _ := strconv.Atoi(os.Args[3])
	gap := time.Second / time.Duration(rate)

	c, err := net.DialTCP("tcp", nil, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(1)
	}
	conn := rawio.New(c)
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor: timerfd:", err)
		os.Exit(1)
	}
	timer := rawio.New(fileConn{os.NewFile(uintptr(fd), "timerfd")})

	req := []byte("GET / HTTP/1.1\r\nHost: floor\r\n\r\n")
	mark := []byte("HTTP/1.1 ")
	buf := make([]byte, 8192)
	var ticks [8]byte
	start := time.Now()
	got := 0
	for sent := 0; sent < n; sent++ {
		wait := time.Until(start.Add(time.Duration(sent) * gap))
		if wait > 0 {
			spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(wait))}
			timer.ReadAfter(ticks[:], func(fd uintptr) error { return unix.TimerfdSettime(int(fd), 0, &spec, nil) })
		}
		conn.Hold(req)
		// One response per request: the server answers before the next.
		for want := got + 1; got < want; {
			k, err := conn.Read(buf)
			if err != nil {
				fmt.Fprintln(os.Stderr, "gofloor: read:", err)
				os.Exit(1)
			}
			got += bytes.Count(buf[:k], mark)
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("cpu_s %.3f requests %d\n", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), got)
}

// fileConn gives an *os.File the syscall.Conn rawio takes.
type fileConn struct{ *os.File }
