package load

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2/hpack"
	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/rawio"
)

// HTTP/2 on the event loop (an Endpoint with H2): a connection carries
// many streams at once. A request takes a stream on the open connection
// of its server that a stream last ended on and has room (under the
// server's SETTINGS_MAX_CONCURRENT_STREAMS and the endpoint's
// MaxStreams), else a place on a connection being opened that is
// expected to carry it, else a new connection while the server has fewer
// than its limit, else it waits (counted waiting) for a stream to end.
//
// Frames are not written as they are made: each connection gathers the
// frames of a pass of the loop (the HEADERS of every arrival due, the
// WINDOW_UPDATEs and acks of what was read) and h2Flush writes them in
// one write (one TLS record) before the loop waits again.
//
// A connection is opened on a goroutine (net's dialer, then TLS's
// handshake, whose state machine cannot wait in the loop); the loop takes
// a duplicate of its descriptor once it is ready, and from then on TLS
// runs on the loop's own bytes (tlsPipe). A request a server never
// processed (a stream above a GOAWAY's last, a REFUSED_STREAM) is sent
// again on another connection, up to h2Attempts, as net/http does.

const (
	// h2Window is the receive window tare gives each stream and the
	// connection: large, so that the server seldom waits for a
	// WINDOW_UPDATE, and given back when half of it is used.
	h2Window = 4 << 20
	// h2Expected is how many streams a connection is expected to take
	// before its server's SETTINGS say (RFC 9113's least recommended
	// limit, and what Go's client assumes).
	h2Expected = 100
	// h2Attempts bounds the sends of a request the server never processed.
	h2Attempts = 5
)

// Protocol names, as H2Request.Protocol is told them: ALPN's, and "h2c"
// for HTTP/2 in cleartext by prior knowledge (httptarget's names).
const (
	protoH2    = "h2"
	protoH2C   = "h2c"
	protoHTTP1 = "http/1.1"
)

// errNoH2 fails the requests of a connection on which the server chose
// another protocol than h2 by ALPN.
var errNoH2 = errors.New("the server chose another protocol than h2 by ALPN")

// h2engine is an engine's HTTP/2 state.
type h2engine struct {
	dirty []*conn // connections with frames to write at h2Flush
	plain []byte  // deciphered bytes, read from TLS

	mu     sync.Mutex // guards opened and closed: the dialing goroutines hand their connections over
	opened []h2dialed
	closed bool // the engine is over: a connection opened now is closed
}

// shut stops the engine taking connections: those still being opened
// are closed when they are.
func (h *h2engine) shut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, d := range h.opened {
		if d.err == nil {
			closeFD(d.fd)
		}
	}
	h.opened = nil
}

// h2stream is a request's HTTP/2 stream.
type h2stream struct {
	stream   uint32
	sendWin  int64  // the stream's send window
	rest     []byte // of the body, not yet sent: the windows were full
	recvUsed int64  // bytes received since the stream's last WINDOW_UPDATE
	location string // the answer's Location, for Answered
	attempts int    // streams opened for the request
}

// h2endpoint is an endpoint's HTTP/2 request, prepared once.
type h2endpoint struct {
	*tare.H2Request
	block []byte // the HEADERS' header block, the same for every stream
}

// h2conn is the HTTP/2 state of a connection.
type h2conn struct {
	ep   *h2endpoint
	tls  *tls.Conn // nil for h2c
	pipe *tlsPipe  // under tls: the loop's bytes

	streams  map[uint32]*request
	pending  []*request // waiting for the connection to open
	nextID   uint32
	maxPeer  int        // the server's SETTINGS_MAX_CONCURRENT_STREAMS, h2Expected until said
	sendWin  int64      // the connection's send window
	initWin  int64      // the server's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame int        // the server's SETTINGS_MAX_FRAME_SIZE
	recvUsed int64      // connection bytes received since the last WINDOW_UPDATE
	blocked  []*request // streams whose body waits for a window

	dec       *hpack.Decoder
	status    int    // the :status decoded last
	location  string // and the Location of a 3xx
	headersOn uint32 // the stream whose header block CONTINUATION frames go on; 0 none
	block     []byte // a header block being gathered across frames

	in       []byte // a frame's start, waiting for the rest
	plain    []byte // frames made this pass, not yet written (before TLS)
	dirty    bool   // in engine.h2.dirty
	watchOut bool   // the socket is watched for room to write: a write left bytes
	gone     bool   // GOAWAY came: no new stream on it
}

