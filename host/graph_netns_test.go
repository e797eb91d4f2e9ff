package host

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/scenario"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
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

// TestGraphAcrossNetnsPerConnection: the service in its own network
// namespace behind `socat … fork`, where each request is a connection of
// its own, made by a socat child that lives a few milliseconds: every
// sampler, from its first ticks, finds the service's pool in the
// namespace, from the kernel's record of each child's connect, though
// no connection need be open at any look.
func TestGraphAcrossNetnsPerConnection(t *testing.T) {
	url, stop, err := scenario.GunicornInNetns(4, true)(t.Context(), t.TempDir())
	scenario.SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	port, err := strconv.Atoi(strings.TrimSuffix(url[strings.LastIndex(url, ":")+1:], "/"))
	if err != nil {
		t.Fatalf("port of %s: %v", url, err)
	}
	proxies, err := ListenerPIDs("/proc", port)
	if err != nil || len(proxies) == 0 {
		t.Fatalf("socat's listener on port %d: %v, %v", port, proxies, err)
	}

	// A request every 100 ms, each on a connection of its own, until the
	// test ends (a minute and 600 requests at most).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 600 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	const runs = 10
	via := "tcp 10.231.4.2:8080 in netns of pid "
	var missed []string
	for run := range runs {
		s, err := NewSampler(Config{Tick: tare.MinTick, Parts: []Part{{PIDs: proxies, How: "listening socket"}}, Tare: []int{os.Getpid()}})
		if err != nil {
			t.Fatal(err)
		}
		if s.connects == nil {
			s.Close()
			if err := schedprobe.ConnectsExpected(); err != nil {
				testservice.Unable(t, "%v", err)
			}
			t.Fatalf("the connection tracer did not open where it is expected: %v", s.Warnings())
		}
		for range 10 {
			time.Sleep(tare.MinTick)
			s.Sample(time.Now())
		}
		graph := s.Graph()
		s.Close()
		if !slices.ContainsFunc(graph, func(n tare.SUTNode) bool {
			return n.Name == "gunicorn" && len(n.PIDs) >= 3 && strings.HasPrefix(n.ReachedBy, via) && strings.HasSuffix(n.ReachedBy, " from socat")
		}) {
			missed = append(missed, fmt.Sprintf("run %d: %+v", run, graph))
		}
	}
	if len(missed) > 0 {
		t.Errorf("in %d of %d runs the graph held no gunicorn pool (a master and its 2 workers) reached by %q… from socat:\n%s", len(missed), runs, via, strings.Join(missed, "\n"))
	}
}
