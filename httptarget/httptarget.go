// Package httptarget is tare's plain HTTP target: it sends one configured
// request per arrival and records what happened in a tare.Result.
//
// Connections are kept alive and reused, the one idle last first, up to
// Config.MaxConns per server (a host and port, or the Unix socket of
// Config.UnixSocket), so the load measures the server rather than TCP and
// TLS handshakes; they are counted in a tare.ConnCounter (Conns). The
// response body is read to the end and discarded, which both times the whole
// response and lets the connection go back to the pool. Compression is left
// to the user's headers: the target never adds Accept-Encoding, so BytesIn
// counts the bytes the server sent.
//
// A failed request is a measurement: Do records it in Result.Err as a small
// set of kinds ("timeout", "refused", "reset", "dns", "tls", "eof",
// "canceled", "other") or "http <status>" for a response outside 2xx, so
// summaries can count failures by cause.
//
// Redirects are followed, up to Config.Redirects in a row, and counted in
// Result.Redirects: each is one more request the server served. A redirect
// to another host (or port) than the URL's is not followed unless
// Config.CrossHost allows it; a redirect not followed leaves its 3xx as the
// response, recorded as "cross-host redirect" or "redirect limit" (or as a
// success when Config.Redirects is NoRedirects: the 3xx is what was asked
// for).
package httptarget

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/netconn"
)

// DefaultTimeout bounds one request, from send to the last body byte, when
// Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultMaxConns is the connection cap per host when Config.MaxConns is
// zero: high enough that an open loop is never held back by the pool on one
// machine, bounded so a stalled server cannot exhaust file descriptors.
const DefaultMaxConns = 1024

// Config describes the request a Target sends. The zero value of each
// optional field means its default.
type Config struct {
	Method   string        // default GET, or POST when Body is not empty
	URL      string        // http:// or https://, with a host
	Header   http.Header   // sent with every request; a Host header sets the request's host
	Body     []byte        // sent with every request
	Timeout  time.Duration // per request, from send to the last body byte; default DefaultTimeout
	Insecure bool          // skip TLS certificate verification
	MaxConns int           // connections per server open at once at most, kept alive for reuse; default DefaultMaxConns

	// UnixSocket is the path of a Unix-domain socket every connection
	// goes to, as curl's --unix-socket: the URL's host is then only the
	// Host header (and TLS's server name), and no proxy is used.
	UnixSocket string

	// Redirects is how many redirects one request follows at most:
	// DefaultRedirects when 0; NoRedirects follows none.
	Redirects int
	// CrossHost lets a redirect lead to another host (or port) than URL's.
	// Without it such a redirect is not followed: its 3xx is the response,
	// recorded as tare.KindCrossHost, and the other host gets no load.
	CrossHost bool

	// NetHTTP sends plain http:// through net/http too, instead of load's event
	// loop: for a server the loop's HTTP/1.1 cannot talk to.
	NetHTTP bool

	// TLS is the configuration of https:// connections, cloned for each
	// (tlsclient builds it from --cacert, --cert, --key, --servername and
	// --insecure); nil means the system's CAs, verified unless Insecure.
	TLS *tls.Config
	// HTTP2 speaks HTTP/2 to an https:// URL, chosen by ALPN; a connection
	// on which the server chose HTTP/1.1 carries no request (h2.go).
	// Without it or H2C, requests are HTTP/1.1.
	HTTP2 bool
	// H2C speaks HTTP/2 in cleartext to an http:// URL, by prior knowledge
	// (no upgrade), directly (no proxy).
	H2C bool
	// MaxStreams caps the streams in flight on one HTTP/2 connection; 0
	// leaves the cap to the server (its SETTINGS_MAX_CONCURRENT_STREAMS).
	MaxStreams int
	// H2Loop serves HTTP2 and H2C on load's event loop (h2loop.go),
	// framed by tare, rather than through net/http's HTTP/2 client.
	H2Loop bool
}

// userAgent is sent when the user's headers name none.
const userAgent = "tare"

// Target sends the configured request. It is safe for concurrent use.
type Target struct {
	wire      *wireRequest // plain http:// without a proxy, for load's event loop; nil otherwise
	maxConns  int
	unix      string
	counter   *tare.ConnCounter // the transport's connections, and the loop's
	client    *http.Client
	transport *http.Transport
	rt        http.RoundTripper // transport, or h2 for HTTP/2
	h2        *h2pool           // HTTP/2's own connections to the URL's server; nil for HTTP/1.1
	h2s       *h2pools          // the HTTP/2 pools of the targets that share transport
	h2loop    bool              // HTTP/2 on load's event loop (Config.H2Loop)
	tmpl      *http.Request     // method, URL, header and host; copied per request, never sent
	body      []byte
	timeout   time.Duration
	redirects redirects
	name      string
}

