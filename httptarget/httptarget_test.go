package httptarget

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/leakcheck"
	"github.com/tare-dev/tare/internal/testkit/loopback"
	"github.com/tare-dev/tare/load"

	"github.com/tare-dev/tare"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// quietLog swallows the server's log of the failures the tests provoke.
var quietLog = log.New(io.Discard, "", 0)

// newServer starts a loopback server, TLS or plain, closed at the end of
// the test.
func newServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = quietLog
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// clients are the two ways a Target sends plain http://: load's event
// loop, and net/http (kept for https://, proxies and --net-http). Tests of
// behaviour run on both, through load's Runner as a run sends them.
var clients = []struct {
	name    string
	netHTTP bool
}{{"loop", false}, {"net-http", true}}

// newTarget builds a target closed at the end of the test.
func newTarget(t *testing.T, cfg Config) *Target {
	t.Helper()
	tg, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(tg.Close)
	return tg
}

// do sends one request as a run of one arrival: the zero Result when the
// run sent none (its context had ended).
func do(ctx context.Context, tg tare.Target) tare.Result {
	if rs := run(ctx, tg, load.Config{Drain: 10 * time.Millisecond}, 1, 0); len(rs) > 0 {
		return rs[0]
	}
	return tare.Result{}
}

// run sends n arrivals gap apart to tg through load's Runner, as tare run
// does, and returns their results in seq order.
func run(ctx context.Context, tg tare.Target, cfg load.Config, n int, gap time.Duration) []tare.Result {
	out := make(chan *load.Batch, 64)
	go load.New(tg, cfg).Run(ctx, time.Now(), &every{gap: gap, n: n}, out)
	results := make([]tare.Result, 0, n)
	for res := range load.All(out) {
		results = append(results, res)
	}
	slices.SortFunc(results, func(a, b tare.Result) int { return cmp.Compare(a.Seq, b.Seq) })
	return results
}

// every is a schedule of n arrivals gap apart.
type every struct {
	gap  time.Duration
	n, i int
}

