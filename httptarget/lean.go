package httptarget

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/rawio"
)

// lean sends plain http:// requests with fasthttp. net/http hands every
// request to two goroutines of its connection and allocates its request
// and response anew; fasthttp writes and reads on the caller's goroutine
// with pooled buffers. The generator shares the CPU it measures: on one
// core this nearly doubles the highest rate (docs/performance.md).
// net/http stays for https:// (HTTP/2) and for targets behind a proxy.
type lean struct {
	client    *fasthttp.Client
	tmpl      *fasthttp.Request // method, URL, headers, host and body; copied per request
	timeout   time.Duration
	redirects redirects
	conns     connSet
}

// Response headers must fit the read buffer (a larger header fails the
// request as "other"; --net-http takes up to 10 MB): a larger buffer costs
// memory for every request in flight. At 64 KB, 512 in flight took a
// million-request run from 64 to 102 MB of RSS.
const leanReadBuffer = 16 << 10

func newLean(tmpl *http.Request, body []byte, timeout time.Duration, maxConns int, insecure bool, redirects redirects) *lean {
	l := &lean{timeout: timeout, redirects: redirects}
	l.client = &fasthttp.Client{
		DialTimeout: l.dial,
		TLSConfig:   &tls.Config{InsecureSkipVerify: insecure}, // a redirect may lead to https://; --insecure is the user's choice
		// Wait for a connection at the cap, as net/http does, rather than fail.
		MaxConnsPerHost:    maxConns,
		MaxConnWaitTimeout: timeout,
		// Servers close idle keep-alive connections (Node.js after 5 s); a
		// request on one would fail. Close them first.
		MaxIdleConnDuration:           4 * time.Second,
		ReadBufferSize:                leanReadBuffer,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true, // send the names as the user wrote them
		DisablePathNormalizing:        true, // and the path
		StreamResponseBody:            true, // Do returns at the headers: FirstByte
		MaxIdemponentCallAttempts:     2,
		RetryIfErr:                    retryStale,
	}

	r := &fasthttp.Request{}
	r.SetRequestURI(tmpl.URL.String())
	r.URI().DisablePathNormalizing = true
	r.Header.DisableNormalizing()
	r.Header.SetNoDefaultContentType(true)
	r.Header.SetMethod(tmpl.Method)
	for name, values := range tmpl.Header {
		for _, v := range values {
			r.Header.Add(name, v)
		}
	}
	if tmpl.Host != "" {
		r.Header.SetHost(tmpl.Host)
		r.UseHostHeader = true
	}
	if len(body) > 0 {
		r.SetBodyRaw(body)
	}
	l.tmpl = r
	return l
}

// retryStale sends an idempotent request once more when its connection
// was closed before any response byte: a keep-alive connection the server
// had just closed. Any other failure is the measurement.
func retryStale(req *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	stale := errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed)
	return false, stale && attempts == 1 && (req.Header.IsGet() || req.Header.IsHead() || req.Header.IsPut() ||
		req.Header.IsDelete() || req.Header.IsOptions() || req.Header.IsTrace())
}

func (l *lean) dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return l.conns.add(c), nil
}

func (l *lean) close() {
	l.client.CloseIdleConnections()
	l.conns.each(func(c net.Conn) { c.Close() })
}

