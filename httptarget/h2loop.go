package httptarget

import (
	"context"
	"net/http"
	"net/url"
	"slices"
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
		Protocol: t.h2.count, Answered: t.h2Answered}
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

// h2Answered judges an answer the loop read: a redirect to follow is
// handed back as the rest of the request, sent through h2.go's pool (or
// net/http, to another server) from the redirect on, its hops counted;
// any other answer gets its error kind.
func (t *Target) h2Answered(res *tare.Result, location string) func(context.Context, *tare.Result) {
	refused := ""
	if isRedirect(res.Status) && location != "" {
		if next, err := t.tmpl.URL.Parse(location); err == nil {
			var ok bool
			if ok, refused = t.redirects.follow(0, next); ok {
				return t.h2Redirect(res.Status, location, next)
			}
		}
	}
	res.Err = t.redirects.outcome(res.Status, refused)
	return nil
}

// h2Redirect is the rest of a request that status redirected to next, as
// net/http makes it: 301, 302 and 303 become a GET without a body (HEAD
// stays HEAD), 307 and 308 repeat the method and body; the user's Host
// goes on only through a relative redirect.
func (t *Target) h2Redirect(status int, location string, next *url.URL) func(context.Context, *tare.Result) {
	method, body, header := t.tmpl.Method, t.body, t.tmpl.Header.Clone()
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		if method != http.MethodGet && method != http.MethodHead {
			method, body = http.MethodGet, nil
			header.Del("Content-Type")
		}
	}
	host := t.tmpl.Host
	if u, err := url.Parse(location); err != nil || u.IsAbs() {
		host = next.Host
	}
	return func(ctx context.Context, res *tare.Result) {
		t.send(ctx, res, &http.Request{Method: method, URL: next, Header: header, Host: host}, body, 1)
	}
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
	slices.SortStableFunc(f, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
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
