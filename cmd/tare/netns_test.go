package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	jdg "github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/store"
)

// netHost is a "host" made for a test: a network namespace joined to this
// one by a veth pair, its own UTS namespace (so its own host name) when a
// process runs in it through exec.
type netHost struct {
	ns     string
	name   string // its host name
	hostIP string // this side of the veth: where its services are reached
}

// newNetHost makes namespace k of this test, 10.213.x.2 inside and
// 10.213.x.1 on this side, removed when the test ends. It skips the test
// when namespaces cannot be made.
func newNetHost(t *testing.T, k int) *netHost {
	t.Helper()
	testservice.Root(t, "making a network namespace")
	id := fmt.Sprintf("%d%c", os.Getpid()%100000, 'a'+k)
	h := &netHost{ns: "tare" + id, name: fmt.Sprintf("tare-shard-%c", 'a'+k)}
	x := (os.Getpid()%100)*2 + k + 20 // a /24 of this test alone
	h.hostIP = fmt.Sprintf("10.213.%d.1", x)
	inner := fmt.Sprintf("10.213.%d.2/24", x)
	hv, nv := "tv"+id, "tv"+id+"n"
	if _, err := exec.LookPath("ip"); err != nil {
		testservice.Missing(t, "no ip command: install Debian's iproute2 (scripts/test does, as root)")
	}
	if out, err := exec.Command("ip", "netns", "add", h.ns).CombinedOutput(); err != nil {
		testservice.Unable(t, "cannot make a network namespace (ip netns add): %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", hv).Run() // gone already when the namespace took its peer with it
		if out, err := exec.Command("ip", "netns", "del", h.ns).CombinedOutput(); err != nil {
			t.Errorf("remove namespace %s: %v: %s", h.ns, err, out)
		}
	})
	for _, c := range [][]string{
		{"ip", "link", "add", hv, "type", "veth", "peer", "name", nv},
		{"ip", "link", "set", nv, "netns", h.ns},
		{"ip", "addr", "add", h.hostIP + "/24", "dev", hv},
		{"ip", "link", "set", hv, "up"},
		{"ip", "netns", "exec", h.ns, "ip", "addr", "add", inner, "dev", nv},
		{"ip", "netns", "exec", h.ns, "ip", "link", "set", nv, "up"},
		{"ip", "netns", "exec", h.ns, "ip", "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			testservice.Unable(t, "cannot wire namespace %s (%s): %v: %s", h.ns, strings.Join(c, " "), err, out)
		}
	}
	return h
}

