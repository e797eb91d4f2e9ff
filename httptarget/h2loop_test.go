package httptarget

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/load"
)

// HTTP/2 on load's event loop (Config.H2Loop), against Go's own servers:
// h2 over TLS chosen by ALPN, and h2c by prior knowledge.

// runLoop runs n arrivals gap apart on tg, which must offer the loop its
// endpoint, and returns their results in order.
func runLoop(t *testing.T, tg *Target, n int, gap time.Duration) []tare.Result {
	t.Helper()
	if eps := tg.Endpoints(); len(eps) != 1 || eps[0].H2 == nil {
		t.Fatalf("endpoints %+v: want one HTTP/2 endpoint for the event loop", eps)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return run(ctx, tg, load.Config{}, n, gap)
}

// heldRun starts n arrivals 20 ms apart on tg against a server that
// holds every request until hold closes; it returns once the server has
// all n in flight, and the results once released. Apart, the later
// arrivals most often find a connection open (with its server's
// SETTINGS), not only one being opened; the caps must hold either way.
func heldRun(t *testing.T, srv *h2Server, tg *Target, n int, hold chan struct{}) []tare.Result {
	t.Helper()
	done := make(chan []tare.Result, 1)
	go func() { done <- runLoop(t, tg, n, 20*time.Millisecond) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if protos, _, _ := srv.seen(); protos["HTTP/2.0"] == n {
			break
		}
		if time.Now().After(deadline) {
			protos, _, _ := srv.seen()
			close(hold)
			t.Fatalf("the server saw %v; want %d requests in flight", protos, n)
		}
	}
	close(hold)
	results := <-done
	for _, res := range results {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q", res.Seq, res.Status, res.Err)
		}
	}
	return results
}

// TestH2LoopStreams: on the event loop, --max-streams caps the streams in
// flight on each connection, and so does the server's own
// SETTINGS_MAX_CONCURRENT_STREAMS; a new connection opens only when
// every open one is full.
func TestH2LoopStreams(t *testing.T) {
	for _, tt := range []struct {
		name       string
		maxStreams int // --max-streams
		server     int // the server's SETTINGS_MAX_CONCURRENT_STREAMS; 0: Go's default (250)
		inFlight   int
		conns      int
	}{
		{"2 per connection", 2, 0, 6, 3},
		{"1 per connection", 1, 0, 4, 4},
		{"the server's limit", 0, 0, 6, 1},
		{"the server's 3 below --max-streams 5", 5, 3, 6, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hold := make(chan struct{})
			srv := newH2Server(t, true, true, hold)
			if tt.server > 0 {
				srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: tt.server}
			}
			tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, H2Loop: true, TLS: srv.tlsTo(), MaxStreams: tt.maxStreams})
			heldRun(t, srv, tg, tt.inFlight, hold)
			_, streams, peak := srv.seen()
			if len(streams) != tt.conns {
				t.Errorf("%d requests in flight went over %d connections (streams %v); want %d", tt.inFlight, len(streams), streams, tt.conns)
			}
			limit := tt.maxStreams
			if tt.server > 0 {
				limit = min(limit, tt.server)
			}
			for i, p := range peak {
				if limit > 0 && p > limit {
					t.Errorf("connection %d had %d streams in flight at once; the cap is %d", i, p, limit)
				}
			}
		})
	}
}

