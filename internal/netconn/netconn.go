// Package netconn is what tare's net/http clients (the HTTP target and the
// model client) share about their connections: a dialer that goes to a
// Unix socket when the user named one (curl's --unix-socket), and counts
// each connection in a tare.ConnCounter, and the per-request trace that
// says which connection a request was sent on and whether it was reused.
package netconn

import (
	"context"
	"crypto/tls"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"

	"github.com/tare-dev/tare"
)

// Dialer returns a net/http DialContext: through d to the address asked,
// or to socket when it is not "" (whatever the URL's host, which then only
// names the Host header and TLS's server name), each connection counted
// in c until it is closed.
func Dialer(d *net.Dialer, socket string, c *tare.ConnCounter) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if socket != "" {
			network, addr = "unix", socket
		}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: nc, id: c.Open(), counter: c}, nil
	}
}

// conn is a connection counted open until it is closed, or said it
// would be.
type conn struct {
	net.Conn
	id      uint64
	counter *tare.ConnCounter
	once    sync.Once
	used    atomic.Bool // a request was sent on it
}

func (c *conn) Close() error {
	c.closed()
	return c.Conn.Close()
}

// closed counts c closed, once.
func (c *conn) closed() { c.once.Do(func() { c.counter.Close(false) }) }

// Request is one request's view of the connection net/http sends it on.
type Request struct {
	ID   uint64 // the connection's number (tare.Result.Conn); 0 until it has one
	conn *conn
}

// Trace returns ctx with a trace that sets r.ID to the number of the
// connection net/http sends the request on (the last one, after a retry
// or a redirect), and counts in c the requests sent on a connection that
// had carried one before. (net/http's own GotConnInfo.Reused also says so
// of a connection dialled for one request and first used by another.)
func (r *Request) Trace(ctx context.Context, c *tare.ConnCounter) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		nc := info.Conn
		if tc, ok := nc.(*tls.Conn); ok {
			nc = tc.NetConn()
		}
		k, ok := nc.(*conn)
		if !ok {
			return // not dialled by Dialer: not counted
		}
		r.ID, r.conn = k.id, k
		if k.used.Swap(true) {
			c.Reuse(1)
		}
	}})
}

// Closing counts the request's connection closed now, when its answer said
// the server closes it (Connection: close), which net/http does on a
// goroutine of its own a moment later: a run that ends on that answer
// counts it.
func (r *Request) Closing() {
	if r.conn != nil {
		r.conn.closed()
	}
}
