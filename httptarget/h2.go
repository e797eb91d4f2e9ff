package httptarget

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tare-dev/tare"
)

// HTTP/2 (Config.HTTP2: h2 over TLS, chosen by ALPN; Config.H2C: in
// cleartext, by prior knowledge) runs on the goroutine engine, on
// connections this file owns instead of net/http's pool. Each is one
// net/http ClientConn, whose streams tare counts, so that
//
//   - MaxStreams caps the streams in flight on every connection, below the
//     server's own limit (SETTINGS_MAX_CONCURRENT_STREAMS, which
//     ClientConn.Reserve keeps);
//   - a new connection opens only when every open one is at its cap, up to
//     the target's connections; while one is being opened, the requests it
//     is expected to carry wait for it rather than open more;
//   - the connection a stream last ended on is taken first (the most
//     recently idle), as the event loop takes its connections;
//   - the protocol each connection negotiated is known and counted, and a
//     connection on which a TLS server chose HTTP/1.1 carries no request:
//     it is closed, and the request fails as tare.KindNoH2;
//   - the connections count in the target's tare.ConnCounter as net/http's
//     do: opened and closed by the transport's dialer, a request on one
//     that carried another counted reused (through the request's trace,
//     which also numbers Result.Conn), and a request that waits at the
//     connection limit (Config.MaxConns: --connections) counted waiting.
//
// Latency is the engine's: from the scheduled time, the wait for a
// stream or a connection included.

// Protocol names, as the summary counts connections: ALPN's identifiers,
// and "h2c" for HTTP/2 in cleartext by prior knowledge.
const (
	ProtoH2    = "h2"
	ProtoH2C   = "h2c"
	ProtoHTTP1 = "http/1.1"
)

// expectedStreams is how many streams a connection being opened is
// expected to take when MaxStreams does not say: the least
// SETTINGS_MAX_CONCURRENT_STREAMS RFC 9113 recommends, and what Go's
// client assumes until the server's SETTINGS arrive.
const expectedStreams = 100

// errNoH2 fails a request whose connection was answered with another
// protocol than h2.
var errNoH2 = errors.New("the server chose another protocol than h2 by ALPN")

// h2pools are the HTTP/2 pools of targets that share a transport (the
// requests of a targets file share their connections): one per server.
type h2pools struct {
	mu    sync.Mutex // guards pools
	pools map[string]*h2pool
}

// pool is the pool of scheme://addr, made on first use.
func (s *h2pools) pool(tr *http.Transport, counter *tare.ConnCounter, scheme, addr string, maxConns, maxStreams int) *h2pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := scheme + "://" + addr
	if p := s.pools[key]; p != nil {
		return p
	}
	if s.pools == nil {
		s.pools = map[string]*h2pool{}
	}
	p := newH2Pool(tr, counter, scheme, addr, maxConns, maxStreams)
	s.pools[key] = p
	return p
}

// each calls f with every pool, in the order of their servers.
func (s *h2pools) each(f func(*h2pool)) {
	s.mu.Lock()
	keys := slices.Sorted(maps.Keys(s.pools))
	pools := make([]*h2pool, len(keys))
	for i, k := range keys {
		pools[i] = s.pools[k]
	}
	s.mu.Unlock()
	for _, p := range pools {
		f(p)
	}
}

// protocols sums every pool's Protocols; nil when there is no pool.
func (s *h2pools) protocols() map[string]int {
	var out map[string]int
	s.each(func(p *h2pool) {
		if out == nil {
			out = map[string]int{}
		}
		for proto, n := range p.Protocols() {
			out[proto] += n
		}
	})
	return out
}

func (s *h2pools) resetProtocols() { s.each((*h2pool).resetProtocols) }
func (s *h2pools) close()          { s.each((*h2pool).close) }

func (s *h2pools) notes() []string {
	var out []string
	s.each(func(p *h2pool) { out = append(out, p.notes()...) })
	return out
}

