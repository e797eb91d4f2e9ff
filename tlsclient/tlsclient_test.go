package tlsclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testpki"
)

// TestConfig: every file a user can get wrong is refused with a message
// naming the flag, the file and what was wrong, and the right files make
// a configuration that trusts the CA and presents the certificate.
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "test CA")
	client := ca.Client(t, "tare client")
	other := ca.Client(t, "another client")
	expired := ca.Issue(t, testpki.Options{CommonName: "old client", Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	future := ca.Issue(t, testpki.Options{CommonName: "future client", Client: true,
		NotBefore: time.Now().Add(24 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	oldCA := &testpki.CA{}
	{
		// A CA that expired: its own template, signed by itself.
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: ca.Cert.SerialNumber, Subject: ca.Cert.Subject, IsCA: true, BasicConstraintsValid: true,
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour), KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		oldCA.PEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})

	w := func(name string, parts ...[]byte) string {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return testpki.Write(t, dir, name, b)
	}
	caFile := w("ca.pem", ca.PEM)
	certFile, keyFile := w("client.pem", client.CertPEM), w("client.key", client.KeyPEM)
	bothFile := w("both.pem", client.CertPEM, client.KeyPEM)
	otherKey := w("other.key", other.KeyPEM)
	expiredFile, expiredKey := w("expired.pem", expired.CertPEM), w("expired.key", expired.KeyPEM)
	futureFile, futureKey := w("future.pem", future.CertPEM), w("future.key", future.KeyPEM)
	garbage := w("garbage.pem", []byte("not a certificate at all\n"))
	der := w("ca.der", ca.Cert.Raw)
	keyOnly := w("key-only.pem", client.KeyPEM)
	oldCAFile := w("old-ca.pem", oldCA.PEM)
	bundle := w("bundle.pem", oldCA.PEM, ca.PEM)
	encrypted := w("encrypted.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	legacy := w("legacy.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}}))
	twoKeys := w("two.key", client.KeyPEM, other.KeyPEM)
	rsaFile := w("rsa.key", rsaPEM)

	tests := []struct {
		name string
		s    Settings
		code string
		want []string // in the message; "" code: no error
	}{
		{"ca", Settings{CACert: caFile}, "", nil},
		{"ca missing", Settings{CACert: dir + "/none.pem"}, tare.ENOTFOUND, []string{"--cacert", "none.pem", "does not exist"}},
		{"ca garbage", Settings{CACert: garbage}, tare.EINVALID, []string{"--cacert", "garbage.pem", "is not PEM", "-----BEGIN"}},
		{"ca der", Settings{CACert: der}, tare.EINVALID, []string{"ca.der", "is not PEM", "openssl x509 -inform der"}},
		{"ca is a key", Settings{CACert: keyOnly}, tare.EINVALID, []string{"key-only.pem", "holds no certificate", "PRIVATE KEY"}},
		{"ca expired", Settings{CACert: oldCAFile}, tare.EINVALID, []string{"old-ca.pem", `"test CA" expired on`}},
		{"ca bundle with an expired one", Settings{CACert: bundle}, "", nil},
		{"client", Settings{CACert: caFile, Cert: certFile, Key: keyFile}, "", nil},
		{"client in one file", Settings{Cert: bothFile}, "", nil},
		{"client without its key", Settings{Cert: certFile}, tare.EINVALID, []string{"--cert", "client.pem", "holds no private key", "--key FILE"}},
		{"key without a cert", Settings{Key: keyFile}, tare.EINVALID, []string{"--key", "client.key", "--cert FILE"}},
		{"wrong key", Settings{Cert: certFile, Key: otherKey}, tare.EINVALID, []string{"--key", "other.key", "does not match", `"tare client"`, "client.pem"}},
		{"rsa key for an ecdsa cert", Settings{Cert: certFile, Key: rsaFile}, tare.EINVALID, []string{"rsa.key", "does not match"}},
		{"expired client", Settings{Cert: expiredFile, Key: expiredKey}, tare.EINVALID, []string{"--cert", "expired.pem", `"old client" expired on`}},
		{"client not yet valid", Settings{Cert: futureFile, Key: futureKey}, tare.EINVALID, []string{"future.pem", "is not valid until"}},
		{"encrypted key", Settings{Cert: certFile, Key: encrypted}, tare.EINVALID, []string{"encrypted.key", "encrypted private key", "openssl pkey"}},
		{"legacy encrypted key", Settings{Cert: certFile, Key: legacy}, tare.EINVALID, []string{"legacy.key", "encrypted"}},
		{"two keys", Settings{Cert: certFile, Key: twoKeys}, tare.EINVALID, []string{"two.key", "holds 2 private keys"}},
		{"key garbage", Settings{Cert: certFile, Key: garbage}, tare.EINVALID, []string{"--key", "garbage.pem", "is not PEM"}},
		{"insecure and a CA", Settings{CACert: caFile, Insecure: true}, tare.EINVALID, []string{"--insecure", "--cacert", "ca.pem"}},
		{"servername with a port", Settings{ServerName: "api.internal:443"}, tare.EINVALID, []string{"--servername", "without a scheme, port or path"}},
		{"servername", Settings{ServerName: "api.internal"}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.s.Config(time.Now())
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Config: %v", err)
				}
				if tt.s.CACert != "" && cfg.RootCAs == nil || tt.s.Cert != "" && len(cfg.Certificates) != 1 || cfg.ServerName != tt.s.ServerName {
					t.Errorf("config %+v does not carry %+v", cfg, tt.s)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %s naming %q", tt.code, tt.want)
			}
			if code := tare.ErrorCode(err); code != tt.code {
				t.Errorf("code %q, want %q: %v", code, tt.code, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// FuzzConfig: whatever the files hold, Config returns a configuration or
// a *tare.Error, and never panics.
func FuzzConfig(f *testing.F) {
	ca := testpki.NewCA(f, "fuzz CA")
	leaf := ca.Client(f, "fuzz")
	f.Add(ca.PEM, leaf.CertPEM, leaf.KeyPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte{}, []byte("x"))
	f.Add(leaf.KeyPEM, leaf.KeyPEM, leaf.CertPEM)
	f.Fuzz(func(t *testing.T, caPEM, certPEM, keyPEM []byte) {
		dir := t.TempDir()
		s := Settings{CACert: testpki.Write(t, dir, "ca.pem", caPEM), Cert: testpki.Write(t, dir, "c.pem", certPEM), Key: testpki.Write(t, dir, "k.pem", keyPEM)}
		_, err := s.Config(time.Now())
		if err == nil {
			return
		}
		if code := tare.ErrorCode(err); code != tare.EINVALID {
			t.Errorf("code %q: %v", code, err)
		}
	})
}
