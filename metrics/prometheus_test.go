package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/internal/testkit/loopback"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/metrics"
)

// TestMetricsPrometheus has a real Prometheus (Debian's) scrape a real load
// loop every second, and finds in Prometheus' own HTTP API the run's figures:
// the request count, the host ticks, every steal value it scraped among the
// ticks' steal, the last tick's steal, and the verdict.
func TestMetricsPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real Prometheus takes about 15 s")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testservice.Missing(t, "no prometheus binary: install Debian's prometheus package (scripts/test does, as root)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	run := tare.Run{ID: "0193prom", Label: "scraped"}
	m := metrics.New(run)
	addr, err := m.Serve(ctx, "127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	api := startPrometheus(ctx, t, bin, addr.String())

	// Prometheus scrapes the endpoint from the start: wait for its first
	// scrape, so the run's first second is seen too.
	if err := m.WaitScrape(ctx); err != nil {
		t.Fatalf("Prometheus never scraped %s: %v", addr, err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	target, err := httptarget.New(httptarget.Config{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	sampler, err := host.NewSampler(host.Config{Tick: 500 * time.Millisecond, Tare: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer sampler.Close()

	// One consumer, as in a run: results and host samples pass through it.
	const jobs = 80
	results := make(chan *load.Batch, 64)
	samples := make(chan tare.HostSample, 4)
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		load.New(target, load.Config{}).Run(ctx, time.Now(), arrival.Bound(arrival.NewConstant(20), jobs, 0), results)
	}()
	go func() { defer wg.Done(); sampler.Run(sctx, samples) }()
	var ok, total int
	var steals []float64 // each tick's, as a ratio
	for results != nil || samples != nil {
		select {
		case b, open := <-results:
			if !open {
				results = nil
				stopSampler()
				continue
			}
			for _, r := range b.Results {
				total++
				if r.OK() {
					ok++
				}
				m.AddResult(&r)
			}
			b.Release()
		case h, open := <-samples:
			if !open {
				samples = nil
				continue
			}
			steals = append(steals, h.CPU.Steal/100)
			m.AddHost(h)
		}
	}
	wg.Wait()
	m.SetVerdict(tare.Verdict{Level: tare.Clean})
	if total != jobs || ok != jobs || len(steals) < 3 {
		t.Fatalf("the load loop: %d results, %d ok, %d ticks; want %d ok and 3 ticks at least", total, ok, len(steals), jobs)
	}
	wctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := m.WaitScrape(wctx); err != nil {
		t.Fatalf("no scrape after the run ended: %v", err)
	}

	sel := fmt.Sprintf(`{run_id=%q,label=%q}`, run.ID, run.Label)
	// The scrape has been answered; Prometheus appends it right after.
	for _, c := range []struct {
		q    string
		want float64
	}{
		{`tare_requests_total{outcome="ok",` + sel[1:], jobs},
		{`tare_requests_total{outcome="error",` + sel[1:], 0},
		{`tare_request_latency_seconds_count` + sel, jobs},
		{`tare_host_ticks_total` + sel, float64(len(steals))},
		{`tare_host_steal_ratio` + sel, steals[len(steals)-1]},
		{`tare_verdict{level="clean",` + sel[1:], 1},
		{`count(tare_cpu_share_ratio` + sel + `)`, float64(len(metrics.Owners))},
	} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			v, err := instant(ctx, api, c.q)
			if err == nil && v == c.want {
				t.Logf("Prometheus: %s = %v", c.q, v)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("Prometheus: %s = %v (%v), want %v", c.q, v, err, c.want)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Every steal value Prometheus scraped is one of the ticks' figures.
	scraped, err := samplesOf(ctx, api, `tare_host_steal_ratio`+sel+`[5m]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(scraped) < 2 {
		t.Errorf("Prometheus holds %d steal samples, want one a second of the run", len(scraped))
	}
	for _, v := range scraped {
		found := false
		for _, s := range steals {
			found = found || s == v
		}
		if !found {
			t.Errorf("Prometheus scraped steal %v, which no tick had (ticks: %v)", v, steals)
		}
	}
	t.Logf("%d ticks, steal per tick %v; Prometheus scraped %d steal samples %v", len(steals), steals, len(scraped), scraped)
}

// startPrometheus starts Prometheus on a free loopback port, scraping
// target every second, and returns the address of its HTTP API once it is
// ready. It is killed when the test ends.
func startPrometheus(ctx context.Context, t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: tare
    metrics_path: %s
    static_configs:
      - targets: [%q]
`, metrics.Path, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := loopback.FreeAddr(t)
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus said:\n%s", logs.String())
		}
	})
	api := "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(api + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("Prometheus not ready on %s after 30 s: %v\n%s", listen, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiResult is the data of an answer of /api/v1/query.
type apiResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value  []any   `json:"value"`  // vector: [time, "value"]
			Values [][]any `json:"values"` // matrix: [[time, "value"], …]
		} `json:"result"`
	} `json:"data"`
}

func query(ctx context.Context, api, q string) (*apiResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	return &r, nil
}

// instant is the one value of an instant query.
func instant(ctx context.Context, api, q string) (float64, error) {
	r, err := query(ctx, api, q)
	if err != nil {
		return 0, err
	}
	if r.Data.ResultType != "vector" || len(r.Data.Result) != 1 || len(r.Data.Result[0].Value) != 2 {
		return 0, fmt.Errorf("query %s: %d series of %s, want one", q, len(r.Data.Result), r.Data.ResultType)
	}
	return value(r.Data.Result[0].Value[1])
}

// samplesOf is every raw sample of a range query's one series.
func samplesOf(ctx context.Context, api, q string) ([]float64, error) {
	r, err := query(ctx, api, q)
	if err != nil {
		return nil, err
	}
	if r.Data.ResultType != "matrix" || len(r.Data.Result) != 1 {
		return nil, fmt.Errorf("query %s: %d series of %s, want one", q, len(r.Data.Result), r.Data.ResultType)
	}
	var vs []float64
	for _, p := range r.Data.Result[0].Values {
		v, err := value(p[1])
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func value(x any) (float64, error) {
	s, ok := x.(string)
	if !ok {
		return 0, fmt.Errorf("value %v: not a string", x)
	}
	return strconv.ParseFloat(s, 64)
}