// h2pool is the HTTP/2 connections to one server; it is the Target's
// http.RoundTripper, redirects to another server going to fallback.
type h2pool struct {
	tr         *http.Transport   // opens connections (NewClientConn): dial, TLS, ALPN, HTTP/2's framing
	fallback   http.RoundTripper // a request to another server: a redirect followed
	counter    *tare.ConnCounter // the target's: connections opened and closed (by the dialer), requests that waited
	scheme     string            // "https" (h2) or "http" (h2c)
	addr       string            // host:port
	maxConns   int
	maxStreams int // per connection; 0: as many as the server allows

	mu        sync.Mutex    // guards the fields below
	conns     []*h2conn     // open: the one a stream last ended on last
	opening   []*opening    // connections being opened
	waiting   int           // requests waiting on changed
	changed   chan struct{} // closed when a stream ends or a connection opens, while requests wait
	protocols map[string]int
	refused   int // connections that spoke another protocol than h2, closed unused
}

// h2conn is one connection of the pool; its fields are guarded by the
// pool's mu.
type h2conn struct {
	cc     *http.ClientConn
	nc     net.Conn // the connection under cc, as dialled (and counted)
	proto  string   // what it speaks: ProtoH2 or ProtoH2C
	active int      // streams tare holds on it, reserved or running
	gone   bool     // going away (a GOAWAY cost a request): no new stream on it
}

// opening is a connection being opened, and how many more of the
// requests waiting for a stream it is expected to carry.
type opening struct{ left int }

// maxAttempts bounds the sends of a request the server never processed
// (each on another connection than the last).
const maxAttempts = 5

func newH2Pool(tr *http.Transport, counter *tare.ConnCounter, scheme, addr string, maxConns, maxStreams int) *h2pool {
	// The pool opens its connections with a transport of their own,
	// without MaxConnsPerHost (the pool caps them): Go 1.26 counts a
	// ClientConn's close against that cap though its open was not, and
	// closing an HTTP/1.1 one (a server that chose http/1.1) panics with
	// "connCount underflow".
	opener := tr.Clone()
	opener.MaxConnsPerHost = 0
	dial := opener.DialContext
	opener.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if slot, ok := ctx.Value(dialedKey{}).(*net.Conn); ok && err == nil {
			*slot = nc
		}
		return nc, err
	}
	return &h2pool{tr: opener, fallback: tr, counter: counter, scheme: scheme, addr: addr, maxConns: maxConns, maxStreams: maxStreams,
		protocols: map[string]int{}}
}

// RoundTrip sends req on a stream of the pool's connections. The stream
// is held until the response's body is closed. A request the server
// never processed (its connection was going away: GOAWAY, a refused
// stream) is sent again on another connection, as net/http's own pool
// does.
func (p *h2pool) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != p.scheme || hostPort(req.URL) != p.addr {
		return p.fallback.RoundTrip(req)
	}
	for attempt := 1; ; attempt++ {
		c, err := p.acquire(req.Context())
		if err != nil {
			if req.Body != nil {
				req.Body.Close() // RoundTripper's contract, on errors too
			}
			return nil, err
		}
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.GotConn != nil && c.nc != nil {
			// What net/http's pool tells of the connection a request is
			// sent on, for the target's counts (reuse, Result.Conn).
			trace.GotConn(httptrace.GotConnInfo{Conn: c.nc})
		}
		resp, err := c.cc.RoundTrip(req)
		if err != nil {
			again := unprocessed(err)
			p.release(c, again)
			if again && attempt < maxAttempts && req.Context().Err() == nil {
				if again, rerr := rewound(req); rerr == nil {
					req = again
					continue
				}
			}
			return nil, err
		}
		resp.Body = &streamBody{ReadCloser: resp.Body, pool: p, conn: c}
		return resp, nil
	}
}

// unprocessed reports whether err says the server never processed the
// request. net/http keeps these errors unexported; their texts are the
// ones its HTTP/2 pool retries on (http2canRetryError).
func unprocessed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "client conn not usable") ||
		strings.Contains(msg, "graceful shutdown GOAWAY") ||
		strings.Contains(msg, "REFUSED_STREAM")
}

// rewound is req with a fresh body, for sending it again; the caller's
// request is not modified (RoundTripper's contract).
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("the body cannot be sent again")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := *req
	r.Body = body
	return &r, nil
}

// streamBody releases its stream when closed.
type streamBody struct {
	io.ReadCloser
	pool *h2pool
	conn *h2conn
	done atomic.Bool
}

func (b *streamBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.pool.release(b.conn, false)
	}
	return err
}

