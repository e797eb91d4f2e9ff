package rawio

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// echoServer answers each connection: it reads until it has want bytes,
// then writes back their count, and closes.
func echoServer(t *testing.T, want int) (addr string, got chan []byte) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got = make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		b := make([]byte, want)
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
		c.Write([]byte(strconv.Itoa(n)))
	}()
	return l.Addr().String(), got
}

func dial(t *testing.T, addr string) (*Conn, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return New(c.(*net.TCPConn)), c
}

// TestHoldThenRead: what Hold keeps is written, in order, by the next
// Read, which returns the answer; whether it fits the socket's buffer or
// is many times larger (written in part, the rest waiting for room).
func TestHoldThenRead(t *testing.T) {
	for _, size := range []int{12, 32 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			req := bytes.Repeat([]byte("abcdefghijk\n"), size/12)
			addr, got := echoServer(t, len(req))
			r, _ := dial(t, addr)
			r.Hold(req[:len(req)/2])
			r.Hold(req[len(req)/2:])
			if r.Held() != len(req) {
				t.Fatalf("Held() = %d after holding %d bytes", r.Held(), len(req))
			}
			buf := make([]byte, 64)
			n, err := r.Read(buf)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if string(buf[:n]) != strconv.Itoa(len(req)) {
				t.Errorf("answer %q; want the server to have read all %d bytes", buf[:n], len(req))
			}
			if b := <-got; !bytes.Equal(b, req) {
				t.Errorf("the server read %d bytes, not the %d held, in order", len(b), len(req))
			}
			if r.Held() != 0 {
				t.Errorf("Held() = %d after the Read", r.Held())
			}
		})
	}
}

// TestHoldThenWrite: a Write sends what Hold keeps before its own bytes.
func TestHoldThenWrite(t *testing.T) {
	addr, got := echoServer(t, 6)
	r, _ := dial(t, addr)
	r.Hold([]byte("abc"))
	if n, err := r.Write([]byte("def")); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b := <-got; string(b) != "abcdef" {
		t.Errorf("the server read %q; want what was held, then what was written", b)
	}
}

// TestHeldReadDeadline: a held write's read ends at the read deadline
// when no answer comes, as any read does.
func TestHeldReadDeadline(t *testing.T) {
	addr, _ := echoServer(t, 1<<20) // never has enough to answer
	r, c := dial(t, addr)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	r.Hold([]byte("abc"))
	if _, err := r.Read(make([]byte, 8)); !isTimeout(err) {
		t.Errorf("Read with no answer: %v; want the deadline's timeout", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestSetTimerAt: a timer armed for an instant fires then, never before;
// one armed for an instant past fires at once; the zero Time disarms.
func TestSetTimerAt(t *testing.T) {
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tfd)
	fired := func(msec int) bool {
		t.Helper()
		fds := []unix.PollFd{{Fd: int32(tfd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, msec)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
	}
	at := time.Now().Add(3 * time.Millisecond)
	if err := SetTimerAt(tfd, at); err != nil {
		t.Fatal(err)
	}
	if !fired(10_000) {
		t.Fatal("a timer armed 3 ms ahead had not fired after 10 s")
	}
	if early := time.Until(at); early > 0 {
		t.Fatalf("the timer fired %v before its instant", early)
	}
	SetTimerAt(tfd, time.Now().Add(-time.Second))
	if !fired(10_000) {
		t.Fatal("a timer armed for an instant past had not fired after 10 s")
	}
	SetTimerAt(tfd, time.Now().Add(20*time.Millisecond))
	SetTimerAt(tfd, time.Time{})
	if fired(100) {
		t.Fatal("a disarmed timer fired")
	}
}