func (l *lean) do(ctx context.Context, res *tare.Result) {
	if ctx.Err() != nil {
		res.Done = time.Now()
		res.Err = tare.KindCanceled
		return
	}
	l.watch(ctx)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	l.tmpl.CopyTo(req)

	sent := res.Sent
	if sent.IsZero() {
		sent = time.Now()
	}
	deadline := sent.Add(l.timeout)
	var err error
	var refused string // why the redirect the request ended on was not followed
	for {
		if err = l.client.DoDeadline(req, resp, deadline); err != nil {
			break
		}
		res.FirstByte = time.Now()
		res.Status = resp.StatusCode()
		res.BytesOut += int64(len(req.Body()))
		if body := resp.BodyStream(); body != nil {
			res.BytesIn, err = io.Copy(io.Discard, body)
		} else {
			res.BytesIn = int64(len(resp.Body()))
		}
		if cerr := resp.CloseBodyStream(); err == nil {
			err = cerr
		}
		if err != nil {
			break
		}
		next := redirectLocation(req, resp)
		if next == nil {
			break
		}
		ok, kind := l.redirects.follow(res.Redirects, next)
		if !ok {
			refused = kind
			break
		}
		redirectTo(req, resp)
		res.Redirects++
	}
	res.Done = time.Now()
	if errors.Is(err, fasthttp.ErrConnectionClosed) {
		err = readFailure(resp, err)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		res.Err = tare.KindCanceled
	case errors.Is(err, fasthttp.ErrTimeout), err != nil && !res.Done.Before(deadline):
		res.Err = tare.KindTimeout
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		res.Err = tare.KindEOF
	case err != nil:
		res.Err = tare.ErrorKind(err)
	default:
		res.Err = l.redirects.outcome(res.Status, refused)
	}
}

// redirectLocation is where resp, the answer to req, redirects to, as an
// absolute URL; nil when resp is not a redirect to follow (not one of the
// redirect statuses, no Location, or one that does not parse, which
// net/http does not follow either).
func redirectLocation(req *fasthttp.Request, resp *fasthttp.Response) *url.URL {
	if !isRedirect(resp.StatusCode()) {
		return nil
	}
	loc := resp.Header.Peek("Location")
	if len(loc) == 0 {
		return nil
	}
	base, err := url.Parse(string(req.URI().FullURI()))
	if err != nil {
		return nil
	}
	next, err := base.Parse(string(loc))
	if err != nil {
		return nil
	}
	return next
}

// redirectTo turns req into the request resp, a redirect that
// redirectLocation accepted, asks for, as net/http does: 301, 302 and 303
// become a GET without a body (HEAD stays HEAD), 307 and 308 repeat the
// method and body.
func redirectTo(req *fasthttp.Request, resp *fasthttp.Response) {
	loc := resp.Header.Peek("Location")
	switch resp.StatusCode() {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		if !req.Header.IsGet() && !req.Header.IsHead() {
			req.Header.SetMethod(http.MethodGet)
			req.ResetBody()
			req.Header.SetContentLength(0)
			req.Header.Del("Content-Type")
		}
	}
	if u, err := url.Parse(string(loc)); err != nil || u.IsAbs() {
		// The user's Host header named the first server; as net/http does,
		// it goes on only through a relative redirect.
		req.UseHostHeader = false
		req.Header.Del("Host")
	}
	req.URI().UpdateBytes(loc)
}

// watch makes the end of ctx abort the requests in flight: fasthttp takes
// no context, so every connection gets a deadline in the past. An idle one
// is unharmed: each request sets deadlines of its own before using it. The
// engine sends every request of a run with one context, so this registers
// once per run.
func (l *lean) watch(ctx context.Context) {
	if ctx.Done() == nil {
		return
	}
	if w := l.conns.watched.Load(); w != nil && *w == ctx {
		return
	}
	watched := ctx // not &ctx: that would move ctx to the heap on every request
	l.conns.watched.Store(&watched)
	context.AfterFunc(ctx, func() {
		l.conns.each(func(c net.Conn) { c.SetDeadline(past) })
	})
}

// past is a deadline that has passed.
var past = time.Unix(1, 0)

// connSet is every connection the lean client opened and has not closed.
type connSet struct {
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	watched atomic.Pointer[context.Context] // the context whose end aborts requests in flight
}

// aborted reports whether the watched context has ended.
func (s *connSet) aborted() bool {
	w := s.watched.Load()
	return w != nil && (*w).Err() != nil
}