// forward accepts on addr and relays every connection to the loopback
// service at to, until the test ends: how a namespace reaches the one
// Redis and the one PostgreSQL of this machine.
func forward(t *testing.T, addr, to string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// services are this machine's Redis and PostgreSQL, for processes in
// namespaces of their own: their URLs, a store and a client on this side.
type services struct {
	redis, postgres url.URL
	dsn             string
	st              tare.Store
	rdb             *redis.Client
}

// namespacedServices opens the test's Redis and PostgreSQL, closed when
// the test ends; it skips the test when PostgreSQL does not answer.
func namespacedServices(t *testing.T) services {
	t.Helper()
	redisURL, _ := testservice.RedisURL()
	ru, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	s := services{redis: *ru, dsn: postgresDSN(), rdb: redisClient(t)}
	pu, err := url.Parse(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	s.postgres = *pu
	if s.st, err = store.Open(context.Background(), s.dsn); err != nil {
		testservice.Unavailable(t, testservice.PostgresExplicit(), "open the PostgreSQL store at %s: %v", s.dsn, err)
	}
	t.Cleanup(func() { s.st.Close() })
	return s
}

// through is how a process in h reaches the Redis and the PostgreSQL: by
// their URLs, relayed by forward on h's veth.
func (s services) through(t *testing.T, h *netHost) (redisURL, dsn string) {
	t.Helper()
	r, p := s.redis, s.postgres
	r.Host = forward(t, h.hostIP+":0", s.redis.Host)
	p.Host = forward(t, h.hostIP+":0", s.postgres.Host)
	return r.String(), p.String()
}

// forget deletes the stored shards of run id and its barrier's keys.
func (s services) forget(id string) {
	ctx := context.Background()
	rows, _ := session.Shards(ctx, s.st, id)
	for _, r := range rows {
		s.st.DeleteRun(ctx, r.ID)
	}
	k := "tare:barrier:" + id
	s.rdb.Del(ctx, k+":joined", k+":start", k+":next")
}

// serveOn starts an HTTP target listening on ip only.
func serveOn(t *testing.T, ip string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestShardsOnHostsNamesTheHoggedOne: two shards of one run, each in a
// network namespace with a host name of its own, meet at the Redis barrier
// and write to the one PostgreSQL, both reached through the veth; a CPU
// hog shares the CPU of shard 2. The merged verdict names shard 2's host.
func TestShardsOnHostsNamesTheHoggedOne(t *testing.T) {
	if testing.Short() {
		t.Skip("two namespaced shards and a CPU hog for ~8 s: skipped with -short")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("the hogged shard and the quiet one need a CPU each: fewer than 2 CPUs")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		testservice.Missing(t, "unshare is not installed: a namespace cannot get a host name of its own; install Debian's util-linux (scripts/test does, as root)")
	}
	svc := namespacedServices(t)
	dsn := svc.dsn

	interfere.Exclusive(t)
	group := fmt.Sprintf("netns-%d", time.Now().UnixNano())
	t.Cleanup(func() { svc.forget(group) })

	const shards = 2
	hosts := make([]*netHost, shards)
	cmds := make([]*exec.Cmd, shards)
	outs := make([]strings.Builder, shards)
	errs := make([]strings.Builder, shards)
	runCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := range shards {
		h := newNetHost(t, k)
		hosts[k] = h
		podRedis, podDB := svc.through(t, h)
		// Shards that see one process table count each other as tare and
		// pool their waits: shard 1 would wait behind shard 2's hog too.
		// Shard 1 gets a process table of its own, as on another host;
		// shard 2 stays in this one, where the hog and its pid are.
		isolate := []string{"unshare", "--uts"}
		if k == 0 {
			isolate = append(isolate, "--pid", "--fork", "--kill-child", "--mount-proc")
		}
		args := append([]string{"netns", "exec", h.ns}, isolate...)
		args = append(args, "sh", "-c", `hostname "$0" && exec "$@"`, h.name,
			"taskset", "-c", fmt.Sprint(k), os.Args[0],
			"run", "--url", serveOn(t, h.hostIP)+"/", "--rate", "100/s", "--duration", "4s",
			"--shard", fmt.Sprintf("%d/%d", k+1, shards), "--coordinate", podRedis, "--run-id", group,
			"--db", podDB, "--quiet", "--json", "--tick", "200ms")
		cmds[k] = exec.CommandContext(runCtx, "ip", args...)
		cmds[k].Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		cmds[k].Stdout, cmds[k].Stderr = &outs[k], &errs[k]
	}
	// The hog shares shard 2's CPU, at a higher priority (root: newNetHost
	// skips otherwise), so shard 2 gets a tenth of its CPU at most: it
	// waits behind the hog most of the run, which the neighbours signal
	// measures and names, by pid. That is pollution, never a doubt.
	hog := interfere.Busy(t, interfere.Pinned(1)...)
	for k, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatalf("start shard %d: %v", k+1, err)
		}
	}
	for k, c := range cmds {
		if err := c.Wait(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 { // 1: a judged run, exit 2 is an error
				t.Fatalf("shard %d in %s: %v\n%s", k+1, hosts[k].ns, err, errs[k].String())
			}
		}
	}

	code, stdout, stderr := tareCmd(t, "runs", "show", group, "--json", "--db", dsn)
	if code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Shards) != shards {
		t.Fatalf("%d shards merged, want %d", len(s.Shards), shards)
	}
	for k, sh := range s.Shards {
		t.Logf("shard %s on %s: %d requests, send lag p99 %v ms, level %s, fired %v", sh.Shard, sh.Hostname, sh.Requests, deref(sh.SendLagP99), sh.Level, sh.Fired)
		if sh.Hostname != hosts[k].name {
			t.Errorf("shard %s reports host %q, want %q", sh.Shard, sh.Hostname, hosts[k].name)
		}
	}
	// On this machine shard 1 may be polluted too (other tests' builds and
	// hogs beside it), so what is exact is shard 2: polluted, the hog named
	// among the neighbours it waited behind.
	if sh := s.Shards[1]; sh.Level != tare.Polluted || !slices.Contains(sh.Fired, jdg.SignalNeighbours) {
		t.Errorf("shard 2, its CPU shared with a hog, is %s with %v fired: want polluted by neighbours", sh.Level, sh.Fired)
	}
	hogNamed := regexp.MustCompile(fmt.Sprintf("`sh` \\(pids? (\\d+, )*%d[,)]", hog.Process.Pid))
	var named bool
	for _, sig := range s.Verdict.Signals {
		if sig.Fired && sig.Name == jdg.SignalNeighbours && strings.HasPrefix(sig.Detail, "shard 2/2 on host "+hosts[1].name+": ") && hogNamed.MatchString(sig.Detail) {
			named = true
		}
	}
	if !named || s.Verdict.Level != tare.Polluted {
		t.Errorf("the merged verdict (%s) does not say shard 2 on %s waited behind the hog `sh` (pid %d), polluted:\n%+v", s.Verdict.Level, hosts[1].name, hog.Process.Pid, s.Verdict.Signals)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