// h2dialed is a connection a dialing goroutine has opened, or failed to.
type h2dialed struct {
	c     *conn
	fd    int
	tls   *tls.Conn
	pipe  *tlsPipe
	proto string
	err   error
}

// newH2Endpoint prepares ep's request.
func newH2Endpoint(r *tare.H2Request) *h2endpoint {
	if r == nil {
		return nil
	}
	return &h2endpoint{H2Request: r, block: headerBlock(r.Method, r.Scheme, r.Authority, r.Path, r.Header, len(r.Body))}
}

// cap is how many streams c may carry at once.
func (h *h2endpoint) cap(c *h2conn) int {
	if h.MaxStreams > 0 {
		return min(h.MaxStreams, c.maxPeer)
	}
	return c.maxPeer
}

// expected is how many requests a connection being opened may carry.
func (h *h2endpoint) expected() int {
	if h.MaxStreams > 0 {
		return h.MaxStreams
	}
	return h2Expected
}

// h2assign gives req a stream, a place on a connection being opened, a
// new connection, or a place in its server's queue.
func (e *engine) h2assign(req *request) {
	if !e.h2place(req) {
		e.waited++
		p := req.ep.pool
		p.waiting = append(p.waiting, req)
	}
}

// h2place is h2assign but for the wait: false when req found no room.
func (e *engine) h2place(req *request) bool {
	p, h := req.ep.pool, req.ep.h2
	for i := len(p.h2) - 1; i >= 0; i-- {
		c := p.h2[i]
		if !c.connecting && !c.h2.gone && len(c.h2.streams) < h.cap(c.h2) {
			e.h2start(c, req)
			return true
		}
	}
	for _, c := range p.h2 {
		if c.connecting && len(c.h2.pending) < h.expected() {
			c.h2.pending = append(c.h2.pending, req)
			req.conn = c
			return true
		}
	}
	if p.open < p.max || p.max <= 0 {
		e.h2connect(p, req)
		return true
	}
	return false
}

// h2connect opens a connection for req on a goroutine; the loop takes it
// in h2opened.
func (e *engine) h2connect(p *pool, req *request) {
	c := &conn{fd: -1, pool: p, idleAt: -1, connecting: true,
		h2: &h2conn{ep: req.ep.h2, streams: map[uint32]*request{}, pending: []*request{req}}}
	req.conn = c
	p.open++
	p.h2 = append(p.h2, c)
	ep := req.ep
	ctx, cancel := context.WithTimeout(e.r.reqCtx, ep.Timeout)
	go func() {
		defer cancel()
		d := dialH2(ctx, ep.Endpoint)
		d.c = c
		e.h2.mu.Lock()
		defer e.h2.mu.Unlock()
		if e.h2.closed {
			if d.err == nil {
				closeFD(d.fd)
			}
			return
		}
		e.h2.opened = append(e.h2.opened, d)
		e.wake()
	}()
}

