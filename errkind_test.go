package tare

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/loopback"
)

// TestErrorKind feeds the classifier real errors, provoked on loopback or
// returned by the standard library, not errors built to match it.
func TestErrorKind(t *testing.T) {
	tests := []struct {
		name    string
		provoke func(t *testing.T) error
		want    string
	}{
		{"nil", func(t *testing.T) error { return nil }, ""},
		{"dial a closed port", func(t *testing.T) error {
			_, err := net.Dial("tcp", loopback.FreeAddr(t))
			return err
		}, "refused"},
		{"read past a deadline", func(t *testing.T) error {
			client, _ := connPair(t)
			client.SetReadDeadline(time.Now())
			_, err := client.Read(make([]byte, 1))
			return err
		}, "timeout"},
		{"read after the peer closed", func(t *testing.T) error {
			client, server := connPair(t)
			server.Close()
			_, err := client.Read(make([]byte, 1))
			return err
		}, "eof"},
		{"read after the peer reset", func(t *testing.T) error {
			client, server := connPair(t)
			server.(*net.TCPConn).SetLinger(0)
			server.Close()
			_, err := client.Read(make([]byte, 1))
			return err
		}, "reset"},
		{"short read", func(t *testing.T) error {
			_, err := io.ReadFull(strings.NewReader("ab"), make([]byte, 4))
			return err
		}, "eof"},
		{"resolver failure", func(t *testing.T) error {
			// A resolver whose every DNS exchange fails: no query leaves.
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
				return nil, errors.New("no DNS in tests")
			}}
			_, err := r.LookupHost(t.Context(), "tare.example.")
			return err
		}, "dns"},
		{"invalid host name", func(t *testing.T) error {
			_, err := net.Dial("tcp", "no..such:80")
			return err
		}, "dns"},
		{"tls to a plain server", func(t *testing.T) error {
			srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
			if err == nil {
				conn.Close()
			}
			return err
		}, "tls"},
		{"https to a plain server", func(t *testing.T) error {
			srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
			return clientGet(t, strings.Replace(srv.URL, "http://", "https://", 1))
		}, "tls"},
		{"untrusted certificate", func(t *testing.T) error {
			srv := newServer(t, true, func(w http.ResponseWriter, r *http.Request) {})
			return clientGet(t, srv.URL)
		}, "tls"},
		{"wrong host name", func(t *testing.T) error {
			srv := newServer(t, true, func(w http.ResponseWriter, r *http.Request) {})
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{
				RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "other.test",
			})
			if err == nil {
				conn.Close()
			}
			return err
		}, "tls"},
		{"canceled request", func(t *testing.T) error {
			srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return clientGetContext(ctx, t, srv.URL)
		}, "canceled"},
		{"request past its deadline", func(t *testing.T) error {
			srv := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
			ctx, cancel := context.WithDeadline(t.Context(), time.Now())
			defer cancel()
			return clientGetContext(ctx, t, srv.URL)
		}, "timeout"},
		{"wrapped deadline", func(t *testing.T) error {
			return fmt.Errorf("send: %w", context.DeadlineExceeded)
		}, "timeout"},
		{"unsupported scheme", func(t *testing.T) error {
			return clientGet(t, "ftp://127.0.0.1/")
		}, "other"},
		{"anything else", func(t *testing.T) error { return errors.New("boom") }, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.provoke(t)
			if got := ErrorKind(err); got != tt.want {
				t.Errorf("ErrorKind(%v) = %q, want %q", err, got, tt.want)
			}
		})
	}
}

// connPair returns both ends of a loopback TCP connection, closed at the
// end of the test.
func connPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}

func clientGet(t *testing.T, url string) error {
	return clientGetContext(t.Context(), t, url)
}

// clientGetContext sends a GET with a client of its own, so no idle
// connection outlives the test.
func clientGetContext(ctx context.Context, t *testing.T, url string) error {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// newServer starts a loopback server closed at the end of the test, quiet
// about the TLS handshakes the tests break on purpose.
func newServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}