var (
	_ tare.Target          = (*Target)(nil)
	_ tare.ConnCounted     = (*Target)(nil)
	_ tare.ProtocolCounted = (*Target)(nil)
	_ tare.Noted           = (*Target)(nil)
)

// New checks cfg and returns its Target. Bad input is a *tare.Error with
// code tare.EINVALID naming the value and what would be accepted.
func New(cfg Config) (*Target, error) { return newTargetOn(cfg, nil) }

// newTargetOn is New, on shared's transport and counter when it is not nil
// (the requests of a targets file share their connections).
func newTargetOn(cfg Config, shared *Target) (*Target, error) {
	u, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	method, err := parseMethod(cfg.Method, len(cfg.Body) > 0)
	if err != nil {
		return nil, err
	}
	header := cfg.Header.Clone()
	if header == nil {
		header = make(http.Header)
	}
	for name, values := range header {
		if !validName(name) {
			return nil, tare.Errorf(tare.EINVALID, "header name %q has a character not allowed in a header name", name)
		}
		for _, v := range values {
			if !validValue(v) {
				return nil, tare.Errorf(tare.EINVALID, "header %q has a value with a control character such as a newline", name)
			}
		}
	}
	timeout := cfg.Timeout
	switch {
	case timeout < 0:
		return nil, tare.Errorf(tare.EINVALID, "timeout must be positive, like 30s; got %v", timeout)
	case timeout == 0:
		timeout = DefaultTimeout
	}
	maxConns := cfg.MaxConns
	switch {
	case maxConns < 0:
		return nil, tare.Errorf(tare.EINVALID, "max connections must be positive, like %d; got %d", DefaultMaxConns, maxConns)
	case maxConns == 0:
		maxConns = DefaultMaxConns
	}
	if cfg.Redirects < NoRedirects {
		return nil, tare.Errorf(tare.EINVALID, "redirects must be 0 or more, like %d; got %d", DefaultRedirects, cfg.Redirects)
	}
	if err := checkProtocol(cfg, u); err != nil {
		return nil, err
	}

	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", userAgent)
	}
	// Go's transport ignores a Host entry in the header map: the request's
	// Host field is what it sends.
	tmpl := &http.Request{Method: method, URL: u, Header: header}
	if h := header.Get("Host"); h != "" {
		tmpl.Host = h
		header.Del("Host")
	}

	var tr *http.Transport
	var counter *tare.ConnCounter
	var h2s *h2pools
	if shared != nil {
		tr, counter, h2s = shared.transport, shared.counter, shared.h2s
	} else {
		tr, counter = newTransport(cfg, maxConns)
		h2s = &h2pools{}
	}
	t := &Target{
		maxConns:  maxConns,
		unix:      cfg.UnixSocket,
		counter:   counter,
		transport: tr,
		rt:        tr,
		h2s:       h2s,
		tmpl:      tmpl,
		body:      cfg.Body,
		timeout:   timeout,
		redirects: newRedirects(u, cfg.Redirects, cfg.CrossHost),
		name:      method + " " + redactURL(u),
	}
	if cfg.HTTP2 || cfg.H2C {
		t.h2 = h2s.pool(tr, counter, u.Scheme, hostPort(u), maxConns, cfg.MaxStreams)
		t.rt = t.h2
	}
	t.client = &http.Client{Transport: t.rt, CheckRedirect: t.checkRedirect}
	var proxy *url.URL
	if tr.Proxy != nil {
		proxy, _ = tr.Proxy(tmpl)
	}
	if u.Scheme == "http" && proxy == nil && !cfg.NetHTTP && t.h2 == nil {
		t.wire = newWireRequest(tmpl, cfg.Body)
	}
	// The loop speaks to the server itself: through a proxy, net/http.
	t.h2loop = cfg.H2Loop && t.h2 != nil && proxy == nil
	return t, nil
}

// checkProtocol refuses HTTP/2 options that cannot apply to u.
func checkProtocol(cfg Config, u *url.URL) error {
	switch {
	case cfg.HTTP2 && cfg.H2C:
		return tare.SettingErrorf(tare.EINVALID, "http2", "is HTTP/2 over TLS for https:// and %s HTTP/2 in cleartext for http://: give one", tare.Setting("h2c"))
	case cfg.HTTP2 && u.Scheme != "https":
		return tare.SettingErrorf(tare.EINVALID, "http2", "is HTTP/2 over TLS, chosen by ALPN, for an https:// URL; got %q: for HTTP/2 in cleartext give %s", redactURL(u), tare.Setting("h2c"))
	case cfg.H2C && u.Scheme != "http":
		return tare.SettingErrorf(tare.EINVALID, "h2c", "is HTTP/2 in cleartext, for an http:// URL; got %q: for HTTP/2 over TLS give %s", redactURL(u), tare.Setting("http2"))
	case cfg.MaxStreams < 0:
		return tare.SettingErrorf(tare.EINVALID, "max-streams", "must be 0 (the server's limit) or more, like 100; got %d", cfg.MaxStreams)
	case cfg.MaxStreams > 0 && !cfg.HTTP2 && !cfg.H2C:
		return tare.SettingErrorf(tare.EINVALID, "max-streams", "caps the streams of an HTTP/2 connection: give %s (https://) or %s (http://) with it", tare.Setting("http2"), tare.Setting("h2c"))
	}
	return nil
}