// TestH2LoopRefused: a TLS server that chooses HTTP/1.1 by ALPN gets no
// request from the loop: each connection is closed unused and counted as
// http/1.1, its requests fail as "no h2" (those that waited for it too),
// and the notes say so.
func TestH2LoopRefused(t *testing.T) {
	srv := newH2Server(t, true, false, nil)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, H2Loop: true, TLS: srv.tlsTo()})
	for _, res := range runLoop(t, tg, 5, 20*time.Millisecond) {
		if res.Err != tare.KindNoH2 || res.Status != 0 {
			t.Errorf("request %d: status %d, error %q; want no status and %q", res.Seq, res.Status, res.Err, tare.KindNoH2)
		}
	}
	if protos, _, _ := srv.seen(); len(protos) != 0 {
		t.Errorf("the server served %v; want no request", protos)
	}
	got := tg.Protocols()
	n := got[ProtoHTTP1]
	if n < 1 || len(got) != 1 {
		t.Errorf("protocols %v; want http/1.1 alone", got)
	}
	want := fmt.Sprintf("%d of the %d connections", n, n)
	if notes := tg.Notes(); len(notes) != 1 || !strings.Contains(notes[0], want) {
		t.Errorf("notes %q; want one saying %s spoke http/1.1", notes, want)
	}
	if st := tg.Conns().Stats(); st.Open != 0 || st.Opened != 0 {
		t.Errorf("counter %+v: a connection closed unused is no connection of the run's", st)
	}
}

// TestH2LoopGoAway: a server that says GOAWAY whenever a connection is
// idle closes connection after connection: every request still succeeds,
// those it never processed sent again on another connection.
func TestH2LoopGoAway(t *testing.T) {
	srv := newH2Server(t, true, true, nil)
	srv.Config.SetKeepAlivesEnabled(false)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, H2Loop: true, TLS: srv.tlsTo()})
	for _, res := range runLoop(t, tg, 40, time.Millisecond) {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q", res.Seq, res.Status, res.Err)
		}
	}
	_, streams, _ := srv.seen()
	t.Logf("40 requests over %d connections", len(streams))
	if len(streams) < 2 {
		t.Errorf("40 requests over %d connection; a server that says GOAWAY whenever it is idle closes some", len(streams))
	}
	if st := tg.Conns().Stats(); st.Open != 0 {
		t.Errorf("counter %+v: connections left open after the run", st)
	}
}

// TestH2LoopConnectionLimit: at the connection limit, with the one
// connection at its stream cap, requests wait for a stream to end and are
// counted as having waited.
func TestH2LoopConnectionLimit(t *testing.T) {
	hold := make(chan struct{})
	srv := newH2Server(t, true, true, hold)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, H2Loop: true, TLS: srv.tlsTo(), MaxConns: 1, MaxStreams: 1})
	done := make(chan []tare.Result, 1)
	go func() { done <- runLoop(t, tg, 3, 0) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if protos, _, _ := srv.seen(); protos["HTTP/2.0"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("the server saw no request")
		}
	}
	close(hold)
	conns := map[uint64]bool{}
	for _, res := range <-done {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q", res.Seq, res.Status, res.Err)
		}
		conns[res.Conn] = true
	}
	st := tg.Conns().Stats()
	if _, streams, _ := srv.seen(); len(streams) != 1 || st.Opened != 1 || st.Reused != 2 || st.Waited != 2 || len(conns) != 1 || conns[0] {
		t.Errorf("server connections %v, counter %+v, result connections %v; want one connection, numbered, reused twice, 2 waits", streams, st, conns)
	}
}

// h2cServer is a cleartext HTTP/2 server (prior knowledge) of h.
func h2cServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Config.ErrorLog = quietLog
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestH2LoopRedirect: a redirect answered on the loop is followed (on a
// goroutine) and counted; with redirects off the 3xx is the answer.
func TestH2LoopRedirect(t *testing.T) {
	srv := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		io.WriteString(w, "new "+r.Proto)
	})
	for _, tt := range []struct {
		name      string
		redirects int
		status    int
		hops      int
	}{
		{"followed", 0, 200, 1},
		{"off", NoRedirects, 302, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t, Config{URL: srv.URL + "/old", H2C: true, H2Loop: true, Redirects: tt.redirects})
			for _, res := range runLoop(t, tg, 5, time.Millisecond) {
				if res.Status != tt.status || res.Err != "" || res.Redirects != tt.hops || res.Done.Before(res.FirstByte) {
					t.Errorf("request %d: status %d, error %q, %d redirects, first byte %v, done %v; want %d, no error, %d redirects",
						res.Seq, res.Status, res.Err, res.Redirects, res.FirstByte, res.Done, tt.status, tt.hops)
				}
			}
		})
	}
}