// dialH2 connects to ep's server and, over TLS, makes the handshake, on
// the calling goroutine; the descriptor it returns is a duplicate, the
// loop's to own.
func dialH2(ctx context.Context, ep tare.Endpoint) h2dialed {
	network, addr := "tcp", ep.Addr
	if ep.Unix != "" {
		network, addr = "unix", ep.Unix
	}
	nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return h2dialed{err: err}
	}
	defer nc.Close()
	d := h2dialed{proto: protoH2C}
	if cfg := ep.H2.TLS; cfg != nil {
		d.pipe = &tlsPipe{Conn: nc}
		d.tls = tls.Client(d.pipe, cfg)
		if err := d.tls.HandshakeContext(ctx); err != nil {
			return h2dialed{err: err}
		}
		d.proto = d.tls.ConnectionState().NegotiatedProtocol
		if d.proto == "" {
			d.proto = protoHTTP1
		}
		d.pipe.Conn = nil // from now on the loop's bytes
	}
	if network == "tcp" {
		nc.(*net.TCPConn).SetNoDelay(true)
	}
	raw, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return h2dialed{err: err}
	}
	d.fd = -1
	raw.Control(func(fd uintptr) {
		d.fd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if err != nil {
		return h2dialed{err: os.NewSyscallError("fcntl", err)}
	}
	if err := unix.SetNonblock(d.fd, true); err != nil {
		closeFD(d.fd)
		return h2dialed{err: os.NewSyscallError("fcntl", err)}
	}
	return d
}

// h2take takes the connections the dialing goroutines have opened.
func (e *engine) h2take() {
	e.h2.mu.Lock()
	opened := e.h2.opened
	e.h2.opened = nil
	e.h2.mu.Unlock()
	for _, d := range opened {
		e.h2ready(d)
	}
}

// h2ready starts the HTTP/2 connection d opened, or fails the requests
// waiting for it.
func (e *engine) h2ready(d h2dialed) {
	c := d.c
	c.connecting = false
	if d.err == nil && c.h2.ep.Protocol != nil {
		c.h2.ep.Protocol(d.proto)
	}
	if d.err == nil && d.proto != protoH2 && d.proto != protoH2C {
		closeFD(d.fd)
		d.err = errNoH2
	}
	if d.err == nil {
		c.fd = d.fd
		for c.fd >= len(e.conns) {
			e.conns = append(e.conns, nil)
		}
		e.conns[c.fd] = c
		if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}); err != nil {
			d.err = os.NewSyscallError("epoll_ctl", err)
			e.forget(c)
		}
	}
	pending := c.h2.pending
	c.h2.pending = nil
	if d.err != nil {
		kind := tare.ErrorKind(d.err)
		if d.err == errNoH2 {
			kind = tare.KindNoH2
		}
		e.h2drop(c)
		now := time.Now()
		for _, req := range pending {
			req.conn = nil
			req.res.Err = kind
			e.finish(req, now)
		}
		e.h2serve(c.pool) // the requests waiting may open another
		return
	}
	h := c.h2
	h.tls, h.pipe = d.tls, d.pipe
	h.nextID, h.maxPeer, h.sendWin, h.initWin, h.maxFrame = 1, h2Expected, defaultWindow, defaultWindow, defaultMaxFrame
	h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		switch {
		case f.Name == ":status":
			h.status, _ = strconv.Atoi(f.Value)
		case f.Name == "location" && h.status >= 300 && h.status < 400:
			h.location = f.Value
		}
	})
	c.id = e.counter.Open()
	h.plain = append(h.plain, h2Preface...)
	h.plain = appendSettings(h.plain, settingEnablePush, 0, settingInitialWindowSize, h2Window)
	h.plain = appendWindowUpdate(h.plain, 0, h2Window-defaultWindow)
	e.h2mark(c)
	for _, req := range pending {
		req.conn = nil
		e.h2start(c, req)
	}
}

// h2start opens a stream on c for req: HEADERS, and the body as far as
// the windows allow.
func (e *engine) h2start(c *conn, req *request) {
	h := c.h2
	id := h.nextID
	h.nextID += 2
	h.streams[id] = req
	req.conn, req.stream = c, id
	req.res.Conn = c.id
	if c.served > 0 || len(h.streams) > 1 {
		e.reused++
	}
	req.attempts++
	body := req.ep.h2.Body
	h.plain = appendHeaders(h.plain, id, req.ep.h2.block, len(body) == 0, h.maxFrame)
	req.sendWin = h.initWin
	req.rest = body
	if len(body) > 0 {
		e.h2body(c, req)
	}
	e.h2mark(c)
}

// h2body sends what the windows allow of req's body.
func (e *engine) h2body(c *conn, req *request) {
	h := c.h2
	n := int(min(int64(len(req.rest)), h.sendWin, req.sendWin))
	if n > 0 || len(req.rest) == 0 {
		h.plain = appendData(h.plain, req.stream, req.rest[:n], n == len(req.rest), h.maxFrame)
		h.sendWin -= int64(n)
		req.sendWin -= int64(n)
		req.res.BytesOut += int64(n)
		req.rest = req.rest[n:]
		e.h2mark(c)
	}
	if len(req.rest) > 0 && !slices.Contains(h.blocked, req) {
		h.blocked = append(h.blocked, req)
	}
}

