package httptarget

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/tare-dev/tare"
)

// DefaultRedirects is how many redirects a request follows at most when
// Config.Redirects is 0: as many as net/http, k6 and vegeta follow.
const DefaultRedirects = 10

// NoRedirects as Config.Redirects follows none: a 3xx is the response, and
// counts as a success like a 2xx, since it is what was asked for.
const NoRedirects = -1

// redirects is when a request goes on to the target of a redirect.
//
// Load that follows a redirect is load on the redirect's target: a server
// that answers 301 to every request serves twice the requests the run
// counts, and a redirect to another host sends the load there. So every hop
// is counted (tare.Result.Redirects), the hops are bounded, and another
// host than the one named is never loaded unless the user asked for it.
type redirects struct {
	limit     int    // hops a request may follow; 0: none
	crossHost bool   // a hop may lead to another host
	origin    string // host:port of the URL named, lower case, the port made explicit
}

func newRedirects(u *url.URL, limit int, crossHost bool) redirects {
	switch limit {
	case 0:
		limit = DefaultRedirects
	case NoRedirects:
		limit = 0
	}
	return redirects{limit: limit, crossHost: crossHost, origin: hostPort(u)}
}

// follow says whether a request that has followed hops redirects goes on
// to next. When it does not, kind is what the result records: "" when the
// 3xx is the response asked for (no redirects are followed at all), else
// why the redirect was refused.
func (p redirects) follow(hops int, next *url.URL) (ok bool, kind string) {
	switch {
	case p.limit == 0:
		return false, ""
	case !p.crossHost && hostPort(next) != p.origin:
		return false, tare.KindCrossHost
	case hops >= p.limit:
		return false, tare.KindRedirectLimit
	}
	return true, ""
}

// outcome is the error kind of a request that ended with status: "" for a
// success. refused is the kind follow gave for the redirect the request
// ended on, "" when it did not end on a refused one.
func (p redirects) outcome(status int, refused string) string {
	switch {
	case status >= 200 && status <= 299:
		return ""
	case status >= 300 && status <= 399 && p.limit == 0:
		return ""
	case refused != "":
		return refused
	}
	return tare.HTTPKind(status)
}

// isRedirect reports whether status is one a client follows.
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// hostPort is u's host and port, the way two URLs name the same server:
// lower case, with the scheme's default port made explicit.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
