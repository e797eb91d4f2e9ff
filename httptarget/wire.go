package httptarget

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/tare-dev/tare"
)

// Plain http:// without a proxy is served by load's event loop (tare.Wire):
// the request is rendered once, written as it is, and the answer parsed
// as it comes by a codec below, on connections the loop owns. net/http
// serves the rest (https://, a proxy, --net-http) and the redirects the
// loop cannot follow (to another server, to https://), handed off to it.

var (
	_ tare.Wire = (*Target)(nil)
	_ tare.Wire = (*Mix)(nil)
)

// Endpoints is the one request t sends, for load's event loop; nil when
// t goes through net/http.
func (t *Target) Endpoints() []tare.Endpoint {
	if t.h2loop {
		return []tare.Endpoint{t.h2Endpoint()}
	}
	if t.wire == nil {
		return nil
	}
	return []tare.Endpoint{{Addr: hostPort(t.tmpl.URL), Unix: t.unix, MaxConns: t.maxConns, Timeout: t.timeout,
		NewCodec: func() tare.Codec { return &codec{t: t} }}}
}

// Route is 0: t sends one request.
func (t *Target) Route(uint64) int { return 0 }

// Endpoints is one per request of the file, when every one of them can be
// served by load's event loop; else nil, and all go through Do.
func (m *Mix) Endpoints() []tare.Endpoint {
	eps := make([]tare.Endpoint, 0, len(m.targets))
	for _, t := range m.targets {
		ep := t.Endpoints()
		if ep == nil {
			return nil
		}
		eps = append(eps, ep[0])
	}
	return eps
}

// Route is the request arrival seq takes.
func (m *Mix) Route(seq uint64) int { return m.Pick(seq) }

// maxHead bounds a response's head (status line and headers): a server
// sending more is broken, and the request fails as "other".
const maxHead = 1 << 20

// wireRequest is a Target's request, rendered once for every connection.
type wireRequest struct {
	bytes      []byte
	bodyLen    int64
	idempotent bool
	head       bool // a HEAD request: its answers have no body
}

func newWireRequest(tmpl *http.Request, body []byte) *wireRequest {
	return &wireRequest{
		bytes:      renderRequest(nil, tmpl.Method, tmpl.URL.RequestURI(), hostOf(tmpl), tmpl.Header, body),
		bodyLen:    int64(len(body)),
		idempotent: idempotent(tmpl.Method),
		head:       tmpl.Method == http.MethodHead,
	}
}

// hostOf is the Host header tmpl is sent with.
func hostOf(tmpl *http.Request) string {
	if tmpl.Host != "" {
		return tmpl.Host
	}
	return tmpl.URL.Host
}