func (e *every) Next() (time.Duration, bool) {
	if e.i >= e.n {
		return 0, false
	}
	e.i++
	return time.Duration(e.i-1) * e.gap, true
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    string // String() of the target, or a substring of the error
		wantErr bool
	}{
		{name: "get", cfg: Config{URL: "http://127.0.0.1:8080/path?q=1"}, want: "GET http://127.0.0.1:8080/path?q=1"},
		{name: "body means post", cfg: Config{URL: "http://127.0.0.1/", Body: []byte("x")}, want: "POST http://127.0.0.1/"},
		{name: "explicit method with body", cfg: Config{URL: "http://127.0.0.1/", Method: "PUT", Body: []byte("x")}, want: "PUT http://127.0.0.1/"},
		{name: "standard method upper-cased", cfg: Config{URL: "http://127.0.0.1/", Method: "delete"}, want: "DELETE http://127.0.0.1/"},
		{name: "custom method kept", cfg: Config{URL: "http://127.0.0.1/", Method: "PURGE"}, want: "PURGE http://127.0.0.1/"},
		{name: "upper-case scheme", cfg: Config{URL: "HTTPS://[::1]:8443/"}, want: "GET https://[::1]:8443/"},
		{name: "password redacted", cfg: Config{URL: "http://alice:s3cret@127.0.0.1/x"}, want: "GET http://redacted@127.0.0.1/x"},
		{name: "user redacted", cfg: Config{URL: "https://ghp_token@127.0.0.1/"}, want: "GET https://redacted@127.0.0.1/"},
		{name: "secret query redacted in order", cfg: Config{URL: "http://127.0.0.1/v1?b=2&api_key=abc&a=1&access_token=x&flag"}, want: "GET http://127.0.0.1/v1?b=2&api_key=[redacted]&a=1&access_token=[redacted]&flag"},
		{name: "escaped query name redacted", cfg: Config{URL: "http://127.0.0.1/?X%2DAmz%2DSignature=abc"}, want: "GET http://127.0.0.1/?X%2DAmz%2DSignature=[redacted]"},

		{name: "empty url", cfg: Config{}, want: "url is required, like http://127.0.0.1:8080/path", wantErr: true},
		{name: "no scheme", cfg: Config{URL: "localhost:8080"}, want: `url must start with http:// or https://, like http://127.0.0.1:8080/path; got "localhost:8080"`, wantErr: true},
		{name: "ftp", cfg: Config{URL: "ftp://127.0.0.1/"}, want: "must start with http:// or https://", wantErr: true},
		{name: "relative", cfg: Config{URL: "/path"}, want: "must start with http://", wantErr: true},
		{name: "no host", cfg: Config{URL: "http:///path"}, want: `url must name a host, like http://127.0.0.1:8080/path; got "http:///path"`, wantErr: true},
		{name: "port only", cfg: Config{URL: "http://:8080/"}, want: "must name a host", wantErr: true},
		{name: "unparsable", cfg: Config{URL: "http://[::1/"}, want: `url must look like http://host:port/path; got "http://[::1/"`, wantErr: true},
		{name: "error redacts password", cfg: Config{URL: "ftp://bob:hunter2@127.0.0.1/"}, want: `got "ftp://redacted@127.0.0.1/"`, wantErr: true},
		{name: "bad method", cfg: Config{URL: "http://127.0.0.1/", Method: "GE T"}, want: `method must be a word like GET or POST; got "GE T"`, wantErr: true},
		{name: "bad header name", cfg: Config{URL: "http://127.0.0.1/", Header: http.Header{"Bad Name": {"x"}}}, want: `header name "Bad Name"`, wantErr: true},
		{name: "header value with newline", cfg: Config{URL: "http://127.0.0.1/", Header: http.Header{"X-A": {"a\r\nX-B: b"}}}, want: `header "X-A" has a value with a control character`, wantErr: true},
		{name: "negative timeout", cfg: Config{URL: "http://127.0.0.1/", Timeout: -time.Second}, want: "timeout must be positive, like 30s; got -1s", wantErr: true},
		{name: "negative max conns", cfg: Config{URL: "http://127.0.0.1/", MaxConns: -1}, want: "max connections must be positive, like 1024; got -1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, err := New(tt.cfg)
			if tt.wantErr {
				if err == nil {
					tg.Close()
					t.Fatalf("New = %v, want an error", tg)
				}
				if code := tare.ErrorCode(err); code != tare.EINVALID {
					t.Errorf("error code = %q, want %q", code, tare.EINVALID)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %q, want it to contain %q", err, tt.want)
				}
				for _, secret := range []string{"hunter2", "s3cret"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q shows the secret %q", err, secret)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer tg.Close()
			if got := tg.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewDoesNotKeepCallersHeader(t *testing.T) {
	h := http.Header{"X-A": {"1"}}
	tg := newTarget(t, Config{URL: "http://127.0.0.1/", Header: h})
	h.Set("X-A", "2")
	if got := tg.tmpl.Header.Get("X-A"); got != "1" {
		t.Errorf("target header X-A = %q after the caller changed its map, want 1", got)
	}
}

// seen is what the server received.
type seen struct {
	method, host, path string
	header             http.Header
	body               []byte
}

func TestDo(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 1234)
	tests := []struct {
		name    string
		cfg     Config
		handler http.HandlerFunc
		check   func(t *testing.T, res tare.Result, got seen)
	}{
		{
			name: "get",
			cfg:  Config{Header: http.Header{"X-Test": {"yes"}}},
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write(payload)
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", int64(len(payload)), 0)
				if got.method != "GET" || got.header.Get("X-Test") != "yes" || len(got.body) != 0 {
					t.Errorf("server saw %s with X-Test %q and a %d-byte body", got.method, got.header.Get("X-Test"), len(got.body))
				}
				if ua := got.header.Get("User-Agent"); ua != "tare" {
					t.Errorf("User-Agent = %q, want tare", ua)
				}
				// Compression is the user's choice: the target asks for none.
				if ae := got.header.Get("Accept-Encoding"); ae != "" {
					t.Errorf("Accept-Encoding = %q, want none", ae)
				}
			},
		},
		{
			name:    "post body",
			cfg:     Config{Body: []byte(`{"n":1}`), Header: http.Header{"Content-Type": {"application/json"}}},
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") },
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 2, 7)
				if got.method != "POST" || string(got.body) != `{"n":1}` || got.header.Get("Content-Type") != "application/json" {
					t.Errorf("server saw %s %q (%s)", got.method, got.body, got.header.Get("Content-Type"))
				}
			},
		},
		{
			// Larger than a socket takes at once: the rest goes out as
			// the socket takes it.
			name:    "post large body",
			cfg:     Config{Body: bytes.Repeat([]byte("b"), largeBody)},
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") },
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 2, largeBody)
				if !bytes.Equal(got.body, bytes.Repeat([]byte("b"), largeBody)) {
					t.Errorf("server saw a %d-byte body; want the %d bytes sent", len(got.body), largeBody)
				}
			},
		},
		{
			name: "host header through a relative redirect",
			cfg:  Config{Header: http.Header{"Host": {"api.example.test"}}},
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/start" {
					http.Redirect(w, r, "/end", http.StatusFound)
				}
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 0, 0)
				if got.path != "/end" || got.host != "api.example.test" {
					t.Errorf("server saw %s for host %q, want /end for api.example.test", got.path, got.host)
				}
			},
		},
		{
			name:    "host header",
			cfg:     Config{Header: http.Header{"Host": {"api.example.test"}}},
			handler: func(w http.ResponseWriter, r *http.Request) {},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 0, 0)
				if got.host != "api.example.test" {
					t.Errorf("server saw host %q, want api.example.test", got.host)
				}
			},
		},
		{
			name:    "user agent of the user's",
			cfg:     Config{Header: http.Header{"User-Agent": {"probe/1"}}},
			handler: func(w http.ResponseWriter, r *http.Request) {},
			check: func(t *testing.T, res tare.Result, got seen) {
				if ua := got.header.Get("User-Agent"); ua != "probe/1" {
					t.Errorf("User-Agent = %q, want probe/1", ua)
				}
			},
		},
		{
			name: "server error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 503, "http 503", int64(len("overloaded\n")), 0)
			},
		},
		{
			name: "not modified is not 2xx",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotModified)
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 304, "http 304", 0, 0)
			},
		},
		{
			name: "redirect followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/start" {
					http.Redirect(w, r, "/end", http.StatusFound)
					return
				}
				io.WriteString(w, "end")
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 3, 0)
				if got.path != "/end" {
					t.Errorf("last request was for %q, want /end", got.path)
				}
			},
		},
		{
			// A 307 re-sends the body; BytesOut counts both copies.
			name: "307 re-sends the body",
			cfg:  Config{Body: []byte("hello")},
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/start" {
					http.Redirect(w, r, "/end", http.StatusTemporaryRedirect)
				}
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "", 0, 10)
				if got.path != "/end" || string(got.body) != "hello" {
					t.Errorf("last request %s %q, want /end with hello", got.path, got.body)
				}
			},
		},
		{
			name: "body cut short",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				w.Write(payload[:10])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // drops the connection mid-body
			},
			check: func(t *testing.T, res tare.Result, got seen) {
				wantResult(t, res, 200, "eof", 10, 0)
			},
		},
	}
	for _, client := range clients {
		for _, tt := range tests {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				var (
					mu  sync.Mutex // guards got, written by the server's goroutine
					got seen
				)
				srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					mu.Lock()
					got = seen{method: r.Method, host: r.Host, path: r.URL.Path, header: r.Header, body: body}
					mu.Unlock()
					tt.handler(w, r)
				})
				cfg := tt.cfg
				cfg.URL = srv.URL + "/start"
				cfg.NetHTTP = client.netHTTP
				res := do(t.Context(), newTarget(t, cfg))
				mu.Lock()
				defer mu.Unlock()
				tt.check(t, res, got)
			})
		}
	}
}

