package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/metrics"
)

var run = tare.Run{ID: "0193abcd", Label: "checkout", Target: "http://user:secret@127.0.0.1:8080/"}

func TestMetricsRequests(t *testing.T) {
	m := metrics.New(run)
	t0 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	results := []tare.Result{
		{Scheduled: t0, Sent: t0.Add(100 * time.Microsecond), Done: t0.Add(20 * time.Millisecond), Status: 200},
		{Scheduled: t0, Sent: t0.Add(2 * time.Millisecond), Done: t0.Add(700 * time.Millisecond), Status: 200},
		{Scheduled: t0, Sent: t0.Add(300 * time.Microsecond), Done: t0.Add(3 * time.Second), Err: "http 503", Status: 503},
		{Scheduled: t0, Sent: t0.Add(300 * time.Microsecond), Err: "cancelled"}, // never finished: no latency
		{Scheduled: t0, Dropped: true},
	}
	for i := range results {
		m.AddResult(&results[i])
	}
	m.AddResult(nil)

	want := `
# HELP tare_requests_total Requests (or jobs) that ended, by outcome: ok, error (failed or timed out), dropped (never sent: the in-flight cap was reached).
# TYPE tare_requests_total counter
tare_requests_total{label="checkout",outcome="dropped",run_id="0193abcd"} 1
tare_requests_total{label="checkout",outcome="error",run_id="0193abcd"} 2
tare_requests_total{label="checkout",outcome="ok",run_id="0193abcd"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "tare_requests_total"); err != nil {
		t.Error(err)
	}
	want = `
# HELP tare_request_latency_seconds Latency of the requests that finished, ok or failed: done − scheduled time, never from the actual send (no coordinated omission).
# TYPE tare_request_latency_seconds histogram
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.001"} 0
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.0025"} 0
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.005"} 0
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.01"} 0
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.025"} 1
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.05"} 1
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.1"} 1
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.25"} 1
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="0.5"} 1
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="1"} 2
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="2.5"} 2
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="5"} 3
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="10"} 3
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="25"} 3
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="60"} 3
tare_request_latency_seconds_bucket{label="checkout",run_id="0193abcd",le="+Inf"} 3
tare_request_latency_seconds_sum{label="checkout",run_id="0193abcd"} 3.7199999999999998
tare_request_latency_seconds_count{label="checkout",run_id="0193abcd"} 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "tare_request_latency_seconds"); err != nil {
		t.Error(err)
	}
	// Four were sent (the dropped one was not): their lags are 0.1, 2,
	// 0.3 and 0.3 ms.
	if got, err := testutil.GatherAndCount(m.Registry(), "tare_send_lag_seconds"); err != nil || got != 1 {
		t.Errorf("tare_send_lag_seconds: %d series, %v; want 1", got, err)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP tare_send_lag_seconds How late the generator sent each request: actual send − scheduled time. A lagging generator is itself a symptom of a starved host.
# TYPE tare_send_lag_seconds histogram
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.0001"} 1
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.00025"} 1
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.0005"} 3
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.001"} 3
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.0025"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.005"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.01"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.025"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.05"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.1"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.25"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="0.5"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="1"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="2.5"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="10"} 4
tare_send_lag_seconds_bucket{label="checkout",run_id="0193abcd",le="+Inf"} 4
tare_send_lag_seconds_sum{label="checkout",run_id="0193abcd"} 0.0026999999999999997
tare_send_lag_seconds_count{label="checkout",run_id="0193abcd"} 4
`), "tare_send_lag_seconds"); err != nil {
		t.Error(err)
	}
}

// The secret in the run's target never reaches a label, and a run of the
// protocol carries its window.
func TestMetricsLabels(t *testing.T) {
	r := run
	r.Window = tare.WindowPeak
	m := metrics.New(r)
	text := scrape(t, m)
	if strings.Contains(text, "secret") || strings.Contains(text, "8080") {
		t.Errorf("the target reached the series:\n%s", text)
	}
	if !strings.Contains(text, `tare_requests_total{label="checkout",outcome="ok",run_id="0193abcd",window="peak"} 0`) {
		t.Errorf("no zero ok count with the run's labels:\n%s", text)
	}
}

func TestMetricsHost(t *testing.T) {
	m := metrics.New(run)
	// Before any tick: no host figure at all, only the tick count at 0.
	for _, name := range []string{"tare_host_steal_ratio", "tare_cpu_share_ratio", "tare_host_psi_cpu_some_ratio", "tare_queue_depth", "tare_verdict"} {
		if n, err := testutil.GatherAndCount(m.Registry(), name); err != nil || n != 0 {
			t.Errorf("%s before the first tick: %d series, %v; want none", name, n, err)
		}
	}

	full := tare.HostSample{
		CPU:       tare.CPUShares{CPU: -1, User: 40, System: 10, Steal: 12.5, Idle: 37.5},
		PerCPU:    []tare.CPUShares{{CPU: 0, User: 80, Steal: 20}, {CPU: 1, Steal: 5, Idle: 95}},
		PSISome:   tare.Float(30),
		Throttled: tare.Float(4),
		RunDelay:  tare.Float(50),
		CPUBy: &tare.CPUBy{SystemUnderTest: 20, Tare: 5, Others: 20, Kernel: 3, Unattributed: 2,
			Steal: 12.5, Idle: 37.5},
	}
	m.AddHost(full)
	m.SetQueueDepth(17)
	// Neighbour wait: 50 × (20+2) / (20+2+20+5) = 23.404…, under 22 × 2 CPUs.
	want := `
# HELP tare_host_steal_ratio Steal of the latest tick, over all online CPUs: time the hypervisor gave the vCPUs to someone else.
# TYPE tare_host_steal_ratio gauge
tare_host_steal_ratio{label="checkout",run_id="0193abcd"} 0.125
# HELP tare_host_steal_max_cpu_ratio The highest steal of any single CPU in the latest tick: the aggregate hides one starved vCPU.
# TYPE tare_host_steal_max_cpu_ratio gauge
tare_host_steal_max_cpu_ratio{label="checkout",run_id="0193abcd"} 0.2
# HELP tare_host_cpu_busy_ratio CPU busy in the latest tick: the time the guest itself ran (everything but idle, iowait and steal).
# TYPE tare_host_cpu_busy_ratio gauge
tare_host_cpu_busy_ratio{label="checkout",run_id="0193abcd"} 0.5
# HELP tare_host_throttled_ratio Share of the latest tick the cgroup of the measured processes was throttled by its CPU quota; absent when not measured.
# TYPE tare_host_throttled_ratio gauge
tare_host_throttled_ratio{label="checkout",run_id="0193abcd"} 0.04
# HELP tare_host_psi_cpu_some_ratio CPU pressure of the latest tick (/proc/pressure/cpu some): share of it some task waited for a CPU; absent without PSI.
# TYPE tare_host_psi_cpu_some_ratio gauge
tare_host_psi_cpu_some_ratio{label="checkout",run_id="0193abcd"} 0.3
# HELP tare_host_run_delay_ratio Run delay of the measured processes (system under test and tare) in the latest tick, in CPUs' worth of the tick (above 1 when several threads waited at once); absent when not measured.
# TYPE tare_host_run_delay_ratio gauge
tare_host_run_delay_ratio{label="checkout",run_id="0193abcd"} 0.5
# HELP tare_host_ticks_total Host samples (ticks) taken; every tare_host_* and tare_cpu_share_ratio series is the latest tick's.
# TYPE tare_host_ticks_total counter
tare_host_ticks_total{label="checkout",run_id="0193abcd"} 1
# HELP tare_cpu_share_ratio Whose CPU the latest tick was: all of the host's CPU time split by owner, summing to 1; absent when the processes could not be read.
# TYPE tare_cpu_share_ratio gauge
tare_cpu_share_ratio{label="checkout",owner="idle",run_id="0193abcd"} 0.375
tare_cpu_share_ratio{label="checkout",owner="kernel",run_id="0193abcd"} 0.03
tare_cpu_share_ratio{label="checkout",owner="others",run_id="0193abcd"} 0.2
tare_cpu_share_ratio{label="checkout",owner="steal",run_id="0193abcd"} 0.125
tare_cpu_share_ratio{label="checkout",owner="system_under_test",run_id="0193abcd"} 0.2
tare_cpu_share_ratio{label="checkout",owner="tare",run_id="0193abcd"} 0.05
tare_cpu_share_ratio{label="checkout",owner="unattributed",run_id="0193abcd"} 0.02
# HELP tare_queue_depth Jobs waiting in the queue, as last sampled; absent for a target that is not a queue.
# TYPE tare_queue_depth gauge
tare_queue_depth{label="checkout",run_id="0193abcd"} 17
`
	names := []string{"tare_host_steal_ratio", "tare_host_steal_max_cpu_ratio", "tare_host_cpu_busy_ratio",
		"tare_host_throttled_ratio", "tare_host_psi_cpu_some_ratio", "tare_host_run_delay_ratio",
		"tare_host_ticks_total", "tare_cpu_share_ratio", "tare_queue_depth"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got := gauge(t, m, "tare_host_neighbour_wait_ratio"); got < 0.2340 || got > 0.2341 {
		t.Errorf("tare_host_neighbour_wait_ratio = %v, want 0.2340…", got)
	}

	// A tick that measured none of the optional sources removes their
	// series: a missing source is unavailable, never 0.
	m.AddHost(tare.HostSample{CPU: tare.CPUShares{CPU: -1, User: 10, Idle: 90}})
	for _, name := range []string{"tare_host_throttled_ratio", "tare_host_psi_cpu_some_ratio", "tare_host_run_delay_ratio",
		"tare_host_neighbour_wait_ratio", "tare_cpu_share_ratio"} {
		if n, err := testutil.GatherAndCount(m.Registry(), name); err != nil || n != 0 {
			t.Errorf("%s after a tick without it: %d series, %v; want none", name, n, err)
		}
	}
	if got := gauge(t, m, "tare_host_steal_ratio"); got != 0 {
		t.Errorf("tare_host_steal_ratio = %v after a tick without steal, want 0", got)
	}
	if got := gauge(t, m, "tare_host_ticks_total"); got != 2 {
		t.Errorf("tare_host_ticks_total = %v, want 2", got)
	}
}

func TestMetricsVerdict(t *testing.T) {
	m := metrics.New(run)
	m.SetVerdict(tare.Verdict{Level: tare.Suspect})
	m.SetVerdict(tare.Verdict{Level: tare.Polluted}) // the last one counts
	want := `
# HELP tare_verdict The run's verdict once it ended: 1 for its level (clean, suspect or polluted), 0 for the others; absent while the run goes.
# TYPE tare_verdict gauge
tare_verdict{label="checkout",level="clean",run_id="0193abcd"} 0
tare_verdict{label="checkout",level="polluted",run_id="0193abcd"} 1
tare_verdict{label="checkout",level="suspect",run_id="0193abcd"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "tare_verdict"); err != nil {
		t.Error(err)
	}
}