// renderRequest appends an HTTP/1.1 request to b: the request line, Host,
// the header (names as the user wrote them, in order of name), a
// Content-Length when there is a body or the method expects one, and the
// body.
func renderRequest(b []byte, method, uri, host string, header http.Header, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	names := make([]string, 0, len(header))
	for name := range header {
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range header[name] {
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// idempotent says whether a request may be sent again when its keep-alive
// connection turned out to be closed, as net/http decides.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// The states of an answer's parse.
const (
	inHead       = iota // the status line and headers
	inBody              // a body of known length: left to go
	inChunkSize         // a chunk's size line
	inChunk             // a chunk's data: left to go
	inChunkEnd          // the CRLF after a chunk's data
	inTrailer           // the trailer, to its blank line
	inUntilClose        // a body that ends with the connection
)

// codec is one request at a time of one Target, and its answer.
type codec struct {
	t   *Target
	res *tare.Result

	// The request being made: t.wire's, or a redirect's rendered in own.
	redirected bool
	own        []byte
	method     string
	url        *url.URL // where the request went; nil: t.tmpl.URL
	body       []byte
	useHost    bool // the user's Host header is sent
	retried    bool // sent again once on a new connection already
	next       *url.URL

	// The answer.
	state   int
	got     bool // a byte of the answer has come
	head    []byte
	status  int
	left    int64
	keep    bool
	line    []byte // a chunk size line or trailer line so far
	bytesIn int64
}

func (c *codec) Begin(res *tare.Result) {
	*c = codec{t: c.t, res: res, own: c.own[:0], head: c.head[:0], line: c.line[:0], useHost: c.t.tmpl.Host != ""}
}

func (c *codec) Request(b []byte) []byte {
	c.state, c.got, c.keep, c.bytesIn = inHead, false, false, 0
	c.head, c.line = c.head[:0], c.line[:0]
	if !c.redirected {
		c.res.BytesOut += c.t.wire.bodyLen
		return append(b, c.t.wire.bytes...)
	}
	c.res.BytesOut += int64(len(c.body))
	return append(b, c.own...)
}

func (c *codec) KeepAlive() bool { return c.keep }

func (c *codec) Parse(p []byte, res *tare.Result) (int, tare.Step) {
	c.got = true
	switch c.state {
	case inHead:
		return c.parseHead(p, res)
	case inBody:
		n := min(int64(len(p)), c.left)
		c.left -= n
		c.bytesIn += n
		res.BytesIn = c.bytesIn
		if c.left == 0 {
			return int(n), c.answered(res)
		}
		return int(n), tare.StepMore
	case inUntilClose:
		c.bytesIn += int64(len(p))
		res.BytesIn = c.bytesIn
		return len(p), tare.StepMore
	case inChunk:
		n := min(int64(len(p)), c.left)
		c.left -= n
		c.bytesIn += n
		res.BytesIn = c.bytesIn
		if c.left == 0 {
			c.state = inChunkEnd
		}
		return int(n), tare.StepMore
	}
	// The chunk size line, the CRLF after a chunk, the trailer: lines.
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		c.line = append(c.line, p...)
		if len(c.line) > maxHead {
			return len(p), c.fail(res, tare.KindOther)
		}
		return len(p), tare.StepMore
	}
	c.line = append(c.line, p[:i]...)
	line := bytes.TrimRight(c.line, "\r")
	c.line = c.line[:0]
	switch c.state {
	case inChunkSize:
		size, ok := parseChunkSize(line)
		switch {
		case !ok:
			return i + 1, c.fail(res, tare.KindOther)
		case size == 0:
			c.state = inTrailer
		default:
			c.state, c.left = inChunk, size
		}
	case inChunkEnd:
		if len(line) != 0 {
			return i + 1, c.fail(res, tare.KindOther)
		}
		c.state = inChunkSize
	case inTrailer:
		if len(line) == 0 {
			return i + 1, c.answered(res)
		}
	}
	return i + 1, tare.StepMore
}

// parseChunkSize reads a chunk size line's hexadecimal size, extensions
// ignored.
func parseChunkSize(line []byte) (int64, bool) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || len(line) > 15 {
		return 0, false
	}
	var n int64
	for _, b := range line {
		var d byte
		switch {
		case b >= '0' && b <= '9':
			d = b - '0'
		case b >= 'a' && b <= 'f':
			d = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			d = b - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

var endOfHead = []byte("\r\n\r\n")

// parseHead finds the end of the answer's head in what came so far and p,
// and reads it.
func (c *codec) parseHead(p []byte, res *tare.Result) (int, tare.Step) {
	var head []byte
	used := 0
	if len(c.head) == 0 {
		if i := bytes.Index(p, endOfHead); i >= 0 {
			head, used = p[:i+4], i+4
		}
	}
	if head == nil {
		old := len(c.head)
		c.head = append(c.head, p...)
		from := max(old-3, 0)
		i := bytes.Index(c.head[from:], endOfHead)
		if i < 0 {
			if len(c.head) > maxHead {
				return len(p), c.fail(res, tare.KindOther)
			}
			return len(p), tare.StepMore
		}
		end := from + i + 4
		head, used = c.head[:end], end-old
	}
	h, ok := readHead(head)
	if !ok {
		c.head = c.head[:0]
		return used, c.fail(res, tare.KindOther)
	}
	if h.status >= 100 && h.status <= 199 && h.status != http.StatusSwitchingProtocols {
		c.head = c.head[:0]
		return used, tare.StepMore // 100 Continue and the like: the answer follows
	}
	res.FirstByte = time.Now()
	res.Status = h.status
	res.BytesIn, c.bytesIn = 0, 0
	c.status, c.keep = h.status, h.keepAlive
	c.next = nil
	if isRedirect(h.status) && len(h.location) > 0 {
		c.next = c.redirectURL(h.location)
	}
	c.head = c.head[:0] // after the last use of h, which it may hold
	switch {
	case c.isHead() || h.status == http.StatusNoContent || h.status == http.StatusNotModified:
		return used, c.answered(res)
	case h.chunked:
		c.state = inChunkSize
	case h.length >= 0:
		if h.length == 0 {
			return used, c.answered(res)
		}
		c.state, c.left = inBody, h.length
	default:
		c.state, c.keep = inUntilClose, false
	}
	return used, tare.StepMore
}

func (c *codec) isHead() bool {
	if c.redirected {
		return c.method == http.MethodHead
	}
	return c.t.wire.head
}

// fail ends the request with kind, the connection with it.
func (c *codec) fail(res *tare.Result, kind string) tare.Step {
	res.Err, c.keep = kind, false
	return tare.StepDone
}

// answered is an answer read to its end: the request's end, or a redirect
// to follow.
func (c *codec) answered(res *tare.Result) tare.Step {
	refused := ""
	if next := c.next; next != nil {
		ok, kind := c.t.redirects.follow(res.Redirects, next)
		if ok {
			res.Redirects++
			c.redirect(next)
			if next.Scheme == "http" && hostPort(next) == c.t.redirects.origin {
				return tare.StepResend
			}
			return tare.StepElsewhere
		}
		refused = kind
	}
	res.Err = c.t.redirects.outcome(c.status, refused)
	return tare.StepDone
}

// redirectURL is where location leads from the URL the request went to;
// nil when it does not parse (net/http does not follow it either).
func (c *codec) redirectURL(location []byte) *url.URL {
	base := c.url
	if base == nil {
		base = c.t.tmpl.URL
	}
	next, err := base.Parse(string(location))
	if err != nil {
		return nil
	}
	if u, err := url.Parse(string(location)); err != nil || u.IsAbs() {
		// The user's Host header named the first server; as net/http
		// does, it goes on only through a relative redirect.
		c.useHost = false
	}
	return next
}

// redirect makes the request the redirect to next asks for, as net/http
// does: 301, 302 and 303 become a GET without a body (HEAD stays HEAD),
// 307 and 308 repeat the method and body.
func (c *codec) redirect(next *url.URL) {
	if !c.redirected {
		c.redirected, c.method, c.body = true, c.t.tmpl.Method, c.t.body
	}
	header := c.t.tmpl.Header
	switch c.status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		if c.method != http.MethodGet && c.method != http.MethodHead {
			c.method, c.body = http.MethodGet, nil
			header = header.Clone()
			header.Del("Content-Type")
		}
	}
	c.url = next
	host := next.Host
	if c.useHost {
		host = c.t.tmpl.Host
	}
	c.own = renderRequest(c.own[:0], c.method, next.RequestURI(), host, header, c.body)
}

// Handoff is the rest of a request redirected where the loop does not go:
// through net/http, from the redirect, with the hops so far counted.
func (c *codec) Handoff() func(ctx context.Context, res *tare.Result) {
	t, method, next, body := c.t, c.method, c.url, c.body
	return func(ctx context.Context, res *tare.Result) {
		req := &http.Request{Method: method, URL: next, Header: t.tmpl.Header.Clone(), Host: next.Host}
		if len(body) == 0 {
			req.Header.Del("Content-Type")
		}
		t.send(ctx, res, req, body, res.Redirects)
	}
}

func (c *codec) End(err error, reused bool, res *tare.Result) tare.Step {
	c.keep = false
	if err == nil && c.state == inUntilClose {
		return c.answered(res)
	}
	stale := err == nil || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	if stale && !c.got && reused && !c.retried && c.idempotent() {
		// A keep-alive connection the server closed as it was taken.
		c.retried = true
		c.res.BytesOut -= c.sentBody()
		return tare.StepResend
	}
	if err == nil {
		err = io.EOF
	}
	if errors.Is(err, io.EOF) {
		res.Err = tare.KindEOF
	} else {
		res.Err = tare.ErrorKind(err)
	}
	return tare.StepDone
}

func (c *codec) idempotent() bool {
	if c.redirected {
		return idempotent(c.method)
	}
	return c.t.wire.idempotent
}

// sentBody is the body the request last sent carried.
func (c *codec) sentBody() int64 {
	if c.redirected {
		return int64(len(c.body))
	}
	return c.t.wire.bodyLen
}

// head is what the loop needs of an answer's head.
type head struct {
	status    int
	length    int64 // -1: none given
	chunked   bool
	keepAlive bool
	location  []byte
}

// readHead reads a response head, "HTTP/1.1 200 OK\r\n" and header lines
// to the blank line; false when it is not one.
func readHead(b []byte) (head, bool) {
	h := head{length: -1}
	line, rest, _ := bytes.Cut(b, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return h, false
	}
	minor := line[7]
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return h, false
		}
		h.status = h.status*10 + int(d-'0')
	}
	if len(line) > 12 && line[12] != ' ' {
		return h, false
	}
	h.keepAlive = minor == '1'
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return h, false
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || h.length >= 0 && n != h.length {
				return h, false
			}
			h.length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			h.chunked = bytes.EqualFold(lastToken(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case bytes.EqualFold(tok, []byte("close")):
					h.keepAlive = false
				case bytes.EqualFold(tok, []byte("keep-alive")) && minor == '0':
					h.keepAlive = true
				}
			}
		case bytes.EqualFold(name, []byte("Location")):
			h.location = value
		}
	}
	if h.chunked {
		h.length = -1 // chunked wins over a length (RFC 9112, 6.3)
	}
	return h, true
}

// lastToken is the last of a comma-separated list.
func lastToken(v []byte) []byte {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return bytes.TrimSpace(v)
}
