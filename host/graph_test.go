package host

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
)

// liveGraph is a graph of the live host whose first part is sut, with
// tare's processes, and the members found from it.
func liveGraph(t *testing.T, sut, tare []int) (*graph, *members, map[int]procStat) {
	t.Helper()
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	pt := newProcTable("/proc")
	t.Cleanup(pt.close)
	procs := map[int]procStat{}
	if err := pt.read(procs, nil); err != nil {
		t.Fatal(err)
	}
	g := newGraph("/proc", []Part{{PIDs: sut, How: "--pid"}})
	m := newMembers()
	m.find(procs, g.roots(), tare, nil)
	return g, m, procs
}

// lookAll looks until the graph stops growing, as the sampler does.
func lookAll(g *graph, m *members, procs map[int]procStat, tare []int) bool {
	grew := false
	for hop := 0; hop < maxHops && g.look(procs, m); hop++ {
		m.find(procs, g.roots(), tare, nil)
		grew = true
	}
	return grew
}

// TestGraphLive: a process that holds a connection to a loopback listener
// has that listener's owner as a node it calls, over IPv4 and IPv6; tare's
// own processes never are, and the process it accepted a connection from
// is its client, not a process it calls.
func TestGraphLive(t *testing.T) {
	python := needPython(t)
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
			sut := startPython(t, python, "import socket,sys,time\nc=socket.create_connection((sys.argv[1],int(sys.argv[2])))\nprint('connected',flush=True)\ntime.sleep(30)", host, port)

			g, m, procs := liveGraph(t, []int{sut}, nil)
			if !lookAll(g, m, procs, nil) || !slices.Equal(g.called(), []int{os.Getpid()}) {
				t.Errorf("called by a process connected to %s: %v; want this process, pid %d, the listener's owner", l.Addr(), g.called(), os.Getpid())
			}
			if want := "tcp " + l.Addr().String() + " from python3"; len(g.nodes) != 2 || g.nodes[1].reachedBy != want || g.nodes[1].from != 0 {
				t.Errorf("nodes %+v; want the listener reached by %q from node 0", g.nodes, want)
			}
			g, m, procs = liveGraph(t, []int{sut}, []int{os.Getpid()})
			if lookAll(g, m, procs, []int{os.Getpid()}) || len(g.called()) != 0 {
				t.Errorf("called with the listener's owner as tare: %v; want none: tare is never the system under test", g.called())
			}
			g, m, procs = liveGraph(t, []int{os.Getpid()}, nil)
			if lookAll(g, m, procs, nil) && slices.Contains(g.called(), sut) {
				t.Errorf("called by the listener: %v; the process that connected to it is its client, not a process it calls", g.called())
			}
		})
	}
}

// TestGraphThreeHops: a proxy calling an app server over TCP, which calls
// its database over a Unix socket (a path, and the abstract namespace):
// from the proxy alone the graph finds both, each reached from the one
// before, and a second client of the proxy is left out.
func TestGraphThreeHops(t *testing.T) {
	python := needPython(t)
	for _, abstract := range []bool{false, true} {
		t.Run(fmt.Sprintf("abstract=%v", abstract), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db.sock")
			name := path
			if abstract {
				name = "@tare-test-db-" + strconv.Itoa(os.Getpid())
				path = name // the scripts put the NUL for the '@'
			}
			// The database: listens on the Unix socket, accepts.
			db := startDetached(t, python, "import os,socket,sys,time\na=sys.argv[1]\na='\\0'+a[1:] if a[0]=='@' else a\ns=socket.socket(socket.AF_UNIX)\ns.bind(a)\ns.listen()\nprint(os.getpid(),0,flush=True)\nc,_=s.accept()\ntime.sleep(30)", path)
			// The app server: listens on TCP; once called, calls the database.
			app := startDetached(t, python, "import os,socket,sys,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(os.getpid(),s.getsockname()[1],flush=True)\nc,_=s.accept()\na=sys.argv[1]\na='\\0'+a[1:] if a[0]=='@' else a\nd=socket.socket(socket.AF_UNIX)\nd.connect(a)\nc.send(b'k')\ntime.sleep(30)", path)
			// The proxy: listens (its clients come in there) and calls the app.
			proxy := startDetached(t, python, "import os,socket,sys,time\nl=socket.socket()\nl.bind(('127.0.0.1',0))\nl.listen()\nc=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\nc.recv(1)\nprint(os.getpid(),l.getsockname()[1],flush=True)\na,_=l.accept()\ntime.sleep(30)", strconv.Itoa(app.port))
			client, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(proxy.port), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()

			g, m, procs := liveGraph(t, []int{proxy.pid}, nil)
			lookAll(g, m, procs, nil)
			if got, want := g.called(), []int{min(app.pid, db.pid), max(app.pid, db.pid)}; !slices.Equal(got, want) {
				t.Fatalf("called %v; want the app server %d and its database %d", got, app.pid, db.pid)
			}
			wantReached := []string{"--pid", fmt.Sprintf("tcp 127.0.0.1:%d from python3", app.port), "unix " + name + " from python3"}
			for i, n := range g.nodes {
				if n.reachedBy != wantReached[i] || n.from != i-1 {
					t.Errorf("node %d: reached by %q from %d; want %q from %d", i, n.reachedBy, n.from, wantReached[i], i-1)
				}
			}
			if m.sut[os.Getpid()] {
				t.Error("the proxy's client (this test) is in the system under test: a client is not part of it")
			}
			if got := (&graph{nodes: g.nodes}).summary(m, procs); len(got) != 3 || !slices.Contains(got[2].PIDs, db.pid) || *got[2].From != 1 {
				t.Errorf("summary %+v; want three nodes, the database's pid in the third, reached from the second", got)
			}
		})
	}
}

