package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/connwatch"
)

// unixServer serves h on a Unix socket in a directory of the test's,
// watched by w, and returns the socket's path.
func unixServer(t *testing.T, h http.HandlerFunc, w *connwatch.Watch) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	if w != nil {
		srv.Config.ConnState = w.State
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return path
}

// counted is wireGet with a connection counter of its own, as the HTTP
// targets have.
type counted struct {
	*wireGet
	unix  string
	conns tare.ConnCounter
}

func (c *counted) Conns() *tare.ConnCounter { return &c.conns }
func (c *counted) Endpoints() []tare.Endpoint {
	eps := c.wireGet.Endpoints()
	eps[0].Unix = c.unix
	return eps
}

// TestLoopUnixSocket: the event loop connects to a Unix socket (AF_UNIX)
// when the endpoint names one, whatever its Addr, and counts the
// connections as the server saw them.
func TestLoopUnixSocket(t *testing.T) {
	var w connwatch.Watch
	var hosts sync.Map
	path := unixServer(t, func(_ http.ResponseWriter, r *http.Request) { hosts.Store(r.Host, true) }, &w)
	tg := &counted{wireGet: &wireGet{addr: "no-such-host.invalid:80", timeout: 10 * time.Second}, unix: path}
	results, u := collect(t, New(tg, Config{}), context.Background(), &constant{gap: time.Millisecond, n: 200})
	for _, res := range results {
		if !res.OK() || res.Status != 200 || res.Conn == 0 {
			t.Fatalf("seq %d: err %q status %d conn %d; want 200 over the socket", res.Seq, res.Err, res.Status, res.Conn)
		}
	}
	if len(results) != 200 || u.Engine != EngineLoop {
		t.Fatalf("%d results on %q; want 200 on the event loop", len(results), u.Engine)
	}
	if _, ok := hosts.Load("test"); !ok {
		t.Error("the server never saw the request's Host header")
	}
	accepted, _ := w.Settled(func() int { return int(tg.conns.Stats().Opened) })
	st := tg.conns.Stats()
	if int(st.Opened) != accepted || st.Opened+st.Reused != 200 || st.Closed != 0 || st.Open != 0 {
		t.Errorf("counted %+v; the server accepted %d connections and answered 200 requests", st, accepted)
	}
}

// TestLoopUnixSocketRefused: a socket nobody listens on any more fails
// each request as refused, not the run.
func TestLoopUnixSocketRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	tg := &counted{wireGet: &wireGet{addr: "app:80", timeout: 10 * time.Second}, unix: path}
	results, _ := collect(t, New(tg, Config{}), context.Background(), &constant{gap: time.Millisecond, n: 5})
	for _, res := range results {
		if res.Err != tare.KindRefused || res.Conn != 0 {
			t.Errorf("seq %d: err %q conn %d; want refused on no connection", res.Seq, res.Err, res.Conn)
		}
	}
	if st := tg.conns.Stats(); st.Opened != 0 || st.Open != 0 {
		t.Errorf("counted %+v for connects that all failed", st)
	}
}

// TestLoopConnectionLimit: at a rate that needs about ten requests in
// flight, MaxConns 2 keeps the server's connections to 2 at once, on one
// engine or split across two (and one engine when the limit is 1); the
// rest wait for one, counted in flight, so nothing is dropped below
// MaxInFlight, and everything is dropped beyond it.
func TestLoopConnectionLimit(t *testing.T) {
	for _, tt := range []struct {
		limit, engines, maxInFlight int
		wantEngines                 int
	}{
		{limit: 2, engines: 1, wantEngines: 1},
		{limit: 3, engines: 2, wantEngines: 2},
		{limit: 1, engines: 2, wantEngines: 1},
		{limit: 2, engines: 1, maxInFlight: 2, wantEngines: 1},
	} {
		name := "limit " + strconv.Itoa(tt.limit) + ", engines " + strconv.Itoa(tt.engines)
		if tt.maxInFlight > 0 {
			name += ", max in flight " + strconv.Itoa(tt.maxInFlight)
		}
		t.Run(name, func(t *testing.T) {
			var w connwatch.Watch
			var served atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				served.Add(1)
				time.Sleep(10 * time.Millisecond)
			}))
			srv.Config.ConnState = w.State
			srv.Start()
			defer srv.Close()
			tg := &counted{wireGet: &wireGet{addr: srv.Listener.Addr().String(), timeout: 10 * time.Second, maxConns: tt.limit}}
			const n = 150
			r := New(tg, Config{Engines: tt.engines, MaxInFlight: tt.maxInFlight})
			results, u := collect(t, r, context.Background(), &constant{gap: time.Millisecond, n: n})
			var ok, dropped int
			for _, res := range results {
				switch {
				case res.Dropped:
					dropped++
				case res.OK():
					ok++
				default:
					t.Errorf("seq %d: err %q", res.Seq, res.Err)
				}
			}
			accepted, peak := w.Settled(func() int { return int(tg.conns.Stats().Opened) })
			st := tg.conns.Stats()
			if peak > tt.limit || u.Workers > tt.limit || accepted != int(st.Opened) {
				t.Errorf("the server saw %d connections at once (%d in all), the engine %d; want %d at most, and %d opened counted", peak, accepted, u.Workers, tt.limit, st.Opened)
			}
			if u.Engines != tt.wantEngines {
				t.Errorf("%d engines ran; want %d", u.Engines, tt.wantEngines)
			}
			if int64(ok) != served.Load() || st.Opened+st.Reused != served.Load() || st.Closed != 0 {
				t.Errorf("%d ok, the server served %d; counted %+v: want opened + reused = served, none closed", ok, served.Load(), st)
			}
			if tt.maxInFlight == 0 {
				// 150 arrivals in 150 ms, each holding a connection 10 ms:
				// most waited, none was dropped.
				if dropped != 0 || ok != n || st.Waited == 0 {
					t.Errorf("%d ok, %d dropped, %d waited; want all %d sent, some after a wait", ok, dropped, st.Waited, n)
				}
			} else if dropped == 0 || st.Waited != 0 {
				// As many in flight as connections: an arrival finds a slot
				// and a connection, or neither, and is dropped.
				t.Errorf("%d dropped, %d waited; want drops at --max-inflight %d, never a wait", dropped, st.Waited, tt.maxInFlight)
			}
		})
	}
}