// largeBody is more than a loopback socket takes in one write.
const largeBody = 4<<20 + 7

// wantResult checks the fields Do sets, and that its clocks are in order:
// Sent ≤ FirstByte ≤ Done.
func wantResult(t *testing.T, res tare.Result, status int, errKind string, in, out int64) {
	t.Helper()
	if res.Status != status || res.Err != errKind || res.BytesIn != in || res.BytesOut != out {
		t.Errorf("result: status %d, err %q, bytes in %d, out %d; want %d, %q, %d, %d",
			res.Status, res.Err, res.BytesIn, res.BytesOut, status, errKind, in, out)
	}
	if res.FirstByte.IsZero() || res.FirstByte.Before(res.Sent) || res.Done.Before(res.FirstByte) {
		t.Errorf("clocks out of order: sent %v, first byte %v, done %v", res.Sent, res.FirstByte, res.Done)
	}
}

// TestDoErrorKinds provokes each transport failure on loopback and checks
// the kind Do records.
func TestDoErrorKinds(t *testing.T) {
	// hang holds a request until the client goes away (bounded, so a
	// broken client cannot hold the test).
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	hijack := func(linger bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			if !linger {
				conn.(*net.TCPConn).SetLinger(0) // close with RST, not FIN
			}
			conn.Close()
		}
	}
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }

	tests := []struct {
		name     string
		url      func(t *testing.T) string
		insecure bool
		timeout  time.Duration
		want     string
	}{
		{name: "refused", url: func(t *testing.T) string { return "http://" + loopback.FreeAddr(t) + "/" }, want: "refused"},
		{name: "dns", url: func(t *testing.T) string { return "http://no..such/" }, want: "dns"}, // invalid name: fails before any query
		{name: "timeout", url: serverURL(false, hang), timeout: 50 * time.Millisecond, want: "timeout"},
		{name: "server closes", url: serverURL(false, hijack(true)), want: "eof"},
		{name: "server resets", url: serverURL(false, hijack(false)), want: "reset"},
		{name: "https to a plain server", url: func(t *testing.T) string {
			return strings.Replace(newServer(t, false, ok).URL, "http://", "https://", 1)
		}, want: "tls"},
		{name: "untrusted certificate", url: serverURL(true, ok), want: "tls"},
		{name: "insecure accepts the certificate", url: serverURL(true, ok), insecure: true, want: ""},
	}
	for _, client := range clients {
		for _, tt := range tests {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				tg := newTarget(t, Config{URL: tt.url(t), Insecure: tt.insecure, Timeout: tt.timeout, NetHTTP: client.netHTTP})
				res := do(t.Context(), tg)
				if res.Err != tt.want {
					t.Errorf("Err = %q, want %q", res.Err, tt.want)
				}
				if res.Done.Before(res.Sent) {
					t.Errorf("done %v before sent %v", res.Done, res.Sent)
				}
			})
		}

		// A run that ends cancels its requests in flight; the next run on
		// the same target must still find its connections usable.
		t.Run(client.name+"/canceled", func(t *testing.T) {
			// Two warm-up requests meet in the handler, so two connections
			// exist: one the canceled request takes, one idle through it.
			const (
				warmUp = iota
				holding
				serving
			)
			var mode atomic.Int32
			var met sync.WaitGroup
			met.Add(2)
			started := make(chan struct{}, 1)
			srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
				switch mode.Load() {
				case warmUp:
					met.Done()
					met.Wait()
				case holding:
					started <- struct{}{}
					hang(w, r)
					return
				}
				ok(w, r)
			})
			tg := newTarget(t, Config{URL: srv.URL, NetHTTP: client.netHTTP})
			run(t.Context(), tg, load.Config{}, 2, 0)
			mode.Store(holding)
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-started
				cancel()
			}()
			if res := do(ctx, tg); res.Err != "canceled" {
				t.Errorf("Err = %q, want canceled", res.Err)
			}
			if res := do(ctx, tg); !res.Sent.IsZero() {
				t.Errorf("after the end: a request was sent (%+v); a run whose context ended sends none", res)
			}
			mode.Store(serving)
			for i := range 3 {
				if res := do(t.Context(), tg); res.Err != "" {
					t.Errorf("next run, request %d: Err = %q, want none", i, res.Err)
				}
			}
		})
	}
}

