package host

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testservice"
)

// TestPeersLive: a process that holds a connection to a loopback listener
// has that listener's owner as its peer: the process a system under test
// calls is found, over IPv4 and IPv6; tare's own processes never are, and
// a process with no such connection calls nobody.
func TestPeersLive(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		testservice.Missing(t, "no python3 to play the system under test: install Debian's python3 (scripts/test does, as root)")
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					defer c.Close()
				}
			}()
			host, port, _ := net.SplitHostPort(l.Addr().String())
			// The system under test: connects, says so, and waits (30 s at most).
			sut := exec.Command(python, "-c", "import socket,sys,time\nc=socket.create_connection((sys.argv[1],int(sys.argv[2])))\nprint('connected',flush=True)\ntime.sleep(30)", host, port)
			out, err := sut.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := sut.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { sut.Process.Kill(); sut.Wait() }()
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "connected\n" {
				t.Fatalf("the system under test did not connect: %q, %v", line, err)
			}

			p := newPeers("/proc")
			if !p.look(map[int]bool{sut.Process.Pid: true}, nil) || !slices.Equal(p.list(), []int{os.Getpid()}) {
				t.Errorf("peers of a process connected to %s: %v; want this process, pid %d, the listener's owner", l.Addr(), p.list(), os.Getpid())
			}
			p = newPeers("/proc")
			if p.look(map[int]bool{sut.Process.Pid: true}, map[int]bool{os.Getpid(): true}) || len(p.list()) != 0 {
				t.Errorf("peers with the listener's owner as tare: %v; want none: tare is never the system under test", p.list())
			}
			p = newPeers("/proc")
			if p.look(map[int]bool{os.Getpid(): true}, nil) && slices.Contains(p.list(), sut.Process.Pid) {
				t.Errorf("peers of the listener: %v; the process that connected to it is its client, not a process it calls", p.list())
			}
		})
	}
}

// TestSamplerCountsCalledProcesses: the sampler counts a process the
// system under test calls over loopback with it, within peerEvery
// readings, and says which (Called).
func TestSamplerCountsCalledProcesses(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testservice.Missing(t, "no python3 to play the model server: install Debian's python3 (scripts/test does, as root)")
	}
	pid, port := startListener(t, python)
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// This test process is the system under test here: it called srv.
	s, err := NewSampler(Config{Tick: MinTick, SUT: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 2*peerEvery+2 && !slices.Contains(s.Called(), pid); i++ {
		time.Sleep(20 * time.Millisecond) // a jiffy or two of CPU time between readings
		if _, err := s.Sample(time.Now()); err != nil {
			t.Logf("sample %d: %v", i, err)
		}
	}
	if got := s.Called(); !slices.Equal(got, []int{pid}) {
		t.Fatalf("Called() = %v; want the server it connected to, pid %d", got, pid)
	}
	if !s.members.sut[pid] {
		t.Errorf("the called server, pid %d, is not counted with the system under test", pid)
	}
}

// startListener starts a process that listens on a loopback port, accepts
// one connection and lives 30 s at most, and returns its pid and port. It
// is started through a shell that exits at once, so that it is no
// descendant of this process (which would make it the system under test
// already).
func startListener(t *testing.T, python string) (pid, port int) {
	t.Helper()
	sh := exec.Command("sh", "-c", `"$0" -c "$1" &`, python, "import os,socket,time\ns=socket.socket()\ns.settimeout(30)\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(os.getpid(),s.getsockname()[1],flush=True)\nc,_=s.accept()\ntime.sleep(30)")
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fscan(bufio.NewReader(out), &pid, &port); err != nil {
		t.Fatalf("the server printed no pid and port: %v", err)
	}
	sh.Wait()
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid, port
}

// TestPeersLookAgainOnNewConnections: a look with the same sockets as the
// last finds nothing new (and skips the socket tables); a connection made
// since is looked at, and its listener found.
func TestPeersLookAgainOnNewConnections(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testservice.Missing(t, "no python3 to play the called servers: install Debian's python3 (scripts/test does, as root)")
	}
	sut := map[int]bool{os.Getpid(): true} // this test process calls both
	p := newPeers("/proc")
	for i := range 2 {
		pid, port := startListener(t, python)
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !p.look(sut, nil) || !slices.Contains(p.list(), pid) {
			t.Fatalf("look after connection %d to pid %d: found %v", i+1, pid, p.list())
		}
		if p.look(sut, nil) {
			t.Errorf("a second look at the same connections found something new: %v", p.list())
		}
	}
}