// protocols is what the transport may speak: HTTP/1.1 unless HTTP/2 was
// asked for. With HTTP2, TLS offers h2 and http/1.1 by ALPN, so that a
// server without h2 says so by choosing http/1.1 (which h2.go refuses)
// rather than by failing the handshake.
func protocols(cfg Config) *http.Protocols {
	p := new(http.Protocols)
	switch {
	case cfg.HTTP2:
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	case cfg.H2C:
		p.SetUnencryptedHTTP2(true)
		p.SetHTTP2(true) // a redirect to https://
	default:
		p.SetHTTP1(true)
	}
	return p
}

// newTransport is net/http's pool for cfg, and the counter of its
// connections. net/http takes the connection idle last first too, and
// MaxConnsPerHost counts a connection from its dial to its close, so at
// most maxConns are open to one server at once.
func newTransport(cfg Config, maxConns int) (*http.Transport, *tare.ConnCounter) {
	counter := new(tare.ConnCounter)
	proxy := http.ProxyFromEnvironment
	switch {
	case cfg.UnixSocket != "":
		proxy = nil // every connection goes to the socket, as with curl
	case cfg.H2C:
		proxy = nil // prior knowledge speaks to the server itself
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: cfg.Insecure} // the user's explicit choice (--insecure)
	if cfg.TLS != nil {
		tlsConfig = cfg.TLS.Clone()
	}
	return &http.Transport{
		Proxy:       proxy,
		DialContext: netconn.Dialer(&net.Dialer{KeepAlive: 30 * time.Second}, cfg.UnixSocket, counter),
		// The default of two idle connections per host would close and
		// redial most connections under concurrency.
		MaxIdleConns:          maxConns,
		MaxIdleConnsPerHost:   maxConns,
		MaxConnsPerHost:       maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		TLSClientConfig:       tlsConfig,
		Protocols:             protocols(cfg),
	}, counter
}

// Conns counts the target's connections, net/http's and load's event
// loop's alike.
func (t *Target) Conns() *tare.ConnCounter { return t.counter }

// parseURL accepts an absolute http or https URL with a host.
func parseURL(s string) (*url.URL, error) {
	const like = "like http://127.0.0.1:8080/path"
	if strings.TrimSpace(s) == "" {
		return nil, tare.Errorf(tare.EINVALID, "url is required, %s", like)
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unparsable, it may still hold a password.
		return nil, tare.Errorf(tare.EINVALID, "url must look like http://host:port/path; got %q", tare.RedactText(s))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, tare.Errorf(tare.EINVALID, "url must start with http:// or https://, %s; got %q", like, redactURL(u))
	}
	if u.Hostname() == "" {
		return nil, tare.Errorf(tare.EINVALID, "url must name a host, %s; got %q", like, redactURL(u))
	}
	return u, nil
}

// parseMethod defaults the method and upper-cases the standard ones, so
// --method post means POST; any other token is sent as given.
func parseMethod(m string, hasBody bool) (string, error) {
	if m == "" {
		if hasBody {
			return http.MethodPost, nil
		}
		return http.MethodGet, nil
	}
	switch up := strings.ToUpper(m); up {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodTrace:
		return up, nil
	}
	if !validName(m) {
		return "", tare.Errorf(tare.EINVALID, "method must be a word like GET or POST; got %q", m)
	}
	return m, nil
}

// String is the method and the URL with credentials redacted, for
// tare.Run.Target: "GET http://127.0.0.1:8080/path".
func (t *Target) String() string { return t.name }

// Close closes net/http's idle connections (load's event loop closes its
// own when a run ends), and HTTP/2's, those of the targets that share
// its connections too. Requests in flight are unaffected, but for
// HTTP/2's, whose connections close under them.
func (t *Target) Close() {
	t.transport.CloseIdleConnections()
	t.h2s.close()
}

// Protocols counts the connections of an HTTP/2 target by what each
// spoke: "h2" (ALPN), "h2c" (prior knowledge), or what a server chose
// instead of h2 ("http/1.1"), those connections closed unused; since the
// target was made, or since ResetProtocols, counting those open then.
// nil for an HTTP/1.1 target.
func (t *Target) Protocols() map[string]int {
	if t.h2 == nil {
		return nil
	}
	return t.h2.Protocols()
}