// h2mark has c's frames written at the next h2Flush.
func (e *engine) h2mark(c *conn) {
	if !c.h2.dirty {
		c.h2.dirty = true
		e.h2.dirty = append(e.h2.dirty, c)
	}
}

// h2Flush writes each connection's frames of this pass, in one write each.
func (e *engine) h2Flush() {
	// h2close may add connections while this runs: they are written too.
	for i := 0; i < len(e.h2.dirty); i++ {
		c := e.h2.dirty[i]
		h := c.h2
		h.dirty = false
		if c.fd < 0 || len(h.plain) == 0 {
			h.plain = h.plain[:0]
			continue
		}
		// While the socket is full, the frames wait behind what it has
		// not taken, for EPOLLOUT.
		waiting := len(c.out) > 0
		if h.tls != nil {
			h.tls.Write(h.plain) // into the pipe: it cannot fail
			c.out = append(c.out, h.pipe.out...)
			h.pipe.out = h.pipe.out[:0]
		} else {
			c.out = append(c.out, h.plain...)
		}
		h.plain = h.plain[:0]
		if !waiting {
			e.h2write(c)
		}
	}
	e.h2.dirty = e.h2.dirty[:0]
}

// h2write writes what c has to send, watching for room when the socket
// takes only part of it.
func (e *engine) h2write(c *conn) {
	n, err := rawio.Write(c.fd, c.out)
	if n > 0 {
		c.out = c.out[:copy(c.out, c.out[n:])]
	}
	switch {
	case err != nil && err != unix.EAGAIN:
		e.h2end(c, err)
	case len(c.out) > 0 && !c.h2.watchOut:
		c.h2.watchOut = true
		e.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLOUT)
	case len(c.out) == 0 && c.h2.watchOut:
		c.h2.watchOut = false
		e.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
}

