package httptarget

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testpki"
	"github.com/tare-dev/tare/load"
)

// h2Server is a loopback server that records, per connection, the
// streams it served and the most in flight at once, and the protocol of
// every request. tls: h2 over TLS (ALPN), with HTTP/2 only when h2;
// else HTTP/2 in cleartext by prior knowledge when h2.
type h2Server struct {
	*httptest.Server
	ca *testpki.CA

	mu      sync.Mutex // guards the maps
	streams map[string]int
	peak    map[string]int
	now     map[string]int
	protos  map[string]int // r.Proto → requests
	hold    chan struct{}  // when not nil, each handler waits for it to close
}

func newH2Server(t *testing.T, tlsOn, h2 bool, hold chan struct{}) *h2Server {
	t.Helper()
	s := &h2Server{streams: map[string]int{}, peak: map[string]int{}, now: map[string]int{}, protos: map[string]int{}, hold: hold}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.streams[r.RemoteAddr]++
		s.now[r.RemoteAddr]++
		s.peak[r.RemoteAddr] = max(s.peak[r.RemoteAddr], s.now[r.RemoteAddr])
		s.protos[r.Proto]++
		s.mu.Unlock()
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-r.Context().Done():
			}
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "hello over "+r.Proto)
		s.mu.Lock()
		s.now[r.RemoteAddr]--
		s.mu.Unlock()
	}))
	s.Config.ErrorLog = quietLog
	if tlsOn {
		s.ca = testpki.NewCA(t, "h2 test CA")
		s.EnableHTTP2 = h2
		s.TLS = &tls.Config{Certificates: []tls.Certificate{s.ca.Server(t).TLS()}}
		s.StartTLS()
	} else {
		p := new(http.Protocols)
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(h2)
		s.Config.Protocols = p
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// seen returns the requests by protocol, and the connections: streams
// served and most in flight at once, each.
func (s *h2Server) seen() (protos map[string]int, streams, peak []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	protos = map[string]int{}
	for k, v := range s.protos {
		protos[k] = v
	}
	for addr, n := range s.streams {
		streams, peak = append(streams, n), append(peak, s.peak[addr])
	}
	return protos, streams, peak
}

// tlsTo is a client configuration that trusts the server's CA.
func (s *h2Server) tlsTo() *tls.Config { return &tls.Config{RootCAs: s.ca.Pool()} }

// TestHTTP2: --http2 speaks h2 over TLS, chosen by ALPN, and --h2c HTTP/2
// in cleartext by prior knowledge, on goroutines and on the event loop
// (--h2-engine loop): the server sees HTTP/2.0 for every request,
// requests one after another share one connection, every result has its
// status, body bytes, connection and clocks in order, and the target
// counts that connection by its protocol.
func TestHTTP2(t *testing.T) {
	for _, loop := range []bool{false, true} {
		for _, tt := range []struct {
			name  string
			tls   bool
			cfg   Config
			proto string
		}{
			{"h2", true, Config{HTTP2: true}, ProtoH2},
			{"h2c", false, Config{H2C: true}, ProtoH2C},
			{"h2 post", true, Config{HTTP2: true, Body: []byte("payload")}, ProtoH2},
			{"h2c post", false, Config{H2C: true, Body: []byte("payload")}, ProtoH2C},
		} {
			t.Run(fmt.Sprintf("%s loop=%v", tt.name, loop), func(t *testing.T) {
				srv := newH2Server(t, tt.tls, true, nil)
				cfg := tt.cfg
				cfg.URL, cfg.H2Loop = srv.URL+"/", loop
				if tt.tls {
					cfg.TLS = srv.tlsTo()
				}
				tg := newTarget(t, cfg)
				var results []tare.Result
				if loop {
					results = runLoop(t, tg, 30, 2*time.Millisecond)
				} else {
					if tg.Endpoints() != nil {
						t.Fatal("an HTTP/2 target offered the event loop its endpoints without H2Loop: HTTP/2 runs on goroutines")
					}
					results = run(t.Context(), tg, load.Config{}, 30, 2*time.Millisecond)
				}
				want := int64(len("hello over HTTP/2.0"))
				for _, res := range results {
					if res.Status != 200 || res.Err != "" || res.BytesIn != want || res.BytesOut != int64(len(cfg.Body)) || res.Conn == 0 {
						t.Fatalf("request %d: status %d, error %q, %d bytes in, %d out, connection %d; want 200, %d in, %d out, numbered",
							res.Seq, res.Status, res.Err, res.BytesIn, res.BytesOut, res.Conn, want, len(cfg.Body))
					}
					if res.Sent.Before(res.Scheduled) || res.FirstByte.Before(res.Sent) || res.Done.Before(res.FirstByte) {
						t.Errorf("request %d: scheduled %v, sent %v, first byte %v, done %v: out of order", res.Seq, res.Scheduled, res.Sent, res.FirstByte, res.Done)
					}
				}
				protos, streams, _ := srv.seen()
				if protos["HTTP/2.0"] != 30 || len(protos) != 1 {
					t.Errorf("the server saw %v; want 30 requests over HTTP/2.0", protos)
				}
				if len(streams) != 1 {
					t.Errorf("30 requests 2 ms apart went over %d connections (%v streams each); want one", len(streams), streams)
				}
				if got := tg.Protocols(); len(got) != 1 || got[tt.proto] != 1 {
					t.Errorf("protocols %v; want {%s: 1}", got, tt.proto)
				}
				if notes := tg.Notes(); notes != nil {
					t.Errorf("notes %q; want none", notes)
				}
				if st := tg.Conns().Stats(); loop && (st.Opened != 1 || st.Reused != 29) {
					t.Errorf("counter %+v; want 1 connection opened, 29 requests reusing it", st)
				}
				// A new window on the same target counts the connection
				// still open, once.
				tg.ResetProtocols()
				if loop {
					runLoop(t, tg, 3, 2*time.Millisecond)
				} else {
					run(t.Context(), tg, load.Config{}, 3, 2*time.Millisecond)
				}
				if got := tg.Protocols(); len(got) != 1 || got[tt.proto] != 1 {
					t.Errorf("protocols after ResetProtocols and 3 more requests %v; want {%s: 1}", got, tt.proto)
				}
			})
		}
	}
}

// TestMaxStreams: --max-streams caps the streams in flight on each
// connection; a new one opens only when every open one is full. Without
// a cap, one connection carries every request the server allows at once.
func TestMaxStreams(t *testing.T) {
	for _, tt := range []struct {
		name       string
		maxStreams int
		inFlight   int
		conns      int
	}{
		{"2 per connection", 2, 6, 3},
		{"1 per connection", 1, 4, 4},
		{"the server's limit", 0, 6, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hold := make(chan struct{})
			srv := newH2Server(t, true, true, hold)
			tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, TLS: srv.tlsTo(), MaxStreams: tt.maxStreams})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			results := make(chan tare.Result, tt.inFlight)
			for range tt.inFlight {
				go func() {
					res := tare.Result{Sent: time.Now()}
					tg.Do(ctx, &res)
					results <- res
				}()
			}
			// Every request in flight at once, held by the server.
			for deadline := time.Now().Add(10 * time.Second); ; {
				protos, _, _ := srv.seen()
				if protos["HTTP/2.0"] == tt.inFlight {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server saw %v; want %d requests in flight", protos, tt.inFlight)
				}
				time.Sleep(5 * time.Millisecond)
			}
			close(hold)
			for range tt.inFlight {
				if res := <-results; res.Status != 200 || res.Err != "" {
					t.Errorf("status %d, error %q", res.Status, res.Err)
				}
			}
			_, streams, peak := srv.seen()
			if len(streams) != tt.conns {
				t.Errorf("%d requests in flight went over %d connections (streams %v); want %d", tt.inFlight, len(streams), streams, tt.conns)
			}
			for i, p := range peak {
				if tt.maxStreams > 0 && p > tt.maxStreams {
					t.Errorf("connection %d had %d streams in flight at once; the cap is %d", i, p, tt.maxStreams)
				}
			}
			if got := tg.Protocols()[ProtoH2]; got != tt.conns {
				t.Errorf("protocols %v; want h2 %d", tg.Protocols(), tt.conns)
			}
		})
	}
}

