// Package tlsclient is tare's TLS client configuration: the files a user
// names (--cacert, --cert, --key) read and checked into one *tls.Config
// that every https target shares (plain HTTP, a targets file, a model
// endpoint), and a probe handshake that checks, before any load, what the
// load's own connections would meet: the server's certificate against the
// CAs, the client certificate against the server, and the protocol the
// server picks by ALPN.
//
// Every problem is a *tare.Error with code tare.EINVALID (ENOTFOUND for a
// file that does not exist) naming the flag, the file and what was wrong
// with it, in words that say what would be right: not PEM, a key that
// does not match its certificate, a certificate expired or not yet valid,
// a server certificate no trusted CA signed. The files' contents never
// appear in a message.
package tlsclient

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Settings are the TLS options a user gives, by flag or plan key; the
// zero value is the system's CAs, no client certificate, and the URL's
// host as the server name.
type Settings struct {
	CACert     string // PEM file of the CAs to trust instead of the system's (--cacert)
	Cert       string // PEM file of the client certificate, its chain after it (--cert)
	Key        string // PEM file of the client certificate's private key (--key); "" when it is in Cert
	ServerName string // the name sent as SNI and checked against the server's certificate (--servername)
	Insecure   bool   // skip the server certificate's check (--insecure)
}

// Given reports whether any option beyond --insecure is set: those that
// need an https:// target to mean anything.
func (s Settings) Given() bool {
	return s.CACert != "" || s.Cert != "" || s.Key != "" || s.ServerName != ""
}

// Config reads and checks the files and returns the configuration every
// connection of the run clones; now is when certificates must be valid.
func (s Settings) Config(now time.Time) (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: s.Insecure} // the user's explicit choice (--insecure)
	switch {
	case s.Insecure && s.CACert != "":
		return nil, tare.SettingErrorf(tare.EINVALID, "insecure", "skips the check of the server's certificate, so the CAs of %s %q would never be used: give one of them", tare.Setting("cacert"), s.CACert)
	case s.Key != "" && s.Cert == "":
		return nil, tare.SettingErrorf(tare.EINVALID, "key", "%q is the private key of a client certificate: give the certificate too, with %s FILE", s.Key, tare.Setting("cert"))
	}
	if s.ServerName != "" {
		if err := checkServerName(s.ServerName); err != nil {
			return nil, err
		}
		cfg.ServerName = s.ServerName
	}
	if s.CACert != "" {
		pool, err := readCAs(s.CACert, now)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if s.Cert != "" {
		cert, err := readKeyPair(s.Cert, s.Key, now)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// checkServerName accepts a DNS name or an IP address, without a scheme,
// a port or a path.
func checkServerName(name string) error {
	if strings.TrimSpace(name) != name || strings.ContainsAny(name, " /:@?#[]") {
		return tare.SettingErrorf(tare.EINVALID, "servername", "must be a host name like api.internal (the name the server's certificate was issued for), without a scheme, port or path; got %q", name)
	}
	return nil
}

// pemFile is a PEM file's blocks, by the flag that named it.
type pemFile struct {
	flag, path string
	blocks     []*pem.Block
}

// readPEM reads path's PEM blocks; a file without any is an error that
// says what a PEM file looks like.
func readPEM(flag, path, want string) (*pemFile, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, tare.SettingErrorf(tare.ENOTFOUND, flag, "%q does not exist", path)
	case err != nil:
		return nil, tare.SettingErrorf(tare.EINVALID, flag, "%q cannot be read: %w", path, err)
	}
	f := &pemFile{flag: flag, path: path}
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		f.blocks = append(f.blocks, b)
	}
	if len(f.blocks) == 0 {
		hint := ""
		if len(bytes.TrimSpace(data)) > 0 && !bytes.Contains(data, []byte("-----BEGIN")) {
			hint = " (a DER file converts with: openssl x509 -inform der -in FILE -out FILE.pem; a key with: openssl pkey -inform der -in FILE -out FILE.pem)"
		}
		return nil, tare.SettingErrorf(tare.EINVALID, flag, "%q is not PEM: want %s between -----BEGIN and -----END lines%s", path, want, hint)
	}
	return f, nil
}

// of returns the blocks whose type is typ, or ends with it when suffix
// is set ("PRIVATE KEY" matches "RSA PRIVATE KEY").
func (f *pemFile) of(typ string, suffix bool) []*pem.Block {
	var out []*pem.Block
	for _, b := range f.blocks {
		if b.Type == typ || suffix && strings.HasSuffix(b.Type, " "+typ) {
			out = append(out, b)
		}
	}
	return out
}

// types lists the kinds of block the file holds, for a message.
func (f *pemFile) types() string {
	var ts []string
	for _, b := range f.blocks {
		ts = append(ts, b.Type)
	}
	return strings.Join(ts, ", ")
}

