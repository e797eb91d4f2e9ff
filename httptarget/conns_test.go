package httptarget

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/connwatch"
	"github.com/tare-dev/tare/load"
)

// sentOn checks that n requests went out on the connections st counts:
// on the event loop each one opened carries the request it was opened
// for, so opened + reused = n; net/http may dial for a request that an
// idle connection then serves, and keep the new one idle, unused.
func sentOn(st tare.ConnStats, n int64, netHTTP bool) bool {
	if netHTTP {
		return st.Reused < n && n <= st.Opened+st.Reused
	}
	return st.Opened+st.Reused == n
}

// unixServer serves h on a Unix socket in a directory of the test's, with
// TLS when tlsOn, watched by w.
func unixServer(t *testing.T, tlsOn bool, h http.HandlerFunc, w *connwatch.Watch) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ErrorLog = quietLog
	srv.Config.ConnState = w.State
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return path
}

// TestUnixSocket: with UnixSocket every connection goes to the socket,
// on the event loop, on net/http, and over TLS (net/http): the URL's host
// is the Host header only, as curl --unix-socket sends it (with the port
// when the URL names one), and no DNS lookup of it is made. The
// connections are counted as the server saw them.
func TestUnixSocket(t *testing.T) {
	for _, tt := range []struct {
		name, url, host string
		netHTTP, tls    bool
	}{
		{name: "loop", url: "http://localhost/health", host: "localhost"},
		{name: "loop, a host that does not resolve", url: "http://app.invalid:8080/health", host: "app.invalid:8080"},
		{name: "net-http", url: "http://localhost/health", host: "localhost", netHTTP: true},
		{name: "https", url: "https://app.invalid/health", host: "app.invalid", tls: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var w connwatch.Watch
			var mu sync.Mutex
			hosts := map[string]int{}
			path := unixServer(t, tt.tls, func(_ http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hosts[r.Host+" "+r.URL.Path]++
				mu.Unlock()
			}, &w)
			tg := newTarget(t, Config{URL: tt.url, UnixSocket: path, NetHTTP: tt.netHTTP, Insecure: tt.tls})
			if onLoop := tg.Endpoints() != nil; onLoop == (tt.netHTTP || tt.tls) {
				t.Fatalf("on the event loop: %v", onLoop)
			}
			const n = 50
			for _, res := range run(t.Context(), tg, load.Config{}, n, time.Millisecond) {
				if !res.OK() || res.Status != 200 || res.Conn == 0 {
					t.Fatalf("seq %d: err %q status %d conn %d; want 200 over the socket", res.Seq, res.Err, res.Status, res.Conn)
				}
			}
			mu.Lock()
			got := hosts[tt.host+" /health"]
			mu.Unlock()
			if got != n {
				t.Errorf("the server got %v; want %d requests with Host %q", hosts, n, tt.host)
			}
			accepted, _ := w.Settled(func() int { return int(tg.Conns().Stats().Opened) })
			if st := tg.Conns().Stats(); int(st.Opened) != accepted || !sentOn(st, n, tt.netHTTP || tt.tls) {
				t.Errorf("counted %+v; the server accepted %d connections for %d requests", st, accepted, n)
			}
		})
	}
}

// TestConnectionLimit: MaxConns 2 at a rate that needs about ten
// requests in flight keeps the server's connections to 2 at once on both
// clients (net/http's MaxConnsPerHost counts a connection from its dial
// to its close): the requests wait for one, none is dropped, and the
// counts add up to what the server served.
func TestConnectionLimit(t *testing.T) {
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			var w connwatch.Watch
			var served atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				served.Add(1)
				time.Sleep(10 * time.Millisecond)
			}))
			srv.Config.ConnState = w.State
			srv.Start()
			defer srv.Close()
			tg := newTarget(t, Config{URL: srv.URL, MaxConns: 2, NetHTTP: client.netHTTP})
			const n = 150
			for _, res := range run(t.Context(), tg, load.Config{}, n, time.Millisecond) {
				if !res.OK() {
					t.Errorf("seq %d: dropped %v, err %q", res.Seq, res.Dropped, res.Err)
				}
			}
			accepted, peak := w.Settled(func() int { return int(tg.Conns().Stats().Opened) })
			st := tg.Conns().Stats()
			if peak > 2 || accepted != int(st.Opened) {
				t.Errorf("the server saw %d connections at once, %d in all (counted %d); want 2 at most", peak, accepted, st.Opened)
			}
			if served.Load() != n || !sentOn(st, n, client.netHTTP) || st.Closed != 0 || st.Peak > 2 {
				t.Errorf("served %d; counted %+v: want opened + reused = %d, none closed, 2 open at most", served.Load(), st, n)
			}
		})
	}
}

// TestConnectionsClosedCounted: on both clients, the connections a server
// closes (Connection: close on every fourth answer) are counted closed,
// as many as it closed.
func TestConnectionsClosedCounted(t *testing.T) {
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
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
			tg := newTarget(t, Config{URL: srv.URL, NetHTTP: client.netHTTP})
			for _, res := range run(t.Context(), tg, load.Config{}, 40, 2*time.Millisecond) {
				if !res.OK() {
					t.Errorf("seq %d: dropped %v, err %q", res.Seq, res.Dropped, res.Err)
				}
			}
			// net/http closes a connection on its own goroutine, just after
			// the answer that asked it to.
			var st tare.ConnStats
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if st = tg.Conns().Stats(); st.Closed == closes.Load() {
					break
				}
			}
			accepted, _ := w.Settled(func() int { return int(tg.Conns().Stats().Opened) })
			st = tg.Conns().Stats()
			if st.Closed != closes.Load() || int(st.Opened) != accepted || !sentOn(st, 40, client.netHTTP) {
				t.Errorf("counted %+v; the server closed %d and accepted %d, for 40 requests", st, closes.Load(), accepted)
			}
		})
	}
}

// TestMixSharesConnections: a targets file's requests to one server share
// its connections, and MaxConns bounds the server's, not each request's.
func TestMixSharesConnections(t *testing.T) {
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			var w connwatch.Watch
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(5 * time.Millisecond) }))
			srv.Config.ConnState = w.State
			srv.Start()
			defer srv.Close()
			reqs := []Request{{Method: "GET", URL: srv.URL + "/a", Weight: 1}, {Method: "GET", URL: srv.URL + "/b", Weight: 1}, {Method: "GET", URL: srv.URL + "/c", Weight: 1}}
			m, err := NewMix("mix.txt", reqs, Config{MaxConns: 2, NetHTTP: client.netHTTP}, true, 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			for _, res := range run(t.Context(), m, load.Config{}, 90, time.Millisecond) {
				if !res.OK() {
					t.Errorf("seq %d: dropped %v, err %q", res.Seq, res.Dropped, res.Err)
				}
			}
			accepted, peak := w.Settled(func() int { return int(m.Conns().Stats().Opened) })
			if st := m.Conns().Stats(); peak > 2 || int(st.Opened) != accepted || !sentOn(st, 90, client.netHTTP) {
				t.Errorf("the server saw %d at once, %d in all; counted %+v: want 2 at most for the three requests together", peak, accepted, st)
			}
		})
	}
}
