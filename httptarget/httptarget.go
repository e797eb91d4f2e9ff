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
	tmpl      *http.Request // method, URL, header and host; copied per request, never sent
	body      []byte
	timeout   time.Duration
	redirects redirects
	name      string
}

var (
	_ tare.Target      = (*Target)(nil)
	_ tare.ConnCounted = (*Target)(nil)
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
	if shared != nil {
		tr, counter = shared.transport, shared.counter
	} else {
		tr, counter = newTransport(cfg, maxConns)
	}
	t := &Target{
		maxConns:  maxConns,
		unix:      cfg.UnixSocket,
		counter:   counter,
		transport: tr,
		tmpl:      tmpl,
		body:      cfg.Body,
		timeout:   timeout,
		redirects: newRedirects(u, cfg.Redirects, cfg.CrossHost),
		name:      method + " " + redactURL(u),
	}
	t.client = &http.Client{Transport: tr, CheckRedirect: t.checkRedirect}
	var proxy *url.URL
	if tr.Proxy != nil {
		proxy, _ = tr.Proxy(tmpl)
	}
	if u.Scheme == "http" && proxy == nil && !cfg.NetHTTP {
		t.wire = newWireRequest(tmpl, cfg.Body)
	}
	return t, nil
}

// newTransport is net/http's pool for cfg, and the counter of its
// connections. net/http takes the connection idle last first too, and
// MaxConnsPerHost counts a connection from its dial to its close, so at
// most maxConns are open to one server at once.
func newTransport(cfg Config, maxConns int) (*http.Transport, *tare.ConnCounter) {
	counter := new(tare.ConnCounter)
	proxy := http.ProxyFromEnvironment
	if cfg.UnixSocket != "" {
		proxy = nil // every connection goes to the socket, as with curl
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
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{InsecureSkipVerify: cfg.Insecure}, // the user's explicit choice (--insecure)
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
// own when a run ends). Requests in flight are unaffected.
func (t *Target) Close() { t.transport.CloseIdleConnections() }

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
		client = &http.Client{Transport: t.transport, CheckRedirect: func(next *http.Request, via []*http.Request) error {
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