// TestLoopMostRecentlyIdleFirst: after a burst opened several
// connections, requests one at a time all take the connection that went
// idle last (LIFO), so a rate one connection serves uses one while the
// others stay idle.
func TestLoopMostRecentlyIdleFirst(t *testing.T) {
	const burst = 4
	var arrived atomic.Int64
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if arrived.Add(1) == burst {
			close(all)
		}
		if arrived.Load() <= burst {
			<-all // the burst's requests overlap: one connection each
		}
	}))
	defer srv.Close()
	tg := &counted{wireGet: &wireGet{addr: srv.Listener.Addr().String(), timeout: 10 * time.Second}}
	sched := &burstThenSlow{burst: burst, slow: 20, gap: 15 * time.Millisecond}
	results, _ := collect(t, New(tg, Config{Engines: 1}), context.Background(), sched)
	if len(results) != burst+sched.slow {
		t.Fatalf("%d results", len(results))
	}
	// One engine records its results in the order the requests finished,
	// and makes each connection idle as its request finishes: the burst's
	// last result names the connection idle last.
	var lastConn uint64
	for _, res := range results {
		if !res.OK() {
			t.Fatalf("seq %d: %q", res.Seq, res.Err)
		}
		if res.Seq < burst {
			lastConn = res.Conn
		}
	}
	for _, res := range results {
		if res.Seq >= burst && res.Conn != lastConn {
			t.Errorf("seq %d on connection %d; want the connection idle last, %d", res.Seq, res.Conn, lastConn)
		}
	}
	if st := tg.conns.Stats(); st.Opened != burst {
		t.Errorf("opened %d; want %d (the burst's), the slow requests reusing one", st.Opened, burst)
	}
}

// burstThenSlow is burst arrivals at once, then slow ones gap apart,
// the first of them 200 ms later.
type burstThenSlow struct {
	burst, slow, i int
	gap            time.Duration
}

func (b *burstThenSlow) Next() (time.Duration, bool) {
	i := b.i
	b.i++
	switch {
	case i < b.burst:
		return 0, true
	case i < b.burst+b.slow:
		return 200*time.Millisecond + time.Duration(i-b.burst)*b.gap, true
	}
	return 0, false
}

// TestLoopClosedCounted: connections the server closes (Connection:
// close on every fourth answer) are counted closed, as many as it
// closed, and the requests after them open new ones.
func TestLoopClosedCounted(t *testing.T) {
	var w connwatch.Watch
	var n, closes atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%4 == 0 {
			closes.Add(1)
			rw.Header().Set("Connection", "close")
		}
	}))
	srv.Config.ConnState = w.State
	srv.Start()
	defer srv.Close()
	tg := &counted{wireGet: &wireGet{addr: srv.Listener.Addr().String(), timeout: 10 * time.Second}}
	results, _ := collect(t, New(tg, Config{}), context.Background(), &constant{gap: 2 * time.Millisecond, n: 100})
	for _, res := range results {
		if !res.OK() {
			t.Errorf("seq %d: %q", res.Seq, res.Err)
		}
	}
	accepted, _ := w.Settled(func() int { return int(tg.conns.Stats().Opened) })
	st := tg.conns.Stats()
	if st.Closed != closes.Load() || int(st.Opened) != accepted || st.Opened+st.Reused != 100 {
		t.Errorf("counted %+v; the server closed %d and accepted %d, for 100 requests", st, closes.Load(), accepted)
	}
}