// serverURL starts a server when the test case runs and returns its URL.
func serverURL(tlsOn bool, h http.HandlerFunc) func(t *testing.T) string {
	return func(t *testing.T) string { return newServer(t, tlsOn, h).URL }
}

// TestKeepAlive counts the connections the server accepts: sequential
// requests must share one, failed responses included, and concurrent ones
// must not open a connection per request.
func TestKeepAlive(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		status   int
		workers  int
		requests int // per worker
		maxConns int64
	}{
		{name: "sequential get", status: 200, workers: 1, requests: 200, maxConns: 1},
		{name: "sequential post", cfg: Config{Body: []byte("payload")}, status: 200, workers: 1, requests: 200, maxConns: 1},
		{name: "sequential 503", status: 503, workers: 1, requests: 200, maxConns: 1},
		// net/http may dial while another request is about to free a
		// connection, so concurrency can open a few more than in flight.
		{name: "8 concurrent", status: 200, workers: 8, requests: 25, maxConns: 16},
	}
	for _, client := range clients {
		for _, tt := range tests {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				var conns atomic.Int64
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.WriteHeader(tt.status)
					w.Write(bytes.Repeat([]byte("y"), 512))
				}))
				srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
					if s == http.StateNew {
						conns.Add(1)
					}
				}
				srv.Start()
				defer srv.Close()
				cfg := tt.cfg
				cfg.URL = srv.URL
				cfg.NetHTTP = client.netHTTP
				tg := newTarget(t, cfg)

				// As many in flight as workers, at a rate they cannot keep
				// up with: arrivals beyond are dropped, never given a
				// connection of their own.
				total := tt.workers * tt.requests
				bad, sent := 0, 0
				for _, res := range run(t.Context(), tg, load.Config{MaxInFlight: tt.workers}, total, 200*time.Microsecond) {
					if res.Dropped {
						continue
					}
					sent++
					if res.Status != tt.status {
						bad++
					}
				}
				t.Logf("%d requests sent over %d connections", sent, conns.Load())
				if bad > 0 || sent == 0 {
					t.Errorf("%d of %d requests sent did not get status %d", bad, sent, tt.status)
				}
				if n := conns.Load(); n > tt.maxConns {
					t.Errorf("%d requests opened %d connections, want at most %d", total, n, tt.maxConns)
				}
			})
		}
	}
}

