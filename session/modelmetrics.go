package session

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/servermetrics"
	"github.com/tare-dev/tare/settings"
)

// NoModelMetrics is the --model-metrics value that reads none.
const NoModelMetrics = "none"

// modelMetrics is the scraper of a model endpoint's server metrics:
// --model-metrics URL, which must answer in a known format (exit 2
// otherwise); by default /metrics beside the endpoint when it answers so,
// else none; none with --model-metrics none or a Unix-socket endpoint
// (its metrics are not at a URL tare could guess).
func modelMetrics(ctx context.Context, t *TargetSpec, tlsConfig *tls.Config) (*servermetrics.Scraper, error) {
	if t.ModelMetrics == NoModelMetrics || (t.ModelMetrics == "" && t.UnixSocket != "") {
		return nil, nil
	}
	client := &http.Client{Timeout: servermetrics.DefaultTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig}}
	url, given := t.ModelMetrics, t.ModelMetrics != ""
	if !given {
		var err error
		if url, err = servermetrics.Beside(t.Model); err != nil {
			return nil, nil
		}
	}
	s, err := servermetrics.New(url, client)
	if err != nil {
		return nil, Flagged(err, "model-metrics")
	}
	if _, err := s.Read(ctx); err != nil {
		if !given {
			return nil, nil // a server without metrics, or in an unknown format
		}
		what := "did not answer"
		if errors.Is(err, servermetrics.ErrUnknown) || errors.Is(err, servermetrics.ErrFormat) {
			what = "answered in no format tare knows"
		}
		return nil, settings.Errorf("model-metrics", "%s %s (%v); give the server's Prometheus metrics URL, or %s %s", s.URL(), what, err, settings.Name("model-metrics"), NoModelMetrics)
	}
	return s, nil
}

// serverWindow gives cfg, a window of a model target whose server's
// metrics are read, their reading: the server's waiting requests as the
// window's queue depth, and what the readings came to in the summary's
// model figures.
func serverWindow(cfg *Config, s *servermetrics.Scraper) {
	w := s.Window()
	cfg.Depth = w.Depth
	finish := cfg.Finish
	cfg.Finish = func(sum *tare.Summary) {
		if sum.Model != nil {
			sum.Model.Server = w.Summary()
		}
		if finish != nil {
			finish(sum)
		}
	}
}