// h2events handles the events of an HTTP/2 connection.
func (e *engine) h2events(c *conn, events uint32) {
	if events&unix.EPOLLOUT != 0 && len(c.out) > 0 {
		e.h2write(c)
		if c.fd < 0 {
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
		return
	}
	for c.fd >= 0 {
		n, err := rawio.Read(c.fd, e.rbuf)
		switch {
		case err == unix.EAGAIN:
			return
		case err != nil:
			e.h2end(c, err)
			return
		case n == 0:
			e.h2end(c, nil)
			return
		}
		if err := e.h2input(c, e.rbuf[:n]); err != nil {
			e.h2end(c, err)
			return
		}
		if n < len(e.rbuf) {
			return
		}
	}
}

// h2input takes bytes read from c: deciphered first over TLS.
func (e *engine) h2input(c *conn, p []byte) error {
	h := c.h2
	if h.tls == nil {
		return e.h2frames(c, p)
	}
	if e.h2.plain == nil {
		e.h2.plain = make([]byte, readBuffer)
	}
	h.pipe.in = append(h.pipe.in, p...)
	for c.fd >= 0 {
		n, err := h.tls.Read(e.h2.plain)
		if n > 0 {
			if err := e.h2frames(c, e.h2.plain[:n]); err != nil {
				return err
			}
		}
		if err != nil {
			if err == errPipeEmpty {
				break
			}
			return err
		}
	}
	if len(h.pipe.out) > 0 { // TLS's own answer (a key update)
		c.out = append(c.out, h.pipe.out...)
		h.pipe.out = h.pipe.out[:0]
		e.h2write(c)
	}
	return nil
}

// h2frames reads the frames in p, the bytes after those read before.
func (e *engine) h2frames(c *conn, p []byte) error {
	h := c.h2
	if len(h.in) > 0 {
		h.in = append(h.in, p...)
		p = h.in
	}
	for c.fd >= 0 && len(p) >= frameHeaderLen {
		fh := parseFrameHeader(p)
		if len(p) < frameHeaderLen+fh.length {
			break
		}
		if err := e.h2frame(c, fh, p[frameHeaderLen:frameHeaderLen+fh.length]); err != nil {
			return err
		}
		p = p[frameHeaderLen+fh.length:]
	}
	if c.fd < 0 {
		return nil
	}
	// What is left is a frame's start: kept, at the buffer's start.
	h.in = append(h.in[:0], p...)
	return nil
}

// errH2Protocol is a server that broke HTTP/2's framing.
var errH2Protocol = errors.New("http2: the server broke the protocol")

// h2frame handles one frame on c.
func (e *engine) h2frame(c *conn, fh frameHeader, p []byte) error {
	h := c.h2
	if h.headersOn != 0 && (fh.typ != frameContinuation || fh.stream != h.headersOn) {
		return errH2Protocol
	}
	switch fh.typ {
	case frameData:
		h.recvUsed += int64(fh.length)
		if h.recvUsed >= h2Window/2 {
			h.plain = appendWindowUpdate(h.plain, 0, uint32(h.recvUsed))
			h.recvUsed = 0
			e.h2mark(c)
		}
		req := h.streams[fh.stream]
		if req == nil {
			return nil // a stream tare ended (a timeout): its data only counts against the window
		}
		data, ok := framePayload(fh, p)
		if !ok {
			return errH2Protocol
		}
		req.res.BytesIn += int64(len(data))
		req.recvUsed += int64(fh.length)
		if fh.flags&flagEndStream != 0 {
			e.h2done(c, req, "")
		} else if req.recvUsed >= h2Window/2 {
			h.plain = appendWindowUpdate(h.plain, fh.stream, uint32(req.recvUsed))
			req.recvUsed = 0
			e.h2mark(c)
		}
	case frameHeaders, frameContinuation:
		block := p
		if fh.typ == frameHeaders {
			var ok bool
			if block, ok = framePayload(fh, p); !ok {
				return errH2Protocol
			}
			if fh.flags&flagPriority != 0 {
				if len(block) < 5 {
					return errH2Protocol
				}
				block = block[5:]
			}
			h.status, h.location = 0, ""
		}
		if fh.flags&flagEndHeaders == 0 {
			if fh.typ == frameHeaders {
				h.headersOn = fh.stream
				h.block = append(h.block[:0], block...)
				h.block = append(h.block, byte(fh.flags&flagEndStream)) // the HEADERS' END_STREAM, kept for the last frame
				return nil
			}
			end := h.block[len(h.block)-1]
			h.block = append(append(h.block[:len(h.block)-1], block...), end)
			return nil
		}
		endStream := fh.flags&flagEndStream != 0
		if fh.typ == frameContinuation {
			endStream = h.block[len(h.block)-1] != 0
			block = append(h.block[:len(h.block)-1], block...)
			h.headersOn = 0
		}
		// Decoded even for a stream tare ended: the table is the connection's.
		if _, err := h.dec.Write(block); err != nil {
			return err
		}
		if err := h.dec.Close(); err != nil {
			return err
		}
		req := h.streams[fh.stream]
		if req == nil {
			return nil
		}
		if h.status >= 100 && h.status < 200 {
			return nil // an interim answer: the final one follows
		}
		if req.res.FirstByte.IsZero() {
			req.res.FirstByte = time.Now()
			req.res.Status = h.status
			req.location = h.location
		}
		if endStream {
			e.h2done(c, req, "")
		}
	case frameRSTStream:
		if len(p) != 4 {
			return errH2Protocol
		}
		req := h.streams[fh.stream]
		if req == nil {
			return nil
		}
		if binary.BigEndian.Uint32(p) == errCodeRefusedStream {
			e.h2retry(c, req)
			return nil
		}
		e.h2done(c, req, tare.KindOther)
	case frameSettings:
		if fh.flags&flagAck != 0 {
			return nil
		}
		if len(p)%6 != 0 {
			return errH2Protocol
		}
		for ; len(p) > 0; p = p[6:] {
			v := binary.BigEndian.Uint32(p[2:6])
			switch binary.BigEndian.Uint16(p) {
			case settingMaxConcurrentStreams:
				h.maxPeer = int(min(v, 1<<20))
			case settingInitialWindowSize:
				if v > maxWindow {
					return errH2Protocol
				}
				delta := int64(v) - h.initWin
				h.initWin = int64(v)
				for _, req := range h.streams {
					req.sendWin += delta
				}
			case settingMaxFrameSize:
				if v < defaultMaxFrame || v > 1<<24-1 {
					return errH2Protocol
				}
				h.maxFrame = int(v)
			}
		}
		h.plain = appendFrameHeader(h.plain, 0, frameSettings, flagAck, 0)
		e.h2mark(c)
		e.h2unblock(c)
		e.h2serve(c.pool) // a larger limit may take requests waiting
	case framePing:
		if fh.flags&flagAck == 0 {
			if len(p) != 8 {
				return errH2Protocol
			}
			h.plain = appendFrameHeader(h.plain, 8, framePing, flagAck, 0)
			h.plain = append(h.plain, p...)
			e.h2mark(c)
		}
	case frameGoAway:
		if len(p) < 8 {
			return errH2Protocol
		}
		last := binary.BigEndian.Uint32(p) & (1<<31 - 1)
		h.gone = true
		for id, req := range h.streams {
			if id > last {
				e.h2retry(c, req) // never processed: another connection's
			}
		}
		if len(h.streams) == 0 {
			e.h2close(c)
		}
	case frameWindowUpdate:
		if len(p) != 4 {
			return errH2Protocol
		}
		n := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
		if fh.stream == 0 {
			h.sendWin += n
		} else if req := h.streams[fh.stream]; req != nil {
			req.sendWin += n
		}
		e.h2unblock(c)
	case framePushPromise:
		return errH2Protocol // tare said SETTINGS_ENABLE_PUSH 0
	}
	return nil
}

// h2unblock sends the bodies that waited for a window.
func (e *engine) h2unblock(c *conn) {
	h := c.h2
	blocked := h.blocked
	h.blocked = nil
	for _, req := range blocked {
		if req.conn == c && len(req.rest) > 0 {
			e.h2body(c, req)
		}
	}
}

// h2forget takes req's stream off c.
func (e *engine) h2forget(c *conn, req *request) {
	delete(c.h2.streams, req.stream)
	if i := slices.Index(c.h2.blocked, req); i >= 0 {
		c.h2.blocked = slices.Delete(c.h2.blocked, i, i+1)
	}
	req.conn, req.stream, req.rest = nil, 0, nil
	c.served++
	p := c.pool
	// The connection a stream last ended on is taken first.
	if i := slices.Index(p.h2, c); i >= 0 && i < len(p.h2)-1 {
		copy(p.h2[i:], p.h2[i+1:])
		p.h2[len(p.h2)-1] = c
	}
}

// h2done ends req's stream: its answer is complete (kind ""), or it
// failed with kind.
func (e *engine) h2done(c *conn, req *request, kind string) {
	e.h2forget(c, req)
	var rest func(context.Context, *tare.Result)
	switch {
	case kind != "":
		req.res.Err = kind
	case req.ep.h2.Answered != nil:
		rest = req.ep.h2.Answered(&req.res, req.location)
	}
	if rest != nil {
		res := req.res
		e.unlink(req)
		e.recycle(req)
		e.r.handoff(rest, res)
	} else {
		e.finish(req, time.Now())
	}
	e.h2after(c)
}

// h2retry sends req again on another connection, the server having
// never processed it, or fails it after h2Attempts.
func (e *engine) h2retry(c *conn, req *request) {
	e.h2forget(c, req)
	if req.attempts >= h2Attempts {
		req.res.Err = tare.KindOther
		e.finish(req, time.Now())
	} else {
		req.res.BytesOut = 0
		e.h2assign(req)
	}
	e.h2after(c)
}

// h2after is c with a stream less: closed when it will carry no more,
// else its room given to a request waiting.
func (e *engine) h2after(c *conn) {
	if c.h2.gone && len(c.h2.streams) == 0 {
		e.h2close(c)
		return
	}
	e.h2serve(c.pool)
}

// h2serve starts the requests waiting for room on p's connections.
func (e *engine) h2serve(p *pool) {
	for len(p.waiting) > 0 && e.h2place(p.waiting[0]) {
		p.waiting = p.waiting[:copy(p.waiting, p.waiting[1:])]
	}
}

// h2cancel ends req's stream on c before its answer (a timeout, a
// cancel), or its wait for c to open.
func (e *engine) h2cancel(c *conn, req *request) {
	if c.connecting {
		if i := slices.Index(c.h2.pending, req); i >= 0 {
			c.h2.pending = slices.Delete(c.h2.pending, i, i+1)
		}
		req.conn = nil
		return
	}
	c.h2.plain = appendRSTStream(c.h2.plain, req.stream, errCodeCancel)
	e.h2mark(c)
	e.h2forget(c, req)
	if c.h2.gone && len(c.h2.streams) == 0 {
		e.h2close(c)
	}
}

// h2end is c ending (err nil: an end of file): its streams fail.
func (e *engine) h2end(c *conn, err error) {
	kind := tare.ErrorKind(err)
	if err == nil {
		kind = tare.KindEOF
	}
	now := time.Now()
	streams := c.h2.streams
	c.h2.streams = map[uint32]*request{}
	e.h2close(c)
	for _, req := range streams {
		req.conn, req.stream, req.rest = nil, 0, nil
		req.res.Err = kind
		e.finish(req, now)
	}
}

// h2close closes c, which carries no stream.
func (e *engine) h2close(c *conn) {
	p := c.pool
	if i := slices.Index(p.h2, c); i >= 0 {
		p.h2 = slices.Delete(p.h2, i, i+1)
	} else {
		return // closed already
	}
	if c.fd >= 0 && len(c.out) == 0 && len(c.h2.plain) > 0 {
		// Its last frames (a RST_STREAM) go if the socket takes them now.
		e.h2Flush1(c)
	}
	e.forget(c)
	if c.id != 0 {
		e.counter.Close(false)
		c.id = 0
	}
	p.open--
	e.h2serve(p)
}

// h2Flush1 writes c's frames now, what the socket takes.
func (e *engine) h2Flush1(c *conn) {
	h := c.h2
	out := h.plain
	if h.tls != nil {
		h.tls.Write(h.plain)
		out = h.pipe.out
	}
	rawio.Write(c.fd, out)
	h.plain = h.plain[:0]
}

// h2drop forgets c, which failed to open.
func (e *engine) h2drop(c *conn) {
	p := c.pool
	if i := slices.Index(p.h2, c); i >= 0 {
		p.h2 = slices.Delete(p.h2, i, i+1)
		p.open--
	}
}

// tlsPipe is the connection under a tls.Conn: the dialled one for the
// handshake (Conn), then the loop's bytes: what it read from the socket
// (in) and what TLS wrote for it to send (out).
type tlsPipe struct {
	net.Conn
	in  []byte
	off int // of in, taken by TLS
	out []byte
}

// errPipeEmpty says TLS has read all the loop gave it; temporary, so
// tls.Conn reads again later rather than keeping the error.
var errPipeEmpty error = pipeEmpty{}

type pipeEmpty struct{}

func (pipeEmpty) Error() string   { return "tare: no more bytes read yet" }
func (pipeEmpty) Timeout() bool   { return true }
func (pipeEmpty) Temporary() bool { return true }

func (p *tlsPipe) Read(b []byte) (int, error) {
	if p.Conn != nil {
		return p.Conn.Read(b)
	}
	if p.off == len(p.in) {
		p.in, p.off = p.in[:0], 0
		return 0, errPipeEmpty
	}
	n := copy(b, p.in[p.off:])
	p.off += n
	return n, nil
}

func (p *tlsPipe) Write(b []byte) (int, error) {
	if p.Conn != nil {
		return p.Conn.Write(b)
	}
	p.out = append(p.out, b...)
	return len(b), nil
}

func (p *tlsPipe) Close() error {
	if p.Conn != nil {
		return p.Conn.Close()
	}
	return nil
}

func (p *tlsPipe) SetDeadline(t time.Time) error {
	if p.Conn != nil {
		return p.Conn.SetDeadline(t)
	}
	return nil
}

func (p *tlsPipe) SetReadDeadline(t time.Time) error {
	if p.Conn != nil {
		return p.Conn.SetReadDeadline(t)
	}
	return nil
}

func (p *tlsPipe) SetWriteDeadline(t time.Time) error {
	if p.Conn != nil {
		return p.Conn.SetWriteDeadline(t)
	}
	return nil
}