// BenchmarkDo is one request's cost on each client, as a run sends it,
// against a loopback server in the same process: compare loop with
// net-http.
func BenchmarkDo(b *testing.B) {
	for _, client := range clients {
		for _, bc := range []struct {
			name string
			body []byte
		}{
			{"get", nil},
			{"post", []byte(`{"prompt":"hello"}`)},
		} {
			b.Run(client.name+"/"+bc.name, func(b *testing.B) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					io.WriteString(w, "ok")
				}))
				defer srv.Close()
				tg, err := New(Config{URL: srv.URL, Body: bc.body, NetHTTP: client.netHTTP})
				if err != nil {
					b.Fatal(err)
				}
				defer tg.Close()
				b.ReportAllocs()
				b.ResetTimer()
				for _, res := range run(b.Context(), tg, load.Config{MaxInFlight: 1}, b.N, time.Nanosecond) {
					if res.Err != "" {
						b.Fatalf("request failed: %s", res.Err)
					}
				}
			})
		}
	}
}

// TestLargeResponseHeader: a response head of hundreds of kilobytes,
// over many reads, is read by both clients.
func TestLargeResponseHeader(t *testing.T) {
	srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Large", strings.Repeat("v", 300<<10))
		io.WriteString(w, "ok")
	})
	for _, client := range clients {
		res := do(t.Context(), newTarget(t, Config{URL: srv.URL, NetHTTP: client.netHTTP}))
		if res.Err != "" || res.Status != 200 || res.BytesIn != 2 {
			t.Errorf("%s: status %d, Err %q, %d bytes; want 200 with 2 bytes", client.name, res.Status, res.Err, res.BytesIn)
		}
	}
}

