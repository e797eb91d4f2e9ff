package servermetrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tare-dev/tare"
)

// DefaultTimeout bounds one read of the metrics: a read slower than half
// a tick is of little use.
const DefaultTimeout = 2 * time.Second

// Scraper reads one server's metrics. It is safe for concurrent use.
type Scraper struct {
	url    string
	client *http.Client
}

// New returns a Scraper for the metrics at rawURL, read with client (nil:
// a client of its own, bounded by DefaultTimeout).
func New(rawURL string, client *http.Client) (*Scraper, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, tare.Errorf(tare.EINVALID, "model metrics URL %q: want http(s)://host[:port]/metrics", tare.RedactText(rawURL))
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	return &Scraper{url: u.String(), client: client}, nil
}

// Beside is where a model endpoint's server exports its metrics by
// default: /metrics at the root of the endpoint's host (vLLM, SGLang, TGI
// and llama.cpp's server all serve it there).
func Beside(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("model metrics beside %q: not a URL", tare.RedactText(endpoint))
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String(), nil
}

// URL is where the Scraper reads, without credentials.
func (s *Scraper) URL() string {
	u, err := url.Parse(s.url)
	if err != nil {
		return s.url
	}
	return u.Redacted()
}

// Read reads the metrics once.
func (s *Scraper) Read(ctx context.Context) (Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return Reading{}, fmt.Errorf("read model metrics at %s: %w", s.URL(), err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return Reading{}, fmt.Errorf("read model metrics at %s: %w", s.URL(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return Reading{}, fmt.Errorf("read model metrics at %s: status %d", s.URL(), resp.StatusCode)
	}
	r, err := Parse(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Reading{}, fmt.Errorf("read model metrics at %s: %w", s.URL(), err)
	}
	return r, nil
}

// Window gathers the readings of one measured window: its Depth is a
// session's queue-depth sampler, and Summary what the readings came to.
func (s *Scraper) Window() *Window { return &Window{s: s} }

// Window is one window's readings. It is safe for concurrent use.
type Window struct {
	s *Scraper

	mu                   sync.Mutex // guards the figures below, updated by Depth
	server               string
	n, failed            int
	waiting, running, kv stat
	firstPre, lastPre    *float64
}

// stat is a figure's running mean and maximum.
type stat struct {
	n        int
	sum, max float64
}

func (st *stat) add(v *float64) {
	if v == nil || math.IsNaN(*v) {
		return
	}
	st.n++
	st.sum += *v
	st.max = max(st.max, *v)
}

func (st *stat) depth() tare.DepthStats {
	if st.n == 0 {
		return tare.DepthStats{}
	}
	return tare.DepthStats{Mean: tare.Float(math.Round(100*st.sum/float64(st.n)) / 100), Max: tare.Float(st.max)}
}

// Depth reads the metrics and returns the server's waiting requests, the
// model endpoint's queue depth; it keeps the rest of the reading for
// Summary.
func (w *Window) Depth(ctx context.Context) (float64, error) {
	r, err := w.s.Read(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed++
		return 0, err
	}
	w.n++
	w.server = r.Server
	w.waiting.add(&r.Waiting)
	w.running.add(r.Running)
	w.kv.add(r.KVCachePct)
	if r.Preemptions != nil {
		if w.firstPre == nil {
			w.firstPre = r.Preemptions
		}
		w.lastPre = r.Preemptions
	}
	return r.Waiting, nil
}

// Summary is what the window's readings came to; nil when none answered
// and none failed (the window read nothing).
func (w *Window) Summary() *tare.ModelServer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 && w.failed == 0 {
		return nil
	}
	m := &tare.ModelServer{MetricsURL: w.s.URL(), Server: w.server, Readings: w.n, Failed: w.failed,
		Waiting: w.waiting.depth(), Running: w.running.depth(), KVCachePct: w.kv.depth()}
	if w.firstPre != nil {
		// A counter reset (a restarted server) counts from zero again.
		d := *w.lastPre - *w.firstPre
		if d < 0 {
			d = *w.lastPre
		}
		m.Preemptions = tare.Int(int(math.Round(d)))
	}
	return m
}
