package main

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/scenario"
	"github.com/tare-dev/tare/internal/testkit/testpki"
	"github.com/tare-dev/tare/modelsim"
)

// pki is a test's CA, its certificates and their files.
type pki struct {
	dir                   string
	ca, other             *testpki.CA
	caFile, otherFile     string
	certFile, keyFile     string // a client certificate the CA signed
	otherKey              string // another certificate's key
	expiredCert, expKey   string // a client certificate that expired yesterday
	strangerCert, strKey  string // a client certificate another CA signed
	notPEM                string
	serverCert, serverKey string // for 127.0.0.1, localhost and h2.tare.test
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{dir: dir, ca: testpki.NewCA(t, "tare test CA"), other: testpki.NewCA(t, "another CA")}
	w := func(name string, data []byte) string { return testpki.Write(t, dir, name, data) }
	p.caFile, p.otherFile = w("ca.pem", p.ca.PEM), w("other-ca.pem", p.other.PEM)
	client := p.ca.Client(t, "tare")
	p.certFile, p.keyFile = w("client.pem", client.CertPEM), w("client.key", client.KeyPEM)
	p.otherKey = w("other.key", p.ca.Client(t, "someone else").KeyPEM)
	expired := p.ca.Issue(t, testpki.Options{CommonName: "tare last year", Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	p.expiredCert, p.expKey = w("expired.pem", expired.CertPEM), w("expired.key", expired.KeyPEM)
	stranger := p.other.Client(t, "stranger")
	p.strangerCert, p.strKey = w("stranger.pem", stranger.CertPEM), w("stranger.key", stranger.KeyPEM)
	p.notPEM = w("ca.der", p.ca.Cert.Raw)
	server := p.ca.Issue(t, testpki.Options{CommonName: "server", Names: []string{"127.0.0.1", "localhost", "h2.tare.test"}})
	p.serverCert, p.serverKey = w("server.pem", server.CertPEM), w("server.key", server.KeyPEM)
	return p
}

// protoServer is a loopback server that counts the requests by protocol
// and ALPN: tlsOn serves TLS with the pki's server certificate (HTTP/2
// offered when h2), else cleartext (HTTP/2 by prior knowledge when h2);
// clientCAs, when set, requires a client certificate.
func protoServer(t *testing.T, p *pki, tlsOn, h2, clientCerts bool) (*httptest.Server, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PRI" {
			// The HTTP/2 preface of --h2c's probe, which Go's HTTP/1.1
			// server hands to the handler (for h2c upgrades by
			// hijacking): no request of the load's.
			return
		}
		key := r.Proto
		if r.TLS != nil {
			key += " alpn=" + r.TLS.NegotiatedProtocol
		}
		mu.Lock()
		seen[key]++
		mu.Unlock()
		w.Write([]byte("ok\n"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests fail on purpose
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
		if err != nil {
			t.Fatal(err)
		}
		srv.EnableHTTP2 = h2
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		if clientCerts {
			srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, p.ca.Pool()
		}
		srv.StartTLS()
	} else {
		protos := new(http.Protocols)
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(h2)
		srv.Config.Protocols = protos
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

func summaryOf(t *testing.T, stdout string) tare.Summary {
	t.Helper()
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary json: %v\n%s", err, stdout)
	}
	return s
}

// TestRunHTTP2: --http2 loads a Go net/http server over h2, chosen by
// ALPN and checked on both ends; --h2c loads one in cleartext by prior
// knowledge; without either, https:// is HTTP/1.1. The summary counts
// the connections by protocol, in JSON and in text.
func TestRunHTTP2(t *testing.T) {
	p := newPKI(t)
	tests := []struct {
		name      string
		tlsOn, h2 bool
		flags     []string
		seen      string         // what the server saw of all 60
		protocols map[string]int // generator.protocols; nil: left out
		atLeast   bool           // the count of each protocol is at least, not exactly, that
	}{
		{"http2", true, true, []string{"--http2", "--cacert", p.caFile}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, false},
		{"http2 max streams", true, true, []string{"--http2", "--cacert", p.caFile, "--max-streams", "1"}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, true},
		{"h2c", false, true, []string{"--h2c"}, "HTTP/2.0", map[string]int{"h2c": 1}, false},
		{"http2 on goroutines", true, true, []string{"--http2", "--h2-engine", "goroutines", "--cacert", p.caFile}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, false},
		{"http2 max streams on goroutines", true, true, []string{"--http2", "--h2-engine", "goroutines", "--cacert", p.caFile, "--max-streams", "1"}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, true},
		{"h2c on goroutines", false, true, []string{"--h2c", "--h2-engine", "goroutines"}, "HTTP/2.0", map[string]int{"h2c": 1}, false},
		{"http2 on the loop, named", true, true, []string{"--http2", "--h2-engine", "loop", "--cacert", p.caFile}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, false},
		{"http2 with --net-http", true, true, []string{"--http2", "--net-http", "--cacert", p.caFile}, "HTTP/2.0 alpn=h2", map[string]int{"h2": 1}, false},
		{"https is HTTP/1.1 without --http2", true, true, []string{"--cacert", p.caFile}, "HTTP/1.1 alpn=", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := protoServer(t, p, tt.tlsOn, tt.h2, false)
			args := append([]string{"run", "--url", srv.URL + "/", "--rate", "200/s", "--jobs", "60", "--arrival", "constant",
				"--quiet", "--json", "--no-store", "--tick", "100ms"}, tt.flags...)
			code, stdout, stderr := tareCmd(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s := summaryOf(t, stdout)
			if s.Requests.OK != 60 {
				t.Errorf("requests %+v, errors %v; want 60 ok", s.Requests, s.ErrorKinds)
			}
			if got := seen(); got[tt.seen] != 60 || len(got) != 1 {
				t.Errorf("the server saw %v; want 60 requests as %q", got, tt.seen)
			}
			got := s.Generator.Protocols
			ok := len(got) == len(tt.protocols)
			for proto, n := range tt.protocols {
				ok = ok && (got[proto] == n || tt.atLeast && got[proto] > n)
			}
			if !ok {
				t.Errorf("generator.protocols %v; want %v (at least: %v; requests one after another share a connection)", got, tt.protocols, tt.atLeast)
			}
			// HTTP/2 is on the event loop unless --h2-engine goroutines
			// or --net-http asks for Go's client; HTTP/1.1 over TLS is on
			// goroutines.
			engine := "event loop"
			if slices.Contains(tt.flags, "goroutines") || slices.Contains(tt.flags, "--net-http") || tt.protocols == nil {
				engine = "goroutines"
			}
			if s.Generator.Engine != engine {
				t.Errorf("engine %q; want %q", s.Generator.Engine, engine)
			}
		})
	}

	t.Run("targets", func(t *testing.T) {
		// The requests of a targets file share their connections: two
		// requests to one server, one h2 connection.
		srv, seen := protoServer(t, p, true, true, false)
		file := filepath.Join(t.TempDir(), "targets.http")
		if err := os.WriteFile(file, []byte("GET "+srv.URL+"/a\n\nPOST "+srv.URL+"/b\n@"+p.caFile+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := tareCmd(t, "run", "--targets", file, "--http2", "--cacert", p.caFile, "--rate", "100/s", "--jobs", "20",
			"--arrival", "constant", "--quiet", "--json", "--no-store")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		s := summaryOf(t, stdout)
		if s.Requests.OK != 20 || seen()["HTTP/2.0 alpn=h2"] != 20 {
			t.Errorf("requests %+v, the server saw %v; want 20 over h2", s.Requests, seen())
		}
		if got := s.Generator.Protocols; len(got) != 1 || got["h2"] != 1 {
			t.Errorf("generator.protocols %v; want h2 1, the file's requests sharing it", got)
		}
		if u := s.Generator.ConnectionUse; u == nil || u.Opened != 1 || u.Reused != 19 || u.Waited == nil || *u.Waited != 0 {
			t.Errorf("connection_use %+v; want 1 opened, 19 reused, 0 waited (counted)", u)
		}
	})

	t.Run("text", func(t *testing.T) {
		srv, _ := protoServer(t, p, true, true, false)
		code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--http2", "--cacert", p.caFile, "--rate", "100/s", "--jobs", "10", "--quiet", "--no-store")
		if code != 0 || !strings.Contains(stdout, "event loop ×1, 1 connections at most   connections h2 1") {
			t.Errorf("exit %d; the text summary does not say the one connection spoke h2:\n%s%s", code, stdout, stderr)
		}
	})
}

// TestRunHTTP2Refused: a run that asks for HTTP/2 of a server that does
// not speak it is refused at start, exit 2, before any request: over TLS
// the server chose http/1.1 by ALPN; in cleartext it answered the
// preface with HTTP/1.1.
func TestRunHTTP2Refused(t *testing.T) {
	p := newPKI(t)
	for _, tt := range []struct {
		name  string
		tlsOn bool
		flags []string
		want  string
	}{
		{"http2", true, []string{"--http2", "--cacert", p.caFile}, "chose http/1.1 by ALPN, not h2"},
		{"h2c", false, []string{"--h2c"}, "does not speak HTTP/2 in cleartext by prior knowledge: it answered the HTTP/2 preface with HTTP/1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := protoServer(t, p, tt.tlsOn, false, false)
			args := append([]string{"run", "--url", srv.URL + "/", "--rate", "100/s", "--jobs", "10", "--quiet", "--json", "--no-store"}, tt.flags...)
			code, stdout, stderr := tareCmd(t, args...)
			if code != 2 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "drop --") {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", code, stderr, tt.want)
			}
			if stdout != "" || len(seen()) != 0 {
				t.Errorf("a refused run printed %q and the server served %v; want nothing", stdout, seen())
			}
		})
	}
}

// TestRunTLSBadInput: every TLS file a user can get wrong exits 2 before
// any request, naming the flag and the file and what was wrong, against a
// Go server that requires a client certificate its CA signed.
func TestRunTLSBadInput(t *testing.T) {
	p := newPKI(t)
	srv, seen := protoServer(t, p, true, true, true)
	url := srv.URL + "/"
	good := []string{"--cacert", p.caFile, "--cert", p.certFile, "--key", p.keyFile}
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong CA", []string{"--cacert", p.otherFile, "--cert", p.certFile, "--key", p.keyFile}, []string{"no CA of --cacert", "other-ca.pem"}},
		{"system CAs", []string{"--cert", p.certFile, "--key", p.keyFile}, []string{"this system does not trust", "--cacert FILE"}},
		{"wrong key", []string{"--cacert", p.caFile, "--cert", p.certFile, "--key", p.otherKey}, []string{"--key", "other.key", "does not match the certificate", "client.pem"}},
		{"expired certificate", []string{"--cacert", p.caFile, "--cert", p.expiredCert, "--key", p.expKey}, []string{"--cert", "expired.pem", "expired on"}},
		{"not PEM", []string{"--cacert", p.notPEM}, []string{"--cacert", "ca.der", "is not PEM"}},
		{"missing file", []string{"--cacert", filepath.Join(p.dir, "nope.pem")}, []string{"--cacert", "nope.pem", "does not exist"}},
		{"no client certificate", []string{"--cacert", p.caFile}, []string{"client certificate", "--cert FILE --key FILE"}},
		{"a stranger's certificate", []string{"--cacert", p.caFile, "--cert", p.strangerCert, "--key", p.strKey}, []string{"refused the client certificate of --cert", "stranger.pem"}},
		{"key without cert", []string{"--cacert", p.caFile, "--key", p.keyFile}, []string{"--key", "--cert FILE"}},
		{"servername with a port", append(good, "--servername", "h2.tare.test:443"), []string{"--servername", "without a scheme, port or path"}},
		{"a name the certificate lacks", append(good, "--servername", "other.tare.test"), []string{"not \"other.tare.test\"", "--servername"}},
		{"http2 on http://", []string{"--http2", "--url", strings.Replace(url, "https://", "http://", 1)}, []string{"for HTTP/2 in cleartext give --h2c"}},
		{"max streams alone", append(good, "--max-streams", "4"), []string{"--max-streams", "--http2"}},
		{"h2 engine alone", append(good, "--h2-engine", "loop"), []string{"--h2-engine", "give --http2 or --h2c"}},
		{"h2 engine unknown", append(good, "--http2", "--h2-engine", "fast"), []string{"--h2-engine must be goroutines or loop; got fast"}},
		{"cacert for http://", []string{"--cacert", p.caFile, "--url", strings.Replace(url, "https://", "http://", 1)}, []string{"apply to https:// targets"}},
		{"http2 for a model", []string{"--http2", "--model", "https://127.0.0.1:1/v1", "--url", ""}, []string{"--http2, --h2c and --max-streams apply to --url and --targets"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, append([]string{"run", "--url", url, "--rate", "50/s", "--jobs", "5", "--no-store", "--quiet", "--json"}, tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
			if stdout != "" || strings.Contains(stderr, ".go:") || strings.Contains(stderr, "MII") { // DER in base64 starts so
				t.Errorf("stdout %q, stderr %q: want no summary, no trace, no file contents", stdout, stderr)
			}
		})
	}
	if got := seen(); len(got) != 0 {
		t.Errorf("bad input sent requests: %v", got)
	}
	t.Run("good", func(t *testing.T) {
		code, stdout, stderr := tareCmd(t, append([]string{"run", "--url", url, "--rate", "50/s", "--jobs", "5", "--no-store", "--quiet", "--json", "--http2", "--servername", "h2.tare.test"}, good...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if s := summaryOf(t, stdout); s.Requests.OK != 5 || seen()["HTTP/2.0 alpn=h2"] != 5 {
			t.Errorf("requests %+v, the server saw %v; want 5 over h2", s.Requests, seen())
		}
	})
}

// TestRunModelTLS: the TLS options apply to a --model endpoint too: a
// simulated model behind a private CA is loaded with --cacert, and refused
// at start without it.
func TestRunModelTLS(t *testing.T) {
	p := newPKI(t)
	m, err := modelsim.New(modelsim.Config{TokenCost: 100 * time.Microsecond, MeanTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(m)
	cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	args := []string{"run", "--model", srv.URL + "/v1", "--rate", "20/s", "--jobs", "5", "--max-tokens", "4", "--quiet", "--json", "--no-store"}
	code, stdout, stderr := tareCmd(t, append(args, "--cacert", p.caFile)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if s := summaryOf(t, stdout); s.Requests.OK != 5 {
		t.Errorf("requests %+v, errors %v; want 5 ok", s.Requests, s.ErrorKinds)
	}
	if code, _, stderr := tareCmd(t, args...); code != 2 || !strings.Contains(stderr, "this system does not trust") {
		t.Errorf("without --cacert: exit %d, %q; want 2, the CA not trusted", code, stderr)
	}
}

// TestRunNginxMTLS: nginx from Debian serving HTTP/2 over TLS and
// requiring a client certificate (ssl_verify_client on), with a CA, a
// server and a client certificate the test made: tare --http2 with them
// loads it over h2, every request's certificate checked by nginx, and
// nginx's GOAWAY after keepalive_requests costs no request. A wrong CA, a
// wrong key and an expired certificate each exit 2, naming the file;
// --servername sends the name the server's certificate was issued for.
func TestRunNginxMTLS(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	named := p.ca.Issue(t, testpki.Options{CommonName: "nginx", Names: []string{"nginx.tare.test"}})
	addr, stop, err := scenario.NginxTLS(t.Context(), dir, scenario.NginxTLSConfig{
		Cert: testpki.Write(t, dir, "nginx.pem", named.CertPEM), Key: testpki.Write(t, dir, "nginx.key", named.KeyPEM),
		ClientCA: p.caFile, KeepaliveRequests: 25})
	if err != nil {
		scenario.SkipUnable(t, err)
		t.Fatal(err)
	}
	defer stop()
	url := "https://" + addr + "/"
	base := []string{"run", "--url", url, "--rate", "200/s", "--arrival", "constant", "--no-store", "--quiet", "--json", "--tick", "100ms"}
	good := []string{"--cacert", p.caFile, "--cert", p.certFile, "--key", p.keyFile, "--servername", "nginx.tare.test"}

	// readLog returns the lines nginx logged since the last call, waiting
	// up to 2 s for want of them (nginx logs a request after answering).
	lines := 0
	readLog := func(want int) []string {
		var all []string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			all = strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(all) == 1 && all[0] == "" {
				all = nil
			}
			if len(all)-lines >= want || time.Now().After(deadline) {
				break
			}
		}
		seen := all[lines:]
		lines = len(all)
		return seen
	}

	t.Run("bad input", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			args []string
			want []string
		}{
			{"wrong CA", []string{"--cacert", p.otherFile, "--cert", p.certFile, "--key", p.keyFile, "--servername", "nginx.tare.test"}, []string{"no CA of --cacert", "other-ca.pem", `issued by "tare test CA"`}},
			{"wrong key", []string{"--cacert", p.caFile, "--cert", p.certFile, "--key", p.otherKey, "--servername", "nginx.tare.test"}, []string{"--key", "other.key", "does not match", "client.pem"}},
			{"expired certificate", []string{"--cacert", p.caFile, "--cert", p.expiredCert, "--key", p.expKey, "--servername", "nginx.tare.test"}, []string{"--cert", "expired.pem", "expired on"}},
			{"no servername", []string{"--cacert", p.caFile, "--cert", p.certFile, "--key", p.keyFile}, []string{"a certificate for nginx.tare.test", "--servername"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				code, stdout, stderr := tareCmd(t, append(append(base, "--jobs", "10", "--http2"), tt.args...)...)
				if code != 2 || stdout != "" {
					t.Errorf("exit %d, stdout %q; want 2 and no summary; stderr %q", code, stdout, stderr)
				}
				for _, w := range tt.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("stderr %q does not say %q", stderr, w)
					}
				}
			})
		}
		if seen := readLog(0); len(seen) != 0 {
			t.Errorf("bad input sent nginx requests: %q", seen)
		}
	})

	for _, engine := range []string{"goroutines", "loop"} {
		t.Run("h2 with a client certificate on "+engine, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, append(append(base, "--jobs", "100", "--http2", "--h2-engine", engine), good...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s := summaryOf(t, stdout)
			if s.Requests.OK != 100 || s.Requests.Errors != 0 {
				t.Errorf("requests %+v, errors %v; want 100 ok: nginx's GOAWAY after 25 requests must cost none", s.Requests, s.ErrorKinds)
			}
			seen := readLog(100)
			conns := map[string]bool{}
			for _, l := range seen {
				f := strings.Fields(l)
				if len(f) != 3 || f[0] != "HTTP/2.0" || f[1] != "SUCCESS" {
					t.Errorf("nginx logged %q; want HTTP/2.0 with the client certificate verified (SUCCESS)", l)
					continue
				}
				conns[f[2]] = true
			}
			if len(seen) != 100 {
				t.Errorf("nginx logged %d requests; want 100", len(seen))
			}
			// 100 requests at 25 a connection: at least 4 connections, every
			// one counted as h2.
			if h2 := s.Generator.Protocols["h2"]; len(s.Generator.Protocols) != 1 || h2 != len(conns) || h2 < 4 {
				t.Errorf("generator.protocols %v, nginx saw %d connections; want h2 for each, at least 4", s.Generator.Protocols, len(conns))
			}
		})
	}

	t.Run("no client certificate", func(t *testing.T) {
		// nginx completes the handshake without one and answers each
		// request 400: the run measures that, and says so.
		code, stdout, stderr := tareCmd(t, append(base, "--jobs", "10", "--http2", "--cacert", p.caFile, "--servername", "nginx.tare.test")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if s := summaryOf(t, stdout); s.Requests.OK != 0 || s.ErrorKinds["http 400"] == 0 {
			t.Errorf("requests %+v, errors %v; want none ok, http 400 (nginx: no required SSL certificate was sent)", s.Requests, s.ErrorKinds)
		}
		for _, l := range readLog(10) {
			if f := strings.Fields(l); len(f) != 3 || f[1] != "NONE" {
				t.Errorf("nginx logged %q; want no client certificate (NONE)", l)
			}
		}
	})
}

// TestPlanTLSKeys: the TLS and HTTP/2 options are plan keys too, their
// files read beside the plan.
func TestPlanTLSKeys(t *testing.T) {
	p := newPKI(t)
	srv, seen := protoServer(t, p, true, true, true)
	plan := filepath.Join(p.dir, "plan.yaml")
	body := "url: " + srv.URL + "/\nrate: 50/s\njobs: 5\ntick: 100ms\nhttp2: true\nmax-streams: 8\ncacert: ca.pem\ncert: client.pem\nkey: client.key\nservername: h2.tare.test\n"
	if err := os.WriteFile(plan, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "plan.db"))
	code, stdout, stderr := tareCmd(t, "protocol", "run", plan, "--now")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stdout, stderr)
	}
	if got := seen()["HTTP/2.0 alpn=h2"]; got != 15 {
		t.Errorf("the server saw %v; want the plan's 3 windows of 5 requests over h2 with its client certificate", seen())
	}
}

// TestRunHTTP2Unreachable: the probe leaves a server that is not there
// to the run, which measures it, as it does over HTTP/1.1.
func TestRunHTTP2Unreachable(t *testing.T) {
	p := newPKI(t)
	srv, _ := protoServer(t, p, true, true, false)
	url := srv.URL + "/"
	srv.Close()
	code, stdout, stderr := tareCmd(t, "run", "--url", url, "--http2", "--cacert", p.caFile, "--rate", "50/s", "--jobs", "5", "--no-store", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if s := summaryOf(t, stdout); s.ErrorKinds[tare.KindRefused] != 5 {
		t.Errorf("errors %v; want 5 refused", s.ErrorKinds)
	}
}
