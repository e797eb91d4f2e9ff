package httptarget

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// The kinds a failed request is recorded as in tare.Result.Err, besides
// "http <status>".
const (
	kindTimeout  = "timeout"  // no answer in time: a deadline or an I/O timeout
	kindRefused  = "refused"  // nothing listening: connection refused
	kindReset    = "reset"    // the peer reset the connection (RST, broken pipe)
	kindDNS      = "dns"      // the host name did not resolve
	kindTLS      = "tls"      // handshake or certificate failure
	kindEOF      = "eof"      // the server closed the connection mid-exchange
	kindCanceled = "canceled" // the caller stopped waiting
	kindOther    = "other"
)

// classify names the kind of a transport error, or "" for nil. The order
// matters: a DNS lookup that timed out is a DNS problem, and a handshake
// that hit a deadline is a timeout before it is a TLS failure.
func classify(err error) string {
	var (
		dnsErr     *net.DNSError
		netErr     net.Error
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
		return kindDNS
	case errors.Is(err, context.Canceled):
		return kindCanceled
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE):
		return kindReset
	case errors.Is(err, http.ErrSchemeMismatch), // https:// to a plain HTTP server
		errors.As(err, &recordErr),
		errors.As(err, &alertErr),
		errors.As(err, &verifyErr),
		errors.As(err, &authErr),
		errors.As(err, &hostErr),
		errors.As(err, &invalidErr),
		hasPrefix(err, "tls: ", "x509: "): // crypto/tls returns many untyped errors
		return kindTLS
	case errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		// The transport's untyped error for a reused connection the server
		// closed while the request was being written.
		hasPrefix(err, "http: server closed idle connection"):
		return kindEOF
	}
	return kindOther
}

// hasPrefix reports whether the innermost error of err's chain starts with
// one of the prefixes; outer layers such as *url.Error prepend their own text.
func hasPrefix(err error, prefixes ...string) bool {
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