// ResetProtocols starts Protocols' count again, from the connections
// open now: a new window of load on the same target begins.
func (t *Target) ResetProtocols() {
	if t.h2 != nil {
		t.h2.resetProtocols()
	}
}

// Notes are what a summary of the run must say beside the figures: the
// connections on which the server would not speak h2.
func (t *Target) Notes() []string {
	if t.h2 == nil {
		return nil
	}
	return t.h2.notes()
}

// Addr is the URL's scheme and host:port, the port defaulted: the server
// the connections go to (through Config.UnixSocket when it is set).
func (t *Target) Addr() (scheme, addr string) { return t.tmpl.URL.Scheme, hostPort(t.tmpl.URL) }

// Do sends one request through net/http and records it in res; res.Sent
// is already set. (Plain http:// under load goes through load's event loop
// instead: Endpoints.) It sets FirstByte when the response headers have
// arrived, Done once the body has been read to the end (or the request
// failed), Status, BytesIn, BytesOut and, for a failure, Err. A request
// still running when ctx ends is "canceled": the run stopped waiting, the
// target did not fail.
func (t *Target) Do(ctx context.Context, res *tare.Result) {
	t.send(ctx, res, t.tmpl, t.body, 0)
}

// send is Do of req with body, a request that comes after before
// redirects already followed (the event loop hands off the redirects it
// does not follow itself); its timeout counts from res.Sent.
func (t *Target) send(ctx context.Context, res *tare.Result, req *http.Request, data []byte, before int) {
	sent := res.Sent
	if sent.IsZero() {
		sent = time.Now()
	}
	reqCtx, cancel := context.WithDeadline(ctx, sent.Add(t.timeout))
	defer cancel()
	var onConn netconn.Request
	req = req.WithContext(onConn.Trace(reqCtx, t.counter))
	var body *requestBody
	if len(data) > 0 {
		body = newRequestBody(data)
		req.Body = &body.first
		req.GetBody = body.reopen
		req.ContentLength = int64(len(data))
	}
	client := t.client
	if before > 0 {
		client = &http.Client{Transport: t.rt, CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if ok, _ := t.redirects.follow(before+len(via)-1, next.URL); !ok {
				return http.ErrUseLastResponse
			}
			return nil
		}}
	}

	resp, err := client.Do(req)
	var refused string // why the redirect the request ended on was not followed
	if err == nil {
		res.FirstByte = time.Now()
		res.Status = resp.StatusCode
		res.Redirects = before + hops(resp)
		if isRedirect(resp.StatusCode) {
			if loc, lerr := resp.Location(); lerr == nil {
				_, refused = t.redirects.follow(res.Redirects, loc)
			}
		}
		res.BytesIn, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			onConn.Closing()
		}
	}
	res.Conn = onConn.ID
	res.Done = time.Now()
	if body != nil {
		res.BytesOut += body.sent.Load()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		res.Err = tare.KindCanceled
	case err != nil && reqCtx.Err() != nil:
		res.Err = tare.KindTimeout
	case errors.Is(err, errNoH2):
		res.Err = tare.KindNoH2
	case err != nil:
		res.Err = tare.ErrorKind(err)
	default:
		res.Err = t.redirects.outcome(res.Status, refused)
	}
}

// checkRedirect is net/http's CheckRedirect: via holds the requests sent
// so far, the first one and each redirect followed. A redirect not to be
// followed ends the request with its 3xx as the response.
func (t *Target) checkRedirect(next *http.Request, via []*http.Request) error {
	if ok, _ := t.redirects.follow(len(via)-1, next.URL); !ok {
		return http.ErrUseLastResponse
	}
	return nil
}

// hops is how many redirects led to resp: net/http links each request it
// made for a redirect to the response that asked for it.
func hops(resp *http.Response) int {
	n := 0
	for r := resp.Request; r != nil && r.Response != nil; r = r.Response.Request {
		n++
	}
	return n
}

// requestBody is one request's body. It counts what the transport read over
// every attempt (a retry on a keep-alive connection the server had just
// closed, a 307 redirect), which is what went out.
type requestBody struct {
	first bodyReader
	data  []byte
	sent  atomic.Int64 // atomic: the transport may read the body after Do returned
}

func newRequestBody(data []byte) *requestBody {
	b := &requestBody{data: data}
	b.first.r.Reset(data)
	b.first.sent = &b.sent
	return b
}

// reopen is the request's GetBody: a fresh reader for a retry or redirect.
func (b *requestBody) reopen() (io.ReadCloser, error) {
	r := &bodyReader{sent: &b.sent}
	r.r.Reset(b.data)
	return r, nil
}

type bodyReader struct {
	r    bytes.Reader
	sent *atomic.Int64
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.sent.Add(int64(n))
	return n, err
}

func (r *bodyReader) Close() error { return nil }
