package host

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/scenario"
)

// TestGraphAcrossNetns: a service in a network namespace of its own,
// published on loopback by a userland proxy (socat, as docker-proxy
// does): from the proxy, the graph crosses into the namespace and finds
// the service, saying how.
func TestGraphAcrossNetns(t *testing.T) {
	python := needPython(t)
	ns, err := scenario.MakeNetns(3)
	scenario.SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Remove()
	srv := ns.Command(t.Context(), python, "-c", "import os,socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.settimeout(30)\ns.bind(('0.0.0.0',8080))\ns.listen()\nprint(os.getpid(),flush=True)\nc,_=s.accept()\nc.send(b'k')\ntime.sleep(30)")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var pid int
	if _, err := fmt.Fscan(bufio.NewReader(out), &pid); err != nil {
		t.Fatalf("the service in the namespace printed no pid: %v", err)
	}
	port, stop, err := scenario.UserlandProxy(t.Context(), ns.Addr+":8080")
	scenario.SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("socat on port %d: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err != nil { // the service answered through socat
		t.Fatal(err)
	}
	proxies, err := ListenerPIDs("/proc", port)
	if err != nil || len(proxies) == 0 {
		t.Fatalf("socat's listener on port %d: %v, %v", port, proxies, err)
	}

	g, m, procs := liveGraph(t, proxies, nil)
	lookAll(g, m, procs, nil)
	if len(g.nodes) != 2 || !m.sut[pid] {
		t.Fatalf("nodes %+v; want socat, then the service in the namespace, pid %d", g.nodes, pid)
	}
	if want := "tcp " + ns.Addr + ":8080 in netns of pid "; !strings.HasPrefix(g.nodes[1].reachedBy, want) || !strings.HasSuffix(g.nodes[1].reachedBy, " from socat") {
		t.Errorf("reached by %q; want %q… from socat", g.nodes[1].reachedBy, want)
	}
}
