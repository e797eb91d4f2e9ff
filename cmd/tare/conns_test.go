package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/scenario"
)

// hostsApp is a WSGI app that writes each request's Host header to
// hosts.log beside it, and answers ok.
const hostsApp = `
import os
LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hosts.log')
def app(environ, start_response):
    with open(LOG, 'a') as f:
        f.write(environ.get('HTTP_HOST', '') + '\n')
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'ok\n']
`

// TestRunUnixSocketGunicorn: tare run --unix-socket against gunicorn (2
// sync workers) on a Unix socket, on the event loop and on net/http:
// every request succeeds, each arrives with the URL's host as its Host
// header as curl sends it, the system under test is found as the socket's
// listener (gunicorn's master and workers, which share it), and the
// connections counted are the server's: gunicorn's sync workers close
// each one after its answer, so one is opened and closed per request.
func TestRunUnixSocketGunicorn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sock, master, stop, err := scenario.GunicornOnSocket(ctx, dir, hostsApp)
	scenario.SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// gunicorn answers once its first worker is up, and forks the second
	// a moment later: the pool is the master and both.
	kids := childPIDs(t, master)
	for len(kids) < 2 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		kids = childPIDs(t, master)
	}
	if len(kids) != 2 {
		t.Fatalf("gunicorn's master %d has workers %v; want 2", master, kids)
	}
	want := append([]int{master}, kids...)
	slices.Sort(want)
	logPath := filepath.Join(dir, "hosts.log")

	for _, engine := range []struct {
		name string
		args []string
	}{{"loop", nil}, {"net-http", []string{"--net-http"}}} {
		t.Run(engine.name, func(t *testing.T) {
			os.Remove(logPath) // the readiness check's requests, and the other engine's
			const n = 60
			args := append([]string{"run", "--unix-socket", sock, "--url", "http://app.test:8000/health",
				"--rate", "40/s", "--jobs", strconv.Itoa(n), "--tick", "200ms", "--json", "--quiet", "--no-store"}, engine.args...)
			code, stdout, stderr := tareCmd(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s tare.Summary
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			if s.Requests.OK != n {
				t.Errorf("requests %+v (errors %v); want %d ok", s.Requests, s.ErrorKinds, n)
			}
			b, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			hosts := strings.Fields(string(b))
			if len(hosts) != n || slices.ContainsFunc(hosts, func(h string) bool { return h != "app.test:8000" }) {
				t.Errorf("gunicorn saw Host headers %v; want app.test:8000, %d times", hosts, n)
			}
			if s.SUT == nil || s.SUT.FoundBy != "listening socket of unix "+sock || !slices.Equal(s.SUT.PIDs, want) {
				t.Fatalf("system under test %+v; want pids %v found by the listening socket of unix %s", s.SUT, want, sock)
			}
			u := s.Generator.ConnectionUse
			if u == nil {
				t.Fatal("no generator.connection_use")
			}
			if u.Opened != n || u.Closed != n || u.Reused != 0 || u.Limit != nil {
				t.Errorf("connection_use %+v; want %d opened and closed by gunicorn's sync workers, none reused, no limit", u, n)
			}
			if len(u.InUsePerTick) == 0 || slices.Max(u.InUsePerTick) < 1 || u.TickMS != 200 {
				t.Errorf("in use per tick %v of %v ms; want a count per 200 ms tick", u.InUsePerTick, u.TickMS)
			}
		})
	}
}

// childPIDs are the processes whose parent is pid.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// TestRunConnections: tare run --connections 2 at a rate that needs about
// ten requests in flight, on the event loop and on net/http: the server
// never sees more than 2 connections at once, every request is sent (it
// waits for a connection, counted in flight), and the summary's counts
// are the server's: opened as it accepted, opened + reused as it served,
// in use per tick 2 at most.
func TestRunConnections(t *testing.T) {
	for _, engine := range []struct {
		name string
		args []string
	}{{"loop", nil}, {"net-http", []string{"--net-http"}}} {
		t.Run(engine.name, func(t *testing.T) {
			var mu sync.Mutex
			var accepted, open, peak, served int
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				mu.Lock()
				served++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				mu.Lock()
				defer mu.Unlock()
				switch s {
				case http.StateNew:
					accepted++
					open++
					peak = max(peak, open)
				case http.StateClosed:
					open--
				}
			}
			srv.Start()
			defer srv.Close()
			const n = 300
			args := append([]string{"run", "--url", srv.URL + "/", "--connections", "2", "--rate", "500/s", "--arrival", "constant",
				"--jobs", strconv.Itoa(n), "--tick", "200ms", "--json", "--quiet", "--no-store"}, engine.args...)
			code, stdout, stderr := tareCmd(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s tare.Summary
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			mu.Lock()
			defer mu.Unlock()
			if peak > 2 || s.Generator.Connections > 2 {
				t.Errorf("the server saw %d connections at once, the summary says %d; want 2 at most", peak, s.Generator.Connections)
			}
			if s.Requests.OK != n || s.Requests.Dropped != 0 {
				t.Errorf("requests %+v; want all %d sent and ok, none dropped", s.Requests, n)
			}
			u := s.Generator.ConnectionUse
			if u == nil || u.Limit == nil || *u.Limit != 2 {
				t.Fatalf("connection_use %+v; want limit 2", u)
			}
			// net/http may dial for a request an idle connection then
			// serves, and keep the new one: opened + reused ≥ served.
			sent := u.Opened+u.Reused == served || engine.name != "loop" && u.Reused < served && u.Opened+u.Reused >= served
			if u.Opened != accepted || !sent || u.Closed != 0 {
				t.Errorf("connection_use %+v; the server accepted %d and served %d", u, accepted, served)
			}
			if engine.name == "loop" && (u.Waited == nil || *u.Waited == 0) || engine.name != "loop" && u.Waited != nil {
				t.Errorf("waited %v on %s; want a count on the event loop, null on net/http", u.Waited, engine.name)
			}
			if len(u.InUsePerTick) < 2 || slices.Max(u.InUsePerTick) > 2 || slices.Max(u.InUsePerTick) < 1 {
				t.Errorf("in use per tick %v; want counts of 1 or 2", u.InUsePerTick)
			}
			// 500/s for 20 ms each is 10 in flight, served 2 at a time:
			// the wait shows in the latency, from the scheduled time.
			if s.Latency.P99 == nil || *s.Latency.P99 < 100 {
				t.Errorf("latency p99 %v ms; want the wait for a connection in it", s.Latency.P99)
			}
		})
	}
}
