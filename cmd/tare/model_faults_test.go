package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
)

// silentServer accepts connections on loopback and never answers: the
// worst model endpoint, one that holds every request open.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards conns, appended by the accept loop
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// trickle answers 200 with an event stream that sends one empty chunk every
// 100 ms and never finishes: each byte comes in time, the completion never
// does.
func trickle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"}}]}\n\n")
			w.(http.Flusher).Flush()
		}
	}
}

// TestModelMisbehaving: a model endpoint that fails, cuts streams, rate
// limits, never answers or trickles is measured, not a failure of tare:
// every request counted under an error kind of its own, the request
// timeout honoured, the run over in bounded time, no goroutine left behind.
func TestModelMisbehaving(t *testing.T) {
	if testing.Short() {
		t.Skip("five model runs of ~1–3 s; skipped with -short")
	}
	sim := func(t *testing.T, cfg modelsim.Config) string {
		cfg.TokenCost, cfg.MeanTokens, cfg.Seed = 100*time.Microsecond, 8, 3
		return testservice.Model(t, cfg).URL + "/v1"
	}
	status := func(t *testing.T, code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"message":"slow down","type":"rate_limit"}}`, code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	tests := []struct {
		name  string
		url   func(t *testing.T) string
		jobs  int
		kinds []string // the error kinds expected; any share of "" (ok) besides
		all   bool     // every request fails
	}{
		{"errors 503", func(t *testing.T) string { return sim(t, modelsim.Config{ErrorRate: 0.4}) }, 40, []string{tare.HTTPKind(503)}, false},
		{"streams cut", func(t *testing.T) string { return sim(t, modelsim.Config{CutRate: 0.4}) }, 40, []string{openai.KindStreamCut}, false},
		{"rate limited 429", func(t *testing.T) string { return status(t, http.StatusTooManyRequests) }, 20, []string{tare.HTTPKind(429)}, true},
		{"server error 500", func(t *testing.T) string { return status(t, http.StatusInternalServerError) }, 20, []string{tare.HTTPKind(500)}, true},
		{"never answers", silentServer, 10, []string{tare.KindTimeout}, true},
		{"trickle", func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(trickle))
			t.Cleanup(srv.Close)
			return srv.URL + "/v1"
		}, 10, []string{tare.KindTimeout}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Registered first, so it runs last: after the servers'
			// cleanups have closed them.
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
			const timeout = 800 * time.Millisecond
			start := time.Now()
			code, stdout, stderr := tareCmd(t, "run", "--model", tt.url(t), "--rate", "40/s", "--jobs", fmt.Sprint(tt.jobs),
				"--timeout", timeout.String(), "--max-tokens", "8", "--quiet", "--json", "--tick", "100ms")
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s tare.Summary
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			t.Logf("%s: requests %+v kinds %v in %s", tt.name, s.Requests, s.ErrorKinds, took.Round(time.Millisecond))
			if s.Requests.Total != tt.jobs || s.Requests.OK+s.Requests.Errors != s.Requests.Total {
				t.Errorf("requests %+v: want all %d accounted for", s.Requests, tt.jobs)
			}
			var counted int
			for _, k := range tt.kinds {
				if s.ErrorKinds[k] == 0 {
					t.Errorf("no error of kind %q in %v", k, s.ErrorKinds)
				}
				counted += s.ErrorKinds[k]
			}
			if counted != s.Requests.Errors {
				t.Errorf("error kinds %v: want only %q", s.ErrorKinds, tt.kinds)
			}
			if tt.all && s.Requests.Errors != s.Requests.Total {
				t.Errorf("requests %+v: want every one failed", s.Requests)
			}
			// The timeout bounds each request: the slowest is at most the
			// timeout plus the scheduler's slack, never the server's pace.
			if s.Service.Max != nil && *s.Service.Max > 10*timeout.Seconds()*1000 {
				t.Errorf("slowest request %.0f ms: the %s timeout was not honoured", *s.Service.Max, timeout)
			}
		})
	}
}