// TestHTTP2Refused: a TLS server that chooses HTTP/1.1 by ALPN gets no
// request at all from --http2: each connection it answers so is closed
// unused, counted as http/1.1, and its request fails as "no h2"; the
// target's notes say so.
func TestHTTP2Refused(t *testing.T) {
	srv := newH2Server(t, true, false, nil)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, TLS: srv.tlsTo()})
	for _, res := range run(t.Context(), tg, load.Config{}, 5, 2*time.Millisecond) {
		if res.Err != tare.KindNoH2 || res.Status != 0 {
			t.Errorf("request %d: status %d, error %q; want no status and %q", res.Seq, res.Status, res.Err, tare.KindNoH2)
		}
	}
	if protos, _, _ := srv.seen(); len(protos) != 0 {
		t.Errorf("the server served %v; want no request", protos)
	}
	if got := tg.Protocols(); got[ProtoHTTP1] != 5 || got[ProtoH2] != 0 {
		t.Errorf("protocols %v; want http/1.1 5 (one connection per request, each closed unused)", got)
	}
	if notes := tg.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "5 of the 5 connections") || !strings.Contains(notes[0], "http/1.1 5") {
		t.Errorf("notes %q; want one saying 5 of 5 connections spoke http/1.1", notes)
	}
}

// TestHTTP2GoAway: a server that sends GOAWAY whenever a connection is
// idle (its keep-alives off) closes connection after connection under the
// load: every request still succeeds, those the server never processed as
// it went away sent again on another connection, and the connections it
// closed are not kept.
func TestHTTP2GoAway(t *testing.T) {
	srv := newH2Server(t, true, true, nil)
	srv.Config.SetKeepAlivesEnabled(false)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, TLS: srv.tlsTo()})
	for _, res := range run(t.Context(), tg, load.Config{}, 40, time.Millisecond) {
		if res.Status != 200 || res.Err != "" {
			t.Errorf("request %d: status %d, error %q", res.Seq, res.Status, res.Err)
		}
	}
	_, streams, _ := srv.seen()
	t.Logf("40 requests over %d connections", len(streams))
	if len(streams) < 2 {
		t.Errorf("40 requests over %d connection; a server that says GOAWAY whenever it is idle closes some", len(streams))
	}
	tg.h2.mu.Lock()
	open := len(tg.h2.conns)
	tg.h2.mu.Unlock()
	if open > 2 {
		t.Errorf("%d connections kept open; the server closed all but the last", open)
	}
}