// acquire holds a stream on a connection: the open one a stream last
// ended on with room, a new one when none has room and the cap allows, or
// the first to free up.
func (p *h2pool) acquire(ctx context.Context) (*h2conn, error) {
	p.mu.Lock()
	var joined *opening // the connection being opened this request waits for
	waited := false     // counted as waiting for a connection at the limit
	for {
		if c := p.reserveLocked(); c != nil {
			if joined != nil && slices.Contains(p.opening, joined) {
				joined.left++ // its place there is another's to take
			}
			p.mu.Unlock()
			return c, nil
		}
		switch {
		case joined == nil && p.joinLocked(&joined):
			// A connection on its way will carry this request: wait for
			// it rather than open one more.
		case joined != nil && len(p.opening) > 0:
			// Woken by another connection's opening or a stream's end
			// and found no room: the connection waited for may still
			// be on its way.
		case len(p.conns)+len(p.opening) < p.maxConns:
			return p.openLocked(ctx)
		case !waited:
			// Every connection the cap allows is open and full.
			waited = true
			p.counter.Wait(1)
		}
		if err := p.waitLocked(ctx); err != nil {
			if joined != nil && slices.Contains(p.opening, joined) {
				joined.left++
			}
			p.mu.Unlock()
			return nil, err
		}
	}
}

// reserveLocked reserves a stream on the open connection a stream last
// ended on that has room under both caps, dropping on the way those that
// will never take another (closed, or told to go away).
func (p *h2pool) reserveLocked() *h2conn {
	for i := len(p.conns) - 1; i >= 0; i-- {
		c := p.conns[i]
		if c.gone || p.maxStreams > 0 && c.active >= p.maxStreams {
			continue
		}
		if c.cc.Reserve() == nil {
			c.active++
			return c
		}
		if c.active == 0 && c.cc.InFlight() == 0 {
			p.dropLocked(i)
		}
	}
	return nil
}

// joinLocked takes a place on a connection being opened that is expected
// to carry more requests, and says which in o.
func (p *h2pool) joinLocked(o **opening) bool {
	for _, x := range p.opening {
		if x.left > 0 {
			x.left--
			*o = x
			return true
		}
	}
	return false
}

// dropLocked closes connection i and forgets it.
func (p *h2pool) dropLocked(i int) {
	p.conns[i].cc.Close() // closes the socket; it does not wait for the peer
	p.conns = slices.Delete(p.conns, i, i+1)
	// The counter counts the close: its connection is the dialer's.
}

// openLocked opens a connection for the caller, with one stream held on
// it, and hands the others that waited their turn at it. It is called
// with mu held, and returns with it released.
func (p *h2pool) openLocked(ctx context.Context) (*h2conn, error) {
	share := expectedStreams
	if p.maxStreams > 0 {
		share = p.maxStreams
	}
	o := &opening{left: share - 1}
	p.opening = append(p.opening, o)
	p.mu.Unlock()

	cc, nc, proto, err := p.dial(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.opening = slices.DeleteFunc(p.opening, func(x *opening) bool { return x == o })
	p.signalLocked()
	if err != nil {
		return nil, err
	}
	if proto != "" {
		p.protocols[proto]++
	}
	if proto != ProtoH2 && proto != ProtoH2C {
		cc.Close()
		p.refused++
		return nil, errNoH2
	}
	// The dialer counted the connection opened; RoundTrip tells the
	// request's trace which connection each stream is on.
	if err := cc.Reserve(); err != nil {
		cc.Close()
		return nil, err
	}
	c := &h2conn{cc: cc, nc: nc, proto: proto, active: 1}
	p.conns = append(p.conns, c)
	return c, nil
}

// dial opens one connection and says what it speaks: ALPN's choice over
// TLS ("http/1.1" when the server chose none), "h2c" in cleartext.
func (p *h2pool) dial(ctx context.Context) (*http.ClientConn, net.Conn, string, error) {
	var nc net.Conn
	ctx = context.WithValue(ctx, dialedKey{}, &nc)
	proto := ProtoH2C
	if p.scheme == "https" {
		proto = ""
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
			if err == nil {
				proto = cs.NegotiatedProtocol
				if proto == "" {
					proto = ProtoHTTP1
				}
			}
		}})
	}
	cc, err := p.tr.NewClientConn(ctx, p.scheme, p.addr)
	if err != nil {
		return nil, nil, "", err
	}
	return cc, nc, proto, nil
}

