package tare

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The kinds a failed request is recorded as in Result.Err. Every target
// uses the same words, so stats and reports group failures alike whatever
// was loaded.
const (
	KindTimeout     = "timeout"     // no answer in time: a deadline or an I/O timeout
	KindCanceled    = "canceled"    // the caller stopped waiting: the run is stopping
	KindRefused     = "refused"     // nothing listening: connection refused
	KindReset       = "reset"       // the peer reset the connection (RST, broken pipe)
	KindDNS         = "dns"         // the host name did not resolve
	KindTLS         = "tls"         // handshake or certificate failure
	KindEOF         = "eof"         // the server closed the connection mid-exchange
	KindUnreachable = "unreachable" // no route to the host or network
	KindConnect     = "connect"     // any other failure to connect
	KindOther       = "other"       // any other transport failure
	KindNoH2        = "no h2"       // HTTP/2 was asked for (--http2) and the server chose another protocol by ALPN: the request was not sent

	// A redirect that was not followed: the 3xx is the response recorded.
	KindRedirectLimit = "redirect limit"      // more redirects in a row than allowed (--redirects)
	KindCrossHost     = "cross-host redirect" // to another host than the one named (--redirects-cross-host allows it)
)

// HTTPKind is the kind of a response with a non-2xx status: "http 503".
func HTTPKind(status int) string { return httpKindPrefix + strconv.Itoa(status) }

// IsHTTPKind reports whether kind is that of a response with a non-2xx
// status (HTTPKind's): the target answered.
func IsHTTPKind(kind string) bool { return strings.HasPrefix(kind, httpKindPrefix) }

const httpKindPrefix = "http "

// ErrorKind names the kind of a transport error, or "" for nil. The order
// matters: a DNS lookup that timed out is a DNS problem, and a handshake
// that hit a deadline is a timeout before it is a TLS failure.
func ErrorKind(err error) string {
	var (
		dnsErr     *net.DNSError
		netErr     net.Error
		opErr      *net.OpError
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		verifyErr  *tls.CertificateVerificationError
		authErr    x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &dnsErr):
		return KindDNS
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE):
		return KindReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return KindUnreachable
	case errors.Is(err, http.ErrSchemeMismatch), // https:// to a plain HTTP server
		errors.As(err, &recordErr),
		errors.As(err, &alertErr),
		errors.As(err, &verifyErr),
		errors.As(err, &authErr),
		errors.As(err, &hostErr),
		errors.As(err, &invalidErr),
		innermostHasPrefix(err, "tls: ", "x509: "): // crypto/tls returns many untyped errors
		return KindTLS
	case errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		// The transport's untyped error for a reused connection the server
		// closed while the request was being written.
		innermostHasPrefix(err, "http: server closed idle connection"):
		return KindEOF
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return KindConnect
	}
	return KindOther
}

// innermostHasPrefix reports whether the innermost error of err's chain
// starts with one of the prefixes; outer layers such as *url.Error prepend
// their own text.
func innermostHasPrefix(err error, prefixes ...string) bool {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	msg := err.Error()
	for _, p := range prefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// ByCount returns the keys of a tally (Summary.ErrorKinds, StatusCodes),
// the largest count first and ties by name, so every report and verdict
// lists them in the same order.
func ByCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	return keys
}