// trackedConn also keeps its last read error: fasthttp reports any failure
// before the first response byte as the server having closed the
// connection, and a reset is a different failure from a close.
type trackedConn struct {
	net.Conn
	raw     *rawio.Conn // nil where raw calls are not available
	set     *connSet
	local   *connAddr
	readErr atomic.Pointer[error]
	// wrote is when the connection last took a request (or was opened),
	// on the monotonic clock (sinceStart): a connection in use holds a
	// request's write for its read.
	wrote time.Duration
	// writeDeadline is the deadline fasthttp set for writes, applied to
	// the connection only when a write does not wait for the read (which
	// has its own): a runtime timer less to move per request.
	writeDeadline, applied time.Time
}

// connAddr is the connection's local address, through which a response
// (Response.LocalAddr) leads back to the connection it was read from.
type connAddr struct {
	net.Addr
	conn *trackedConn
}

func (c *trackedConn) LocalAddr() net.Addr { return c.local }

// SetReadDeadline and SetWriteDeadline keep an aborted request aborted:
// fasthttp sets each request's deadlines as it goes, which would otherwise
// undo the abort of a request between its write and its read.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if c.set.aborted() {
		t = past
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	if c.raw != nil {
		c.writeDeadline = t
		return nil
	}
	if c.set.aborted() {
		t = past
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *trackedConn) Read(p []byte) (n int, err error) {
	if c.raw != nil {
		n, err = c.raw.Read(p)
	} else {
		n, err = c.Conn.Read(p)
	}
	if err != nil && err != io.EOF {
		kept := err // not &err: that would move err to the heap on every read
		c.readErr.Store(&kept)
	}
	return n, err
}

// holdFor is how recently a connection must have taken a request for the
// next one's write to wait for its read. A server that closed an idle
// keep-alive connection left an end of file to read, which a read finds at
// once (a stale connection: the request is sent again on a new one); a
// held write must first draw the server's reset, a round trip, and reads
// end of file then (TestServerClosesIdleConnections). Servers close idle
// connections after seconds; under this, connections are in use.
const holdFor = 100 * time.Millisecond

// started is when this process started timing connections.
var started = time.Now()

// sinceStart is the monotonic clock alone: one clock read per request where
// time.Now makes two (the wall clock too), on the generator's hot path.
func sinceStart() time.Duration { return time.Since(started) }

// holdMax is the most a request's write holds for its read: larger
// requests are written as they come.
const holdMax = 64 << 10

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.raw == nil {
		return c.Conn.Write(p)
	}
	now := sinceStart()
	recent := now-c.wrote < holdFor
	c.wrote = now
	if recent && c.raw.Held()+len(p) <= holdMax {
		c.raw.Hold(p)
		return len(p), nil
	}
	d := c.writeDeadline
	if c.set.aborted() {
		d = past
	}
	if !d.Equal(c.applied) {
		if err := c.Conn.SetWriteDeadline(d); err != nil {
			return 0, err
		}
		c.applied = d
	}
	return c.raw.Write(p)
}

// readFailure is the read error behind err on the connection resp was read
// from, or err when there was none.
func readFailure(resp *fasthttp.Response, err error) error {
	if a, ok := resp.LocalAddr().(*connAddr); ok {
		if e := a.conn.readErr.Load(); e != nil {
			return *e
		}
	}
	return err
}

func (s *connSet) add(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, set: s, wrote: sinceStart()}
	if sc, ok := c.(syscall.Conn); ok {
		tc.raw = rawio.New(sc)
	}
	tc.local = &connAddr{Addr: c.LocalAddr(), conn: tc}
	s.mu.Lock()
	if s.conns == nil {
		s.conns = make(map[*trackedConn]struct{})
	}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	return tc
}

// each calls f for every connection; f must not call back into s.
func (s *connSet) each(f func(net.Conn)) {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c.Conn)
	}
	s.mu.Unlock()
	for _, c := range conns {
		f(c)
	}
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