// TestRedirects: both clients follow at most Config.Redirects redirects,
// count every hop in Result.Redirects, and never follow one to another
// host (another port of 127.0.0.1 is another server) unless CrossHost
// allows it; a redirect not followed leaves its 3xx as the response
// (issue 20, item 1).
func TestRedirects(t *testing.T) {
	// counter is a loopback server that counts the requests it serves by
	// path: the real load, whatever the client reports.
	type counter struct {
		srv  *httptest.Server
		mu   sync.Mutex // guards hits, written by the server's goroutines
		hits map[string]int
	}
	serve := func(t *testing.T, h http.HandlerFunc) *counter {
		c := &counter{hits: map[string]int{}}
		c.srv = newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			c.hits[r.URL.Path]++
			c.mu.Unlock()
			h(w, r)
		})
		return c
	}
	total := func(c *counter) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, v := range c.hits {
			n += v
		}
		return n
	}

	tests := []struct {
		name      string
		redirects int
		crossHost bool
		path      string // first request, on server a
		status    int
		err       string
		hops      int
		hitsA     int // requests server a served
		hitsB     int // requests server b, another host, served
	}{
		{name: "one hop followed by default", path: "/moved", status: 200, hops: 1, hitsA: 2},
		{name: "a chain within the limit", redirects: 3, path: "/chain/3", status: 200, hops: 3, hitsA: 4},
		{name: "a chain beyond the limit", redirects: 2, path: "/chain/3", status: 301, err: tare.KindRedirectLimit, hops: 2, hitsA: 3},
		{name: "a loop stops at the default limit", path: "/loop", status: 302, err: tare.KindRedirectLimit, hops: DefaultRedirects, hitsA: DefaultRedirects + 1},
		{name: "none followed: the 3xx is the response", redirects: NoRedirects, path: "/moved", status: 301, hops: 0, hitsA: 1},
		{name: "another host is not loaded", path: "/away", status: 302, err: tare.KindCrossHost, hops: 0, hitsA: 1},
		{name: "another host when asked", crossHost: true, path: "/away", status: 200, hops: 1, hitsA: 1, hitsB: 1},
		{name: "back from another host when asked", crossHost: true, redirects: 1, path: "/away-and-back", status: 302, err: tare.KindRedirectLimit, hops: 1, hitsA: 1, hitsB: 1},
	}
	for _, client := range clients {
		for _, tt := range tests {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				var a *counter
				b := serve(t, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/away-and-back" {
						http.Redirect(w, r, a.srv.URL+"/end", http.StatusFound)
						return
					}
					io.WriteString(w, "b")
				})
				a = serve(t, func(w http.ResponseWriter, r *http.Request) {
					switch p := r.URL.Path; {
					case p == "/moved":
						http.Redirect(w, r, "/end", http.StatusMovedPermanently)
					case strings.HasPrefix(p, "/chain/") && p != "/chain/0":
						var n int
						fmt.Sscanf(p, "/chain/%d", &n)
						http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusMovedPermanently)
					case p == "/loop":
						http.Redirect(w, r, "/loop", http.StatusFound)
					case p == "/away", p == "/away-and-back":
						http.Redirect(w, r, b.srv.URL+p, http.StatusFound)
					default:
						io.WriteString(w, "end")
					}
				})
				tg := newTarget(t, Config{URL: a.srv.URL + tt.path, Redirects: tt.redirects, CrossHost: tt.crossHost, NetHTTP: client.netHTTP})
				res := do(t.Context(), tg)
				if res.Status != tt.status || res.Err != tt.err || res.Redirects != tt.hops {
					t.Errorf("status %d, err %q, redirects %d; want %d, %q, %d", res.Status, res.Err, res.Redirects, tt.status, tt.err, tt.hops)
				}
				if got := total(a); got != tt.hitsA {
					t.Errorf("the server named served %d requests, want %d (%v)", got, tt.hitsA, a.hits)
				}
				if got := total(b); got != tt.hitsB {
					t.Errorf("the other host served %d requests, want %d", got, tt.hitsB)
				}
				// Every answer the server sent is one request it served.
				if res.Redirects+1 != tt.hitsA+tt.hitsB {
					t.Errorf("%d redirects + 1 ≠ %d requests served", res.Redirects, tt.hitsA+tt.hitsB)
				}
			})
		}
	}
}

func TestNewRedirects(t *testing.T) {
	_, err := New(Config{URL: "http://127.0.0.1:1/", Redirects: -2})
	if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), "redirects must be 0 or more") {
		t.Errorf("New with Redirects -2: %v, want EINVALID naming redirects", err)
	}
}

// TestServerClosesIdleConnections: a server that closes a keep-alive
// connection once idle leaves an end of file on it, which is never counted
// as a failure: the connection is closed, and the next request opens
// another, whether it comes soon or long after.
func TestServerClosesIdleConnections(t *testing.T) {
	const idle = 20 * time.Millisecond
	for _, client := range clients {
		for _, gap := range []time.Duration{time.Millisecond, 3 * idle, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%s apart", client.name, gap), func(t *testing.T) {
				var conns atomic.Int64
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Write([]byte("ok"))
				}))
				srv.Config.IdleTimeout = idle
				srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
					if s == http.StateNew {
						conns.Add(1)
					}
				}
				srv.Start()
				defer srv.Close()
				tg := newTarget(t, Config{URL: srv.URL, NetHTTP: client.netHTTP})
				n := 6
				if gap > 100*time.Millisecond {
					n = 2
				}
				for i, res := range run(t.Context(), tg, load.Config{MaxInFlight: 1}, n, gap) {
					if !res.Dropped && (res.Status != 200 || res.Err != "") {
						t.Errorf("request %d, %s after the last: status %d, error %q; want 200", i, gap, res.Status, res.Err)
					}
				}
				if gap > idle && conns.Load() < int64(n) {
					t.Errorf("%d requests %s apart used %d connections: the server closed each after %s idle", n, gap, conns.Load(), idle)
				}
			})
		}
	}
}

