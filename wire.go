package tare

import (
	"context"
	"crypto/tls"
	"time"
)

// Wire is a Target whose requests the load engine's event loop makes
// itself, on TCP connections it owns: the request's bytes out, the
// answer's bytes in, read by a Codec of the target's. The loop runs on a
// thread of its own, outside Go's scheduler and poller, so a request costs
// its system calls and little else. What the loop cannot do (TLS, a proxy)
// stays with Do.
type Wire interface {
	Target
	// Endpoints are where the requests go, one per request the target
	// sends (one, or one per request of a targets file); nil when the
	// target must be served by Do.
	Endpoints() []Endpoint
	// Route is the endpoint, an index of Endpoints, that arrival seq goes
	// to; the loop records it as the result's TargetIndex.
	Route(seq uint64) int
}

// Endpoint is one request a Wire target sends, and the server it goes to.
type Endpoint struct {
	Addr string // host:port, resolved once when the run starts
	// Unix is the path of a Unix-domain socket every connection goes to
	// instead of Addr (curl's --unix-socket); "" for TCP to Addr.
	Unix string
	// MaxConns is how many connections to the endpoint's server (Addr or
	// Unix, shared by the endpoints that name the same one) are open at
	// once at most; further requests wait for one. 0: no limit.
	MaxConns int
	Timeout  time.Duration // one request, from its send to its end, redirects included
	NewCodec func() Codec  // a codec for one request at a time, reused request after request
	// H2 sends the requests as HTTP/2 streams instead, NewCodec unused;
	// nil for HTTP/1.1.
	H2 *H2Request
}

// Codec writes one request at a time and reads its answer, incrementally,
// as the bytes come: the protocol half of the event loop. It moves with its
// request from connection to connection (a stale keep-alive connection, a
// redirect after the server closed).
type Codec interface {
	// Begin starts res's request (Seq, Scheduled and Sent are set).
	Begin(res *Result)
	// Request appends the request to send now to b: the first, or the one
	// a StepResend asked for.
	Request(b []byte) []byte
	// Parse reads p, the next bytes of the answer, and says how many it
	// used and what comes next. It sets FirstByte when the answer's head
	// has come, and Status, BytesIn, BytesOut, Redirects and Err as it
	// learns them; the loop sets Done.
	Parse(p []byte, res *Result) (n int, step Step)
	// End is the connection ending (err nil: an end of file) while res's
	// answer was awaited; reused says the connection had served a request
	// before, so it may have been a stale keep-alive connection. It
	// returns StepDone with res.Err set, or StepResend to send the
	// request again on a new connection.
	End(err error, reused bool, res *Result) Step
	// KeepAlive reports whether the connection may carry another request
	// after the step Parse last returned.
	KeepAlive() bool
	// Handoff is the rest of res's request after StepElsewhere, to be run
	// on a goroutine of its own (a redirect the loop cannot follow: to
	// another server, or to https://). It sets Done.
	Handoff() func(ctx context.Context, res *Result)
}

// Step is what a Codec asks of the loop after reading.
type Step uint8

// The steps.
const (
	StepMore      Step = iota // the answer is not complete: read more
	StepDone                  // the request is over: record res
	StepResend                // send Request again: a redirect to the same server, or a stale connection's retry
	StepElsewhere             // the request goes on through Handoff
)

// H2Request is an Endpoint's request sent as HTTP/2 streams, many at once
// on each connection, by the event loop's own framing (RFC 9113): the
// fields of its HEADERS, its body, and what the loop tells the target.
type H2Request struct {
	// TLS is the configuration of HTTP/2 over TLS, its NextProtos
	// offering "h2"; a connection on which the server chose another
	// protocol by ALPN carries no request (KindNoH2). nil: HTTP/2 in
	// cleartext, by prior knowledge (h2c).
	TLS *tls.Config
	// The request's pseudo-header fields, and the others in order, their
	// names in lower case.
	Method, Scheme, Authority, Path string
	Header                          [][2]string
	Body                            []byte
	// MaxStreams caps the streams in flight on one connection, below
	// the server's own SETTINGS_MAX_CONCURRENT_STREAMS; 0: the server's.
	MaxStreams int
	// Protocol is told what each connection opened spoke: ALPN's choice
	// over TLS ("http/1.1" when the server chose none), "h2c" in
	// cleartext. It is called on the loop's thread: it must not block.
	Protocol func(proto string)
	// Answered is told each complete answer (res.Status, its body
	// counted; location is its Location field, "" when none): it sets
	// res.Err, "" for a success, or returns the rest of the request to
	// run on a goroutine of its own (a redirect to follow), which sets
	// Done. It is called on the loop's thread: it must not block.
	Answered func(res *Result, location string) (rest func(ctx context.Context, res *Result))
}
