package httptarget

import (
	"strings"

	"github.com/tare-dev/tare"
)

// With Config.H2Loop, HTTP/2 (h2 and h2c) is served by load's event loop
// rather than by the pool of h2.go: the request is rendered once as
// HTTP/2's fields (tare.H2Request), and the loop frames it on connections
// of its own. The pool still counts what those connections spoke and
// says so in the notes.

// h2Endpoint is t's request for load's event loop over HTTP/2.
func (t *Target) h2Endpoint() tare.Endpoint {
	u := t.tmpl.URL
	authority := t.tmpl.Host
	if authority == "" {
		authority = u.Host
	}
	var fields [][2]string
	for name, values := range t.tmpl.Header {
		name = strings.ToLower(name)
		if hopByHop(name) {
			continue
		}
		for _, v := range values {
			fields = append(fields, [2]string{name, v})
		}
	}
	r := &tare.H2Request{Method: t.tmpl.Method, Scheme: u.Scheme, Authority: authority, Path: u.RequestURI(),
		Header: sortedFields(fields), Body: t.body, MaxStreams: t.h2.maxStreams,
		Protocol: t.h2.count, Outcome: func(status int) string { return t.redirects.outcome(status, "") }}
	if u.Scheme == "https" {
		cfg := t.transport.TLSClientConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		// h2 and http/1.1, as the pool offers them: a server without h2
		// says so by choosing http/1.1 (refused) rather than by failing
		// the handshake.
		cfg.NextProtos = []string{ProtoH2, ProtoHTTP1}
		r.TLS = cfg
	}
	return tare.Endpoint{Addr: hostPort(u), Unix: t.unix, MaxConns: t.maxConns, Timeout: t.timeout, H2: r}
}

// hopByHop reports whether HTTP/2 forbids the header field name
// (RFC 9113, 8.2.2): it is connection-specific.
func hopByHop(name string) bool {
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host":
		return true
	}
	return false
}

// sortedFields orders the fields by name, so that every run sends the
// same bytes.
func sortedFields(f [][2]string) [][2]string {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j][0] < f[j-1][0]; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
	return f
}

// count counts a connection the event loop opened, by what it spoke.
func (p *h2pool) count(proto string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.protocols[proto]++
	if proto != ProtoH2 && proto != ProtoH2C {
		p.refused++
	}
}