// TestGraphExclude: a process the user took out of the system under test
// (by command name or pid) is not followed, nor counted in it.
func TestGraphExclude(t *testing.T) {
	python := needPython(t)
	srv := startDetached(t, python, "import os,socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(os.getpid(),s.getsockname()[1],flush=True)\nc,_=s.accept()\ntime.sleep(30)")
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(srv.port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, named := range [][]string{{"python3"}, {strconv.Itoa(srv.pid)}} {
		g, m, procs := liveGraph(t, []int{os.Getpid()}, nil)
		m.excluded = excluder(named)
		if lookAll(g, m, procs, nil) || m.sut[srv.pid] {
			t.Errorf("excluding %v: called %v; want the server left out", named, g.called())
		}
	}
}

// TestSamplerCountsCalledProcesses: the sampler counts a process the
// system under test calls over loopback with it, within the first
// readings, says which (Called) and shows it in the graph (Graph).
func TestSamplerCountsCalledProcesses(t *testing.T) {
	python := needPython(t)
	srv := startDetached(t, python, "import os,socket,time\ns=socket.socket()\ns.settimeout(30)\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(os.getpid(),s.getsockname()[1],flush=True)\nc,_=s.accept()\ntime.sleep(30)")
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(srv.port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// This test process is the system under test here: it called srv.
	s, err := NewSampler(Config{Tick: tare.MinTick, SUT: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var hs tare.HostSample
	for i := 0; i < 4 && !slices.Contains(s.Called(), srv.pid); i++ {
		time.Sleep(20 * time.Millisecond) // a jiffy or two of CPU time between readings
		if hs, err = s.Sample(time.Now()); err != nil {
			t.Logf("sample %d: %v", i, err)
		}
	}
	if got := s.Called(); !slices.Equal(got, []int{srv.pid}) {
		t.Fatalf("Called() = %v; want the server it connected to, pid %d", got, srv.pid)
	}
	if !s.members.sut[srv.pid] {
		t.Errorf("the called server, pid %d, is not counted with the system under test", srv.pid)
	}
	g := s.Graph()
	if len(g) != 2 || !slices.Equal(g[1].PIDs, []int{srv.pid}) || !strings.HasPrefix(g[1].ReachedBy, "tcp 127.0.0.1:") {
		t.Errorf("graph %+v; want this process, then the server reached over tcp", g)
	}
	time.Sleep(20 * time.Millisecond)
	if hs, err = s.Sample(time.Now()); err == nil && hs.CPUBy != nil && len(hs.CPUBy.SUTNodes) != 2 {
		t.Errorf("ledger nodes %+v; want one share per node of the graph", hs.CPUBy.SUTNodes)
	}
}

// TestGraphLooksAgainOnNewConnections: a look with the same sockets as the
// last finds nothing new (and skips the socket tables); a connection made
// since is looked at, and its listener found.
func TestGraphLooksAgainOnNewConnections(t *testing.T) {
	python := needPython(t)
	g, m, procs := liveGraph(t, []int{os.Getpid()}, nil) // this test process calls both
	for i := range 2 {
		srv := startDetached(t, python, "import os,socket,time\ns=socket.socket()\ns.settimeout(30)\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(os.getpid(),s.getsockname()[1],flush=True)\nc,_=s.accept()\ntime.sleep(30)")
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(srv.port), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pt := newProcTable("/proc")
		if err := pt.read(procs, nil); err != nil {
			t.Fatal(err)
		}
		pt.close()
		if !g.look(procs, m) || !slices.Contains(g.called(), srv.pid) {
			t.Fatalf("look after connection %d to pid %d: found %v", i+1, srv.pid, g.called())
		}
		m.find(procs, g.roots(), nil, nil)
		if g.look(procs, m) {
			t.Errorf("a second look at the same connections found something new: %v", g.called())
		}
	}
}

func needPython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		testservice.Missing(t, "no python3 to play the processes of the system under test: install Debian's python3 (scripts/test does, as root)")
	}
	return python
}

// startPython starts a python script as a child of this test, waits for
// its first line of output, and kills it when the test ends.
func startPython(t *testing.T, python, script string, args ...string) int {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-c", script}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("%s printed nothing: %v", script, err)
	}
	return cmd.Process.Pid
}

// detached is a process started by startDetached.
type detached struct{ pid, port int }

// startDetached starts a python script that prints its pid and a port
// and lives 30 s at most, and returns them. It is started through a shell
// that exits at once, so that it is no descendant of this process (which
// would make it the system under test already).
func startDetached(t *testing.T, python, script string, args ...string) detached {
	t.Helper()
	sh := exec.Command("sh", append([]string{"-c", `"$0" -c "$1" "$2" "$3" &`, python, script}, append(args, "", "")[:2]...)...)
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var d detached
	if _, err := fmt.Fscan(bufio.NewReader(out), &d.pid, &d.port); err != nil {
		t.Fatalf("the server printed no pid and port: %v", err)
	}
	sh.Wait()
	t.Cleanup(func() { syscall.Kill(d.pid, syscall.SIGKILL) })
	return d
}

// TestGraphShortLivedConnections: a system under test whose connections
// to its app server (TCP) and its database (a Unix socket) each last a
// moment, far from any look, still has both in its graph, from the
// kernel's own record of the connects.
func TestGraphShortLivedConnections(t *testing.T) {
	if err := schedprobe.ConnectsExpected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	python := needPython(t)
	path := filepath.Join(t.TempDir(), "db.sock")
	tcpSrv := startDetached(t, python, "import os,socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(64)\nprint(os.getpid(),s.getsockname()[1],flush=True)\nend=time.time()+30\nwhile time.time()<end:\n c,_=s.accept(); c.close()")
	unixSrv := startDetached(t, python, "import os,socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen(64)\nprint(os.getpid(),0,flush=True)\nend=time.time()+30\nwhile time.time()<end:\n c,_=s.accept(); c.close()", path)
	// Connects to each every 300 ms and closes at once, for 20 s at most.
	sut := startPython(t, python, "import socket,sys,time\nprint('go',flush=True)\nend=time.time()+20\nwhile time.time()<end:\n a=socket.create_connection(('127.0.0.1',int(sys.argv[1]))); a.close()\n b=socket.socket(socket.AF_UNIX); b.connect(sys.argv[2]); b.close()\n time.sleep(0.3)", strconv.Itoa(tcpSrv.port), path)
	s, err := NewSampler(Config{Tick: tare.MinTick, SUT: []int{sut}, Tare: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.connects == nil {
		t.Fatalf("no connection tracer as root with tracefs: %v", s.Warnings())
	}
	want := []int{min(tcpSrv.pid, unixSrv.pid), max(tcpSrv.pid, unixSrv.pid)}
	for i := 0; i < 6 && !slices.Equal(s.Called(), want); i++ {
		time.Sleep(400 * time.Millisecond)
		if _, err := s.Sample(time.Now()); err != nil {
			t.Logf("sample %d: %v", i, err)
		}
	}
	if got := s.Called(); !slices.Equal(got, want) {
		t.Fatalf("called %v; want the TCP server %d and the Unix one %d, though no connection was open at any look", got, tcpSrv.pid, unixSrv.pid)
	}
	var reached []string
	for _, n := range s.Graph()[1:] {
		reached = append(reached, n.ReachedBy)
	}
	slices.Sort(reached)
	if want := []string{"tcp 127.0.0.1:" + strconv.Itoa(tcpSrv.port) + " from python3", "unix " + path + " from python3"}; !slices.Equal(reached, want) {
		t.Errorf("reached by %q; want %q", reached, want)
	}
}
