package tlsclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// ProbeTimeout bounds a probe: the connection, the handshake and the wait
// for a refusal of the client certificate after it.
const ProbeTimeout = 5 * time.Second

// alertWait is how long a probe reads after the handshake: under TLS 1.3
// the server checks the client certificate after the client has finished
// its handshake, and its refusal comes as an alert on the first read. A
// server that sends nothing (HTTP/1.1 waits for the request) is fine.
const alertWait = 300 * time.Millisecond

// Handshake is what a probe met.
type Handshake struct {
	// Reached is false when no TLS connection could be made for a reason
	// the load would measure (refused, unreachable, a timeout): the probe
	// then says nothing, and the run records those failures as it goes.
	Reached bool
	// Protocol is what the server chose by ALPN among those offered:
	// "h2", "http/1.1", or "" when it chose none (a server without ALPN
	// speaks HTTP/1.1).
	Protocol string
}

// Probe makes one TLS connection to addr (host:port; through the Unix
// socket unix instead when it is not "", addr then naming the server) as
// the load's connections will, with cfg and alpn offered, and closes it
// before any request. A certificate the client would reject, or a client
// certificate the server rejects, is a *tare.Error (EINVALID) naming the
// server, the flags and files of s, and what would be right.
func (s Settings) Probe(ctx context.Context, cfg *tls.Config, addr, unix string, alpn []string) (Handshake, error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return Handshake{}, tare.Errorf(tare.EINVALID, "address %q: want host:port", addr)
	}
	network, dial := "tcp", addr
	if unix != "" {
		network, dial = "unix", unix
	}
	raw, err := (&net.Dialer{}).DialContext(ctx, network, dial)
	if err != nil {
		return Handshake{}, nil
	}
	defer raw.Close()
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName = host // as net/http does
	}
	c.NextProtos = alpn
	// Whether the server asked for a client certificate: only then may a
	// refusal follow the handshake.
	asked := false
	certs := c.Certificates
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked = true
		if len(certs) > 0 {
			return &certs[0], nil
		}
		return &tls.Certificate{}, nil // none: the server decides
	}
	conn := tls.Client(raw, c)
	if err := conn.HandshakeContext(ctx); err != nil {
		return s.explain(err, addr, c.ServerName)
	}
	state := conn.ConnectionState()
	if asked && state.Version >= tls.VersionTLS13 {
		conn.SetReadDeadline(time.Now().Add(alertWait))
		var b [1]byte
		if _, err := conn.Read(b[:]); isRemote(err) {
			return s.explain(err, addr, c.ServerName)
		}
	}
	return Handshake{Reached: true, Protocol: state.NegotiatedProtocol}, nil
}

// isRemote reports whether err is an alert the peer sent.
func isRemote(err error) bool {
	var op *net.OpError
	var alert tls.AlertError
	return errors.As(err, &op) && op.Op == "remote error" || errors.As(err, &alert)
}

// explain turns a failed handshake into what the user must change: a
// verification failure or a refused client certificate is an error; any
// other failure (a reset, a timeout) is left for the run to measure.
func (s Settings) explain(err error, addr, serverName string) (Handshake, error) {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		roots    x509.SystemRootsError
	)
	server := "the server at " + addr
	switch {
	case errors.As(err, &roots):
		return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s needs its certificate checked, and this system has no CA bundle (%v): give the CA's certificate with %s FILE, or install the system's CAs (Debian's ca-certificates)", server, roots.Err, tare.Setting("cacert"))
	case errors.As(err, &unknown):
		issued := ""
		if c := unknown.Cert; c != nil {
			issued = fmt.Sprintf(" (%s, issued by %q)", name(c), c.Issuer.CommonName)
		}
		if s.CACert != "" {
			return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s sent a certificate%s that no CA of %s %q signed: give the CA that signed it with %s FILE", server, issued, tare.Setting("cacert"), s.CACert, tare.Setting("cacert"))
		}
		return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s sent a certificate%s signed by an authority this system does not trust: give that CA's certificate with %s FILE (or %s to skip the check)", server, issued, tare.Setting("cacert"), tare.Setting("insecure"))
	case errors.As(err, &hostname):
		names := "no name"
		if c := hostname.Certificate; c != nil {
			names = strings.Join(append(append([]string{}, c.DNSNames...), ipStrings(c.IPAddresses)...), ", ")
			if names == "" {
				names = c.Subject.CommonName + " (a common name only, which Go does not accept: the certificate needs a DNS name)"
			}
		}
		return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s sent a certificate for %s, not %q: give %s with the name it was issued for", server, names, serverName, tare.Setting("servername"))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s sent a certificate that is expired or not yet valid (%s): the server must renew it; %s skips the check", server, invalid.Detail, tare.Setting("insecure"))
	case errors.As(err, &invalid), errors.As(err, &verify):
		return Handshake{}, tare.Errorf(tare.EINVALID, "%s sent a certificate that does not verify: %v", server, err)
	case errors.As(err, &record):
		return Handshake{}, tare.Errorf(tare.EINVALID, "%s does not speak TLS (its first bytes were not a TLS handshake): is the URL http://?", server)
	case isRemote(err):
		alert := strings.TrimPrefix(innermost(err), "tls: ")
		if s.Cert == "" && (strings.Contains(alert, "certificate required") || strings.Contains(alert, "bad certificate") || strings.Contains(alert, "handshake failure")) {
			return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s refused the handshake (%s): it may ask for a client certificate; give one with %s FILE %s FILE", server, alert, tare.Setting("cert"), tare.Setting("key"))
		}
		if s.Cert != "" && strings.Contains(alert, "certificate") {
			return Handshake{}, tare.SettingErrorf(tare.EINVALID, "", "%s refused the client certificate of %s %q (%s): give one signed by a CA the server trusts", server, tare.Setting("cert"), s.Cert, alert)
		}
		if strings.Contains(alert, "no application protocol") {
			return Handshake{}, tare.Errorf(tare.EINVALID, "%s speaks none of the protocols offered (%s)", server, alert)
		}
		return Handshake{}, tare.Errorf(tare.EINVALID, "%s refused the handshake: %s", server, alert)
	}
	return Handshake{}, nil
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// innermost is the message of the innermost error of err's chain.
func innermost(err error) string {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}
