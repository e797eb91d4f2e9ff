package metrics

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tare-dev/tare"
)

// DefaultListen is where --metrics-listen serves when given without a
// value: loopback, on the port Prometheus' registry of exporters lists for
// load testers' figures.
const DefaultListen = "127.0.0.1:9464"

// Path is where the series are served.
const Path = "/metrics"

// CheckListen reports whether addr is a host:port that /metrics may listen
// on: a loopback address, or any address when explicit says the user asked
// for one that is not.
func CheckListen(addr string, explicit bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return tare.SettingErrorf(tare.EINVALID, "metrics-listen", "%q: want host:port, like %s", addr, DefaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return tare.SettingErrorf(tare.EINVALID, "metrics-listen", "%q: port %q: want a number from 0 to 65535", addr, port)
	}
	if explicit || isLoopback(host) {
		return nil
	}
	return tare.Errorf(tare.EINVALID,
		"--metrics-listen %q is not loopback: the run's figures would be readable from other machines; "+
			"use 127.0.0.1 or ::1, or add --metrics-allow-remote to allow it", addr)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Serve listens on addr (see CheckListen for explicit) and serves the
// series on Path until ctx is cancelled; it returns the address it listens
// on (the port chosen when addr's is 0) once it does. Close stops it
// sooner.
func (m *Metrics) Serve(ctx context.Context, addr string, explicit bool) (net.Addr, error) {
	if err := CheckListen(addr, explicit); err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, tare.SettingErrorf(tare.EUNAVAILABLE, "metrics-listen", "%q: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	m.mu.Lock()
	m.stops = append(m.stops, sync.OnceFunc(func() { close(stopped); srv.Close() }))
	m.mu.Unlock()
	// Serve returns http.ErrServerClosed after Shutdown, or an accept
	// error once the run began: either way the run goes on, unobserved.
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr(), nil
}

// Close stops serving at once, and frees the address for the next run
// (the next window of the protocol) before it returns.
func (m *Metrics) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	stops := m.stops
	m.stops = nil
	m.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// Handler serves the series in Prometheus' exposition formats, and counts
// the scrapes WaitScrape waits for.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.begun++
		n := m.begun
		m.mu.Unlock()
		h.ServeHTTP(w, r)
		m.mu.Lock()
		m.answered = max(m.answered, n)
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
	})
}

// WaitScrape waits until a scrape that began after the call has been
// answered, so that what was set before it (the verdict, the last results)
// has reached Prometheus before the process exits; it returns ctx's error
// if ctx ends first.
func (m *Metrics) WaitScrape(ctx context.Context) error {
	m.mu.Lock()
	want := m.begun + 1 // the first scrape to begin from now on
	for m.answered < want {
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
	}
	m.mu.Unlock()
	return nil
}