// TestHTTP2Options: the HTTP/2 options are refused where they cannot
// apply, naming what would.
func TestHTTP2Options(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://127.0.0.1/", HTTP2: true}, "for HTTP/2 in cleartext give --h2c"},
		{Config{URL: "https://127.0.0.1/", H2C: true}, "for HTTP/2 over TLS give --http2"},
		{Config{URL: "https://127.0.0.1/", HTTP2: true, H2C: true}, "give one"},
		{Config{URL: "https://127.0.0.1/", HTTP2: true, MaxStreams: -1}, "--max-streams must be 0"},
		{Config{URL: "https://127.0.0.1/", MaxStreams: 8}, "give --http2 (https://) or --h2c (http://)"},
	} {
		_, err := New(tt.cfg)
		if err == nil || tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v): %v; want EINVALID saying %q", tt.cfg, err, tt.want)
		}
	}
}

// TestProbeH2C: the cleartext probe tells an HTTP/2 server by prior
// knowledge from an HTTP/1.1 one, without a request.
func TestProbeH2C(t *testing.T) {
	h2c := newH2Server(t, false, true, nil)
	h1 := newH2Server(t, false, false, nil)
	if reached, err := ProbeH2C(t.Context(), strings.TrimPrefix(h2c.URL, "http://"), ""); !reached || err != nil {
		t.Errorf("h2c server: reached %v, %v; want reached, no error", reached, err)
	}
	reached, err := ProbeH2C(t.Context(), strings.TrimPrefix(h1.URL, "http://"), "")
	if !reached || err == nil || !strings.Contains(err.Error(), "HTTP/1") {
		t.Errorf("HTTP/1.1 server: reached %v, %v; want an error saying it answered with HTTP/1", reached, err)
	}
	// The preface is no request to an HTTP/2 server. (Go's HTTP/1.1
	// server hands it to the handler as a "PRI *" request, for h2c
	// upgrades by hijacking, and answers with the handler's response.)
	if protos, _, _ := h2c.seen(); len(protos) != 0 {
		t.Errorf("the probe made requests of the h2c server: %v", protos)
	}
}

// TestHTTP2ConnectionLimit: at the target's connection limit, with every
// connection at its stream cap, a request waits for a stream to end, and
// is counted as having waited; the target's counter counts the
// connections HTTP/2 opened and the requests that reused one.
func TestHTTP2ConnectionLimit(t *testing.T) {
	hold := make(chan struct{})
	srv := newH2Server(t, true, true, hold)
	tg := newTarget(t, Config{URL: srv.URL + "/", HTTP2: true, TLS: srv.tlsTo(), MaxConns: 1, MaxStreams: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	results := make(chan tare.Result, 3)
	for range 3 {
		go func() {
			res := tare.Result{Sent: time.Now()}
			tg.Do(ctx, &res)
			results <- res
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); tg.Conns().Stats().Waited < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("counter %+v: want 2 requests waiting for the one connection", tg.Conns().Stats())
		}
	}
	close(hold)
	conns := map[uint64]bool{}
	for range 3 {
		res := <-results
		if res.Status != 200 || res.Err != "" {
			t.Errorf("status %d, error %q", res.Status, res.Err)
		}
		conns[res.Conn] = true
	}
	st := tg.Conns().Stats()
	if _, streams, _ := srv.seen(); len(streams) != 1 || st.Opened != 1 || st.Reused != 2 || st.Waited != 2 || len(conns) != 1 || conns[0] {
		t.Errorf("server connections %v, counter %+v, result connections %v; want one connection, numbered, reused twice, 2 waits", streams, st, conns)
	}
}