// dialedKey is the context key of where the pool's dialer puts the
// connection it dialled: the one the target's counter counts.
type dialedKey struct{}

// release gives a stream back; its connection becomes the one taken
// first, or is dropped when it will take no more. gone says the stream
// met the connection going away.
func (p *h2pool) release(c *h2conn, gone bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.active--
	c.gone = c.gone || gone
	if i := slices.Index(p.conns, c); i >= 0 {
		if c.active == 0 && (c.gone || c.cc.Available() == 0 && c.cc.InFlight() == 0) {
			p.dropLocked(i)
		} else if last := len(p.conns) - 1; i < last {
			copy(p.conns[i:], p.conns[i+1:])
			p.conns[last] = c
		}
	}
	if p.waiting > 0 {
		p.signalLocked()
	}
}

// waitLocked waits, mu released meanwhile, for a stream to end or a
// connection to open.
func (p *h2pool) waitLocked(ctx context.Context) error {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	ch := p.changed
	p.waiting++
	p.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	p.waiting--
	return err
}

func (p *h2pool) signalLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// Protocols counts the connections by what each spoke: those open at
// the last resetProtocols, and those opened since.
func (p *h2pool) Protocols() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.protocols)
}

// resetProtocols starts the count again from the connections open now,
// for a new window of load on the same target (a sweep's step, a
// protocol's window).
func (p *h2pool) resetProtocols() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.protocols)
	p.refused = 0
	for _, c := range p.conns {
		p.protocols[c.proto]++
	}
}

// notes say what the summary must not leave out: connections on which
// the server would not speak h2.
func (p *h2pool) notes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refused == 0 {
		return nil
	}
	total := 0
	for _, n := range p.protocols {
		total += n
	}
	var other []string
	for _, proto := range slices.Sorted(maps.Keys(p.protocols)) {
		if proto != ProtoH2 {
			other = append(other, fmt.Sprintf("%s %d", proto, p.protocols[proto]))
		}
	}
	return []string{fmt.Sprintf("--http2: %d of the %d connections to %s were answered with another protocol than h2 (%s): tare closed them unused, and their requests failed as %q; the server does not speak HTTP/2 there, or not always",
		p.refused, total, p.addr, strings.Join(other, ", "), tare.KindNoH2)}
}

// close closes every connection; requests in flight on them fail.
func (p *h2pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.conns) - 1; i >= 0; i-- {
		p.dropLocked(i)
	}
}

// h2Preface is what a client of HTTP/2 by prior knowledge sends first:
// the connection preface and an empty SETTINGS frame (RFC 9113, 3.4).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// h2cWait bounds ProbeH2C's wait for the server's first frame.
const h2cWait = 2 * time.Second

// ProbeH2C checks that the server at addr (host:port; through the Unix
// socket unix instead when it is not "") speaks HTTP/2 in cleartext by
// prior knowledge: it sends the connection preface and reads the server's
// first frame, which must be SETTINGS, and closes the connection before
// any request. reached is false when no connection could be made (the
// run will measure that); err says what the server answered instead.
func ProbeH2C(ctx context.Context, addr, unix string) (reached bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, h2cWait)
	defer cancel()
	network := "tcp"
	if unix != "" {
		network, addr = "unix", unix
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return false, nil
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if _, err := conn.Write(h2Preface); err != nil {
		return true, fmt.Errorf("it closed the connection on the HTTP/2 preface: %w", err)
	}
	r := bufio.NewReader(conn)
	head, err := r.Peek(9)
	switch {
	case len(head) >= 5 && bytes.HasPrefix(head, []byte("HTTP/")):
		line, _ := r.ReadString('\n')
		return true, fmt.Errorf("it answered the HTTP/2 preface with HTTP/1: %q", strings.TrimSpace(line))
	case err != nil:
		return true, fmt.Errorf("it sent no HTTP/2 SETTINGS frame in answer to the preface within %s: %w", h2cWait, err)
	case head[3] != 0x4 || head[5]|head[6]|head[7]|head[8] != 0:
		return true, fmt.Errorf("its first frame was not SETTINGS (frame type %d)", head[3])
	}
	return true, nil
}