// Every series has a unit and a name Prometheus' linter accepts.
func TestMetricsLint(t *testing.T) {
	m := metrics.New(run)
	m.AddHost(tare.HostSample{PSISome: tare.Float(1), Throttled: tare.Float(1), RunDelay: tare.Float(1), CPUBy: &tare.CPUBy{}})
	m.SetQueueDepth(1)
	m.SetVerdict(tare.Verdict{Level: tare.Clean})
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestMetricsCheckListen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		addr     string
		explicit bool
		want     string // in the error; "" for none
	}{
		{name: "default", addr: metrics.DefaultListen},
		{name: "ipv6 loopback", addr: "[::1]:9464"},
		{name: "localhost", addr: "localhost:0"},
		{name: "mapped loopback", addr: "[::ffff:127.0.0.2]:9464"},
		{name: "all interfaces", addr: "0.0.0.0:9464", want: "not loopback"},
		{name: "no host", addr: ":9464", want: "not loopback"},
		{name: "private", addr: "10.0.0.5:9464", want: "--metrics-allow-remote"},
		{name: "asked for", addr: "0.0.0.0:9464", explicit: true},
		{name: "no port", addr: "127.0.0.1", want: "want host:port"},
		{name: "bad port", addr: "127.0.0.1:http", want: `port "http"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := metrics.CheckListen(tc.addr, tc.explicit)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckListen(%q, %v) = %v, want nil", tc.addr, tc.explicit, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckListen(%q, %v) = %v, want an error with %q", tc.addr, tc.explicit, err, tc.want)
			case err != nil && tare.ErrorCode(err) != tare.EINVALID:
				t.Errorf("CheckListen(%q) code %q, want %s", tc.addr, tare.ErrorCode(err), tare.EINVALID)
			}
		})
	}
}

func TestMetricsServe(t *testing.T) {
	m := metrics.New(run)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := m.Serve(ctx, "0.0.0.0:0", false); err == nil {
		t.Fatal("Serve on 0.0.0.0 without asking: no error")
	}
	addr, err := m.Serve(ctx, "127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	m.AddResult(&tare.Result{Dropped: true})

	// WaitScrape waits for a scrape that begins after it is called.
	waited := make(chan error, 1)
	go func() { waited <- m.WaitScrape(ctx) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("WaitScrape returned %v before any scrape", err)
	default:
	}
	resp, err := http.Get("http://" + addr.String() + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `tare_requests_total{label="checkout",outcome="dropped",run_id="0193abcd"} 1`) {
		t.Errorf("GET %s: no dropped count:\n%s", metrics.Path, body)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("WaitScrape = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitScrape did not return after a scrape")
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := m.WaitScrape(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitScrape with no scrape coming = %v, want the deadline", err)
	}

	// Close frees the address at once: the next run can listen on it.
	m.Close()
	again, err := metrics.New(run).Serve(ctx, addr.String(), false)
	if err != nil {
		t.Fatalf("Serve on %s after Close: %v", addr, err)
	}
	addr = again
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := http.Get("http://" + addr.String() + metrics.Path); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still serving after ctx was cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape is what Prometheus would read on /metrics (the text format).
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.Path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", metrics.Path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// gauge is the one value of the series name (a gauge or a counter).
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%s: %d series, want 1", name, len(mf.GetMetric()))
		}
		mt := mf.GetMetric()[0]
		if mt.Counter != nil {
			return mt.GetCounter().GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	t.Fatalf("%s: no such series", name)
	return 0
}

func TestMetricsNil(t *testing.T) {
	var m *metrics.Metrics
	m.AddResult(&tare.Result{})
	m.AddHost(tare.HostSample{})
	m.SetQueueDepth(1)
	m.SetVerdict(tare.Verdict{Level: tare.Clean})
}