// certificates parses the file's CERTIFICATE blocks, in order.
func (f *pemFile) certificates() ([]*x509.Certificate, error) {
	blocks := f.of("CERTIFICATE", false)
	if len(blocks) == 0 {
		return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q holds no certificate (it holds: %s): want a -----BEGIN CERTIFICATE----- block", f.path, f.types())
	}
	certs := make([]*x509.Certificate, len(blocks))
	for i, b := range blocks {
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q: certificate %d of %d does not parse: %w", f.path, i+1, len(blocks), err)
		}
		certs[i] = c
	}
	return certs, nil
}

// readCAs is the pool of the CAs in path. A file whose every certificate
// has expired (or is not yet valid) is an error: nothing would verify
// against it. A bundle with some expired among valid ones is normal.
func readCAs(path string, now time.Time) (*x509.CertPool, error) {
	f, err := readPEM("cacert", path, "the CA's certificate (-----BEGIN CERTIFICATE-----)")
	if err != nil {
		return nil, err
	}
	certs, err := f.certificates()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	valid := 0
	var invalid error
	for _, c := range certs {
		if err := validity("cacert", path, c, now); err != nil {
			invalid = err
			continue
		}
		pool.AddCert(c)
		valid++
	}
	if valid == 0 {
		return nil, invalid
	}
	return pool, nil
}

// validity says whether c is valid at now, naming the file and the
// certificate when it is not.
func validity(flag, path string, c *x509.Certificate, now time.Time) error {
	const day = "2006-01-02 15:04 MST"
	switch {
	case now.After(c.NotAfter):
		return tare.SettingErrorf(tare.EINVALID, flag, "%q: the certificate %s expired on %s: renew it", path, name(c), c.NotAfter.UTC().Format(day))
	case now.Before(c.NotBefore):
		return tare.SettingErrorf(tare.EINVALID, flag, "%q: the certificate %s is not valid until %s (is this host's clock right?)", path, name(c), c.NotBefore.UTC().Format(day))
	}
	return nil
}

// name names a certificate by its subject, for messages.
func name(c *x509.Certificate) string {
	if cn := c.Subject.CommonName; cn != "" {
		return fmt.Sprintf("%q", cn)
	}
	return fmt.Sprintf("%q", c.Subject.String())
}

// readKeyPair is the client certificate of certPath (its chain after it)
// with its private key from keyPath, or from certPath when keyPath is "".
func readKeyPair(certPath, keyPath string, now time.Time) (tls.Certificate, error) {
	cf, err := readPEM("cert", certPath, "the client certificate (-----BEGIN CERTIFICATE-----)")
	if err != nil {
		return tls.Certificate{}, err
	}
	chain, err := cf.certificates()
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := chain[0]
	if err := validity("cert", certPath, leaf, now); err != nil {
		return tls.Certificate{}, err
	}
	kf := cf
	if keyPath != "" {
		if kf, err = readPEM("key", keyPath, "the private key (-----BEGIN PRIVATE KEY-----)"); err != nil {
			return tls.Certificate{}, err
		}
	}
	key, err := privateKey(kf)
	if err != nil {
		return tls.Certificate{}, err
	}
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return tls.Certificate{}, tare.SettingErrorf(tare.EINVALID, kf.flag, "%q does not match the certificate %s of %s %q: the key is another certificate's; give the key made with that certificate", kf.path, name(leaf), tare.Setting("cert"), certPath)
	}
	cert := tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nil
}

// privateKey parses the one private key of f: PKCS #8, PKCS #1 (RSA) or
// SEC 1 (EC).
func privateKey(f *pemFile) (crypto.Signer, error) {
	blocks := f.of("PRIVATE KEY", true)
	switch {
	case len(blocks) == 0 && f.flag == "cert":
		return nil, tare.SettingErrorf(tare.EINVALID, "cert", "%q holds no private key (it holds: %s): give the key's file with %s FILE", f.path, f.types(), tare.Setting("key"))
	case len(blocks) == 0:
		return nil, tare.SettingErrorf(tare.EINVALID, "key", "%q holds no private key (it holds: %s): want a -----BEGIN PRIVATE KEY----- block", f.path, f.types())
	case len(blocks) > 1:
		return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q holds %d private keys: give a file with the one key of the certificate", f.path, len(blocks))
	}
	b := blocks[0]
	if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q is an encrypted private key, which tare cannot ask a passphrase for: decrypt it to a file only you can read (openssl pkey -in %s -out client.key)", f.path, f.path)
	}
	var key any
	var err error
	switch b.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q: the %s does not parse: %w", f.path, strings.ToLower(b.Type), err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k.(crypto.Signer), nil
	}
	return nil, tare.SettingErrorf(tare.EINVALID, f.flag, "%q: a %T key, which TLS cannot use: want RSA, ECDSA or Ed25519", f.path, key)
}
