package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestMetricsRun scrapes a real tare run's /metrics as Prometheus would,
// once a run's last figures and verdict are there (--metrics-linger keeps
// the endpoint up for that scrape), and finds the summary's figures.
func TestMetricsRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	type outcome struct {
		code           int
		stdout, stderr string
	}
	done := make(chan outcome, 1)
	go func() {
		code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "50/s", "--jobs", "60", "--arrival", "constant",
			"--quiet", "--json", "--no-store", "--tick", "200ms", "--label", "scraped", "--metrics-listen", addr, "--metrics-linger", "10s")
		done <- outcome{code, stdout, stderr}
	}()

	// Scrape every 100 ms, as a Prometheus would, until the verdict is there.
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(last, "tare_verdict{") {
		if time.Now().After(deadline) {
			run := "still running"
			select {
			case o := <-done:
				run = fmt.Sprintf("exit %d, stderr:\n%s", o.code, o.stderr)
			case <-time.After(5 * time.Second):
			}
			t.Fatalf("no verdict on http://%s/metrics after 30 s; the run: %s\nlast scrape:\n%s", addr, run, last)
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // not listening yet
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(b)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("tare run did not end after the verdict was scraped")
	}
	if o.code != 0 {
		t.Fatalf("exit %d; stderr %s", o.code, o.stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(o.stdout), &s); err != nil {
		t.Fatalf("summary json: %v\n%s", err, o.stdout)
	}
	if !strings.Contains(o.stderr, "http://"+addr+"/metrics") {
		t.Errorf("stderr does not say where the metrics are: %s", o.stderr)
	}

	value := func(series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(last)
		if m == nil {
			t.Fatalf("no %s in the last scrape:\n%s", series, last)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	labels := `label="scraped",run_id=""`
	ok := value(`tare_requests_total{label="scraped",outcome="ok",run_id=""}`)
	if ok != float64(s.Requests.OK) || ok != 60 {
		t.Errorf("tare_requests_total{outcome=ok} = %v, the summary says %d ok", ok, s.Requests.OK)
	}
	if n := value(`tare_request_latency_seconds_count{` + labels + `}`); n != 60 {
		t.Errorf("tare_request_latency_seconds_count = %v, want 60", n)
	}
	steal := value(`tare_host_steal_ratio{` + labels + `}`)
	// The summary's shares are rounded to two decimals, the scraped
	// ratio is not: a last tick that was the run's highest (8.5714… %
	// against 8.57) is within half of the summary's last digit.
	if s.Host.Steal.Max == nil || steal*100 > *s.Host.Steal.Max+0.005+1e-9 {
		t.Errorf("tare_host_steal_ratio = %v, above the run's highest steal %v %%", steal, s.Host.Steal.Max)
	}
	if v := value(`tare_verdict{label="scraped",level="` + string(s.Verdict.Level) + `",run_id=""}`); v != 1 {
		t.Errorf("tare_verdict{level=%q} = %v, want 1", s.Verdict.Level, v)
	}
	t.Logf("scraped: %v ok, steal %v (the run's max %v %%), verdict %s", ok, steal, *s.Host.Steal.Max, s.Verdict.Level)
}

func TestMetricsRefusesRemote(t *testing.T) {
	code, _, stderr := tareCmd(t, "run", "--url", "http://127.0.0.1:1/", "--jobs", "1", "--metrics-listen", "0.0.0.0:9464")
	if code != 2 || !strings.Contains(stderr, "not loopback") || !strings.Contains(stderr, "--metrics-allow-remote") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --metrics-allow-remote", code, stderr)
	}
}
