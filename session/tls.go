package session

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/tlsclient"
)

// TLS is the TLS options of the spec.
func (t *TargetSpec) TLS() tlsclient.Settings {
	return tlsclient.Settings{CACert: t.CACert, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName, Insecure: t.Insecure}
}

// tlsConfig reads and checks the TLS options' files: one configuration
// for every https:// connection of the run, whatever the target.
func (t *TargetSpec) tlsConfig() (*tls.Config, error) {
	return t.TLS().Config(time.Now())
}

// addresser is a target that says where its connections go.
type addresser interface {
	Addr() (scheme, addr string)
}

// endpoints are where target's connections go: one per request of a
// targets file, or the one server of a URL or a model.
func endpoints(target tare.Target) []addresser {
	switch x := target.(type) {
	case *httptarget.Mix:
		out := make([]addresser, 0, len(x.Targets()))
		for _, t := range x.Targets() {
			out = append(out, t)
		}
		return out
	case *httptarget.Target:
		return []addresser{x}
	case *openai.Client:
		return []addresser{x}
	case *openai.Conversation:
		return []addresser{x}
	}
	return nil
}

// The values of --h2-engine.
const (
	H2EngineGoroutines = "goroutines"
	H2EngineLoop       = "loop"
)

// h2Loop is whether HTTP/2 goes through load's event loop: by default,
// unless --net-http asks for Go's clients.
func (t *TargetSpec) h2Loop() bool {
	return t.H2Engine == H2EngineLoop || t.H2Engine == "" && !t.NetHTTP
}

// checkSecure refuses TLS and HTTP/2 options the target cannot use, and
// then probes, before any load, every server the load will connect to
// directly (or through --unix-socket): its certificate against the CAs, the client certificate
// against it, and HTTP/2 where it was asked for (a server that chose
// HTTP/1.1 by ALPN is refused here, so that no run claims h2 it did not
// get). A server that cannot be reached is left for the run to measure.
func (t *TargetSpec) checkSecure(ctx context.Context, target tare.Target, cfg *tls.Config) error {
	eps := endpoints(target)
	_, isModel := target.(*openai.Client)
	if _, ok := target.(*openai.Conversation); ok {
		isModel = true
	}
	switch {
	case t.H2Engine != "" && t.H2Engine != H2EngineGoroutines && t.H2Engine != H2EngineLoop:
		return settings.Wrong("h2-engine", H2EngineGoroutines+" or "+H2EngineLoop, t.H2Engine)
	case t.H2Engine != "" && !t.HTTP2 && !t.H2C:
		return settings.Errorf("h2-engine", "chooses what sends HTTP/2: give %s or %s with it", settings.Name("http2"), settings.Name("h2c"))
	case (t.HTTP2 || t.H2C || t.MaxStreams != 0) && (len(eps) == 0 || isModel):
		return settings.Errorf("", "%s, %s and %s apply to %s and %s", settings.Name("http2"), settings.Name("h2c"), settings.Name("max-streams"), settings.Name("url"), settings.Name("targets"))
	case len(eps) == 0 && t.TLS().Given():
		return settings.Errorf("", "%s, %s, %s and %s apply to https:// targets (%s, %s, %s): a queue's workers make their own connections", settings.Name("cacert"), settings.Name("cert"), settings.Name("key"), settings.Name("servername"), settings.Name("url"), settings.Name("targets"), settings.Name("model"))
	}
	https := false
	for _, ep := range eps {
		if scheme, _ := ep.Addr(); scheme == "https" {
			https = true
		}
	}
	if t.TLS().Given() && !https {
		return settings.Errorf("", "%s, %s, %s and %s apply to https:// targets, and this run has none", settings.Name("cacert"), settings.Name("cert"), settings.Name("key"), settings.Name("servername"))
	}

	tlsSettings := t.TLS()
	seen := map[string]bool{}
	for _, ep := range eps {
		scheme, addr := ep.Addr()
		if seen[scheme+"://"+addr] {
			continue
		}
		seen[scheme+"://"+addr] = true
		switch {
		case scheme == "https":
			if t.UnixSocket == "" && proxied(scheme, addr) {
				continue // the proxy is where the connections go
			}
			var alpn []string
			if t.HTTP2 || isModel {
				alpn = []string{httptarget.ProtoH2, httptarget.ProtoHTTP1} // as the load's connections offer them
			}
			hs, err := tlsSettings.Probe(ctx, cfg, addr, t.UnixSocket, alpn)
			if err != nil {
				return err
			}
			if t.HTTP2 && hs.Reached && hs.Protocol != httptarget.ProtoH2 {
				chose := "no protocol by ALPN (so HTTP/1.1)"
				if hs.Protocol != "" {
					chose = hs.Protocol + " by ALPN"
				}
				return settings.Errorf("http2", ": the server at %s chose %s, not h2: it does not speak HTTP/2 over TLS there; drop %s to load it over HTTP/1.1, or turn HTTP/2 on in the server", addr, chose, settings.Name("http2"))
			}
		case t.H2C:
			if _, err := httptarget.ProbeH2C(ctx, addr, t.UnixSocket); err != nil {
				return settings.Errorf("h2c", ": the server at %s does not speak HTTP/2 in cleartext by prior knowledge: %v; drop %s to load it over HTTP/1.1", addr, err, settings.Name("h2c"))
			}
		}
	}
	return nil
}

// proxied reports whether the environment sends connections to
// scheme://addr through a proxy.
func proxied(scheme, addr string) bool {
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: scheme, Host: addr}})
	return err == nil && proxy != nil
}