// TestRedirectToHTTPS: a plain http:// target that redirects to an
// https:// one on another host is followed over TLS (the event loop hands
// the request to net/http at the redirect), and the request after it too.
func TestRedirectToHTTPS(t *testing.T) {
	secure := newServer(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") })
	plain := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secure.URL+"/landed", http.StatusFound)
	})
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			tg := newTarget(t, Config{URL: plain.URL + "/start", NetHTTP: client.netHTTP, Insecure: true, CrossHost: true})
			for i, res := range run(t.Context(), tg, load.Config{}, 2, 20*time.Millisecond) {
				if res.Status != 200 || res.Err != "" || res.Redirects != 1 || res.BytesIn != int64(len("secure")) {
					t.Errorf("request %d: status %d, error %q, %d redirects, %d bytes; want 200 after 1 redirect to https, 6 bytes", i, res.Status, res.Err, res.Redirects, res.BytesIn)
				}
			}
		})
	}
}

// TestStaleConnectionSentAgain: a keep-alive connection the server closes
// as the next request arrives on it (a race no look at the idle connection
// can see coming) gives that request no answer at all. An idempotent
// request is sent once more, on a new connection, and succeeds; a POST is
// not, and fails as an end of file.
func TestStaleConnectionSentAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	var served sync.WaitGroup
	t.Cleanup(served.Wait)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			served.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				// One request answered; the next read whole, then closed.
				for i := range 2 {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if i == 0 {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					}
				}
			})
		}
	}()
	url := "http://" + ln.Addr().String() + "/"
	for _, client := range clients {
		for _, tt := range []struct {
			name string
			body []byte
			want string // the second request's error
		}{
			{name: "get", want: ""},
			{name: "post", body: []byte("once"), want: tare.KindEOF},
		} {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				if client.netHTTP && tt.body != nil {
					t.Skip("net/http's own choice for a POST")
				}
				before := conns.Load()
				tg := newTarget(t, Config{URL: url, Body: tt.body, NetHTTP: client.netHTTP})
				rs := run(t.Context(), tg, load.Config{MaxInFlight: 1}, 2, 50*time.Millisecond)
				if len(rs) != 2 || rs[0].Err != "" || rs[1].Err != tt.want {
					t.Fatalf("results %+v; want the first ok and the second with error %q", rs, tt.want)
				}
				if opened := conns.Load() - before; tt.want == "" && opened != 2 {
					t.Errorf("%d connections opened; want 2: the second request sent again on a new one", opened)
				}
				if tt.body != nil && rs[1].BytesOut != int64(len(tt.body)) {
					t.Errorf("BytesOut %d; want %d, the one copy sent", rs[1].BytesOut, len(tt.body))
				}
			})
		}
	}
}

// TestMixOnTheLoop: a targets file's requests each go to their own server
// on the event loop, each arrival to the request Pick gives it.
func TestMixOnTheLoop(t *testing.T) {
	var hits [2]atomic.Int64
	var urls []string
	for i := range hits {
		srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			fmt.Fprint(w, i)
		})
		urls = append(urls, srv.URL+"/"+fmt.Sprint(i))
	}
	reqs := []Request{{Method: "GET", URL: urls[0], Weight: 1}, {Method: "GET", URL: urls[1], Weight: 3}}
	m, err := NewMix("mix.txt", reqs, Config{}, false, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if len(m.Endpoints()) != 2 {
		t.Fatalf("Endpoints() = %d; want one per request", len(m.Endpoints()))
	}
	rs := run(t.Context(), m, load.Config{}, 200, time.Millisecond)
	var want [2]int64
	for _, res := range rs {
		if res.Err != "" || res.TargetIndex != m.Pick(res.Seq) {
			t.Fatalf("seq %d: err %q, target %d; want request %d", res.Seq, res.Err, res.TargetIndex, m.Pick(res.Seq))
		}
		want[res.TargetIndex]++
	}
	if hits[0].Load() != want[0] || hits[1].Load() != want[1] {
		t.Errorf("servers served %d and %d; the results say %v", hits[0].Load(), hits[1].Load(), want)
	}
}
