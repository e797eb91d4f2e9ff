package tlsclient

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testpki"
)

// tlsServer serves TLS on loopback with cert; clientCAs, when not nil,
// requires a client certificate they signed; h2 offers HTTP/2 by ALPN.
func tlsServer(t *testing.T, cert *testpki.Leaf, clientCAs *testpki.CA, h2 bool, maxVersion uint16) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.EnableHTTP2 = h2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, MaxVersion: maxVersion}
	if clientCAs != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clientCAs.Pool()
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestProbe: one handshake, before any request, says what the load's
// connections would meet, in words that name the flag and the file to
// change; a server that cannot be reached is left for the run.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	ca, otherCA := testpki.NewCA(t, "test CA"), testpki.NewCA(t, "other CA")
	caFile, otherFile := testpki.Write(t, dir, "ca.pem", ca.PEM), testpki.Write(t, dir, "other-ca.pem", otherCA.PEM)
	client, stranger := ca.Client(t, "tare"), otherCA.Client(t, "stranger")
	clientCert, clientKey := testpki.Write(t, dir, "client.pem", client.CertPEM), testpki.Write(t, dir, "client.key", client.KeyPEM)
	strangerCert, strangerKey := testpki.Write(t, dir, "stranger.pem", stranger.CertPEM), testpki.Write(t, dir, "stranger.key", stranger.KeyPEM)

	plain := tlsServer(t, ca.Server(t), nil, false, 0)
	h2 := tlsServer(t, ca.Server(t), nil, true, 0)
	named := tlsServer(t, ca.Server(t, "api.tare.test"), nil, false, 0)
	expired := tlsServer(t, ca.Issue(t, testpki.Options{CommonName: "old", Names: []string{"127.0.0.1"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), nil, false, 0)
	mtls := tlsServer(t, ca.Server(t), ca, false, 0)
	mtls12 := tlsServer(t, ca.Server(t), ca, false, tls.VersionTLS12)
	cleartext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer cleartext.Close()
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	alpn := []string{"h2", "http/1.1"}

	tests := []struct {
		name    string
		s       Settings
		addr    string
		alpn    []string
		reached bool
		proto   string
		want    []string // in the error; nil: none
	}{
		{"trusted, http/1.1", Settings{CACert: caFile}, plain, alpn, true, "http/1.1", nil},
		{"trusted, h2", Settings{CACert: caFile}, h2, alpn, true, "h2", nil},
		{"no alpn offered", Settings{CACert: caFile}, h2, nil, true, "", nil},
		{"the wrong CA", Settings{CACert: otherFile}, plain, nil, false, "", []string{"the server at " + plain, "no CA of --cacert", "other-ca.pem", `issued by "test CA"`}},
		{"the system's CAs", Settings{}, plain, nil, false, "", []string{"signed by an authority this system does not trust", "--cacert FILE"}},
		{"another name", Settings{CACert: caFile}, named, nil, false, "", []string{"a certificate for api.tare.test", `not "127.0.0.1"`, "--servername"}},
		{"servername", Settings{CACert: caFile, ServerName: "api.tare.test"}, named, nil, true, "", nil},
		{"expired server", Settings{CACert: caFile}, expired, nil, false, "", []string{"expired or not yet valid"}},
		{"insecure", Settings{Insecure: true}, expired, nil, true, "", nil},
		{"mtls", Settings{CACert: caFile, Cert: clientCert, Key: clientKey}, mtls, nil, true, "", nil},
		{"mtls without a certificate", Settings{CACert: caFile}, mtls, nil, false, "", []string{"may ask for a client certificate", "--cert FILE --key FILE"}},
		{"mtls, a stranger", Settings{CACert: caFile, Cert: strangerCert, Key: strangerKey}, mtls, nil, false, "", []string{"refused the client certificate of --cert", "stranger.pem"}},
		{"mtls over TLS 1.2, a stranger", Settings{CACert: caFile, Cert: strangerCert, Key: strangerKey}, mtls12, nil, false, "", []string{"refused the client certificate of --cert", "stranger.pem"}},
		{"not TLS", Settings{CACert: caFile}, strings.TrimPrefix(cleartext.URL, "http://"), nil, false, "", []string{"does not speak TLS", "http://"}},
		{"nothing listens", Settings{CACert: caFile}, closed, nil, false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.s.Config(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			hs, err := tt.s.Probe(context.Background(), cfg, tt.addr, "", tt.alpn)
			if tt.want == nil {
				if err != nil || hs.Reached != tt.reached || hs.Protocol != tt.proto {
					t.Fatalf("probe %+v, %v; want reached %v, protocol %q", hs, err, tt.reached, tt.proto)
				}
				return
			}
			if err == nil {
				t.Fatalf("probe %+v; want an error saying %q", hs, tt.want)
			}
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("code %q: %v", tare.ErrorCode(err), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}