// TestH2LoopTimeout: a stream that outlives its timeout fails as
// "timeout", and the loop resets it (the server sees the stream end)
// rather than close the connection, which carries the next requests.
func TestH2LoopTimeout(t *testing.T) {
	var mu sync.Mutex // guards conns and first
	conns := map[string]int{}
	first := true
	reset := make(chan struct{})
	srv := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr]++
		slow := first
		first = false
		mu.Unlock()
		if slow {
			select {
			case <-r.Context().Done(): // the client's RST_STREAM
				close(reset)
			case <-time.After(10 * time.Second):
			}
			return
		}
		io.WriteString(w, "ok")
	})
	tg := newTarget(t, Config{URL: srv.URL + "/", H2C: true, H2Loop: true, Timeout: 200 * time.Millisecond})
	results := runLoop(t, tg, 3, 500*time.Millisecond)
	if res := results[0]; res.Err != tare.KindTimeout {
		t.Errorf("the held request: status %d, error %q; want %q", res.Status, res.Err, tare.KindTimeout)
	}
	for _, res := range results[1:] {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q; want 200", res.Seq, res.Status, res.Err)
		}
	}
	select {
	case <-reset:
	case <-time.After(5 * time.Second):
		t.Error("the server never saw the timed-out stream end")
	}
	if st := tg.Conns().Stats(); st.Opened != 1 {
		t.Errorf("counter %+v: want every request on one connection, the timed-out stream reset, not the connection closed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("the server saw connections %v; want one", conns)
	}
}

// TestH2LoopFlowControl: a body larger than the server's windows waits
// for its WINDOW_UPDATEs, and an answer larger than tare's windows gets
// tare's: both arrive whole, on streams in flight at once.
func TestH2LoopFlowControl(t *testing.T) {
	const bodyLen, answerLen = 300 << 10, 9 << 20
	var mu sync.Mutex // guards got
	var got []int64
	answer := strings.Repeat("a", answerLen)
	srv := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
		io.WriteString(w, answer)
	})
	tg := newTarget(t, Config{URL: srv.URL + "/", H2C: true, H2Loop: true, Body: []byte(strings.Repeat("b", bodyLen)), Timeout: 10 * time.Second})
	for _, res := range runLoop(t, tg, 4, time.Millisecond) {
		if res.Status != 200 || res.Err != "" || res.BytesOut != bodyLen || res.BytesIn != answerLen {
			t.Errorf("request %d: status %d, error %q, %d bytes out, %d in; want 200, %d out, %d in", res.Seq, res.Status, res.Err, res.BytesOut, res.BytesIn, bodyLen, answerLen)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range got {
		if n != bodyLen {
			t.Errorf("the server read bodies of %v bytes; want %d each", got, bodyLen)
			break
		}
	}
}

// TestH2LoopPing: a server that checks an idle connection's health with
// PING closes it when no ack comes; the loop acks, and a slow answer
// arrives on the connection the pings kept.
func TestH2LoopPing(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond) // the server pings meanwhile
		io.WriteString(w, "ok")
	}))
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Config.HTTP2 = &http.HTTP2Config{SendPingTimeout: 50 * time.Millisecond, PingTimeout: 100 * time.Millisecond}
	srv.Config.ErrorLog = quietLog
	srv.Start()
	t.Cleanup(srv.Close)
	tg := newTarget(t, Config{URL: srv.URL + "/", H2C: true, H2Loop: true, Timeout: 10 * time.Second})
	for _, res := range runLoop(t, tg, 2, time.Millisecond) {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q; want 200", res.Seq, res.Status, res.Err)
		}
	}
}
