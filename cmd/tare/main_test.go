package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/modelsim"
)

// tare runs the command line in-process and returns its exit status and
// what it printed.
func tareCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, []byte(got))
}

// TestGoldenCLI pins the output of the invocations whose output does not
// depend on the machine: help, version and usage errors.
func TestGoldenCLI(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"--help"}, 0},
		{"run-help", []string{"help", "run"}, 0},
		{"demo-help", []string{"demo", "--help"}, 0},
		{"check-help", []string{"check", "--help"}, 0},
		{"watch-help", []string{"watch", "--help"}, 0},
		{"report-help", []string{"report", "--help"}, 0},
		{"version", []string{"version"}, 0},
		{"bad-rate", []string{"run", "--url", "http://127.0.0.1:1/", "--rate", "fast"}, 2},
		{"unknown-command", []string{"fly"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			golden(t, tt.name+".stdout", stdout)
			golden(t, tt.name+".stderr", stderr)
		})
	}
}

// TestBadInput: every bad value exits 2 with a message naming the flag, the
// value and what would be accepted, before any load is sent.
func TestBadInput(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	url := srv.URL + "/"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"rate word", []string{"run", "--url", url, "--rate", "fast"}, `--rate must look like 200/s, 12/m or 3/h; got "fast"`},
		{"rate zero", []string{"run", "--url", url, "--rate", "0/s"}, "--rate must be positive"},
		{"duration", []string{"run", "--url", url, "--duration", "soon"}, `--duration must be a duration like 30s, 1m30s or 250ms; got "soon"`},
		{"negative duration", []string{"run", "--url", url, "--duration", "-5s"}, "--duration must be 0 or more"},
		{"no end", []string{"run", "--url", url, "--duration", "0"}, "give --jobs N, --duration D, or both"},
		{"jobs", []string{"run", "--url", url, "--jobs", "many"}, `--jobs must be a whole number; got "many"`},
		{"no url", []string{"run"}, "needs a target: give --url"},
		{"url scheme", []string{"run", "--url", "ftp://127.0.0.1/"}, "ftp://127.0.0.1/"},
		{"url garbage", []string{"run", "--url", "::not a url"}, "::not a url"},
		{"header", []string{"run", "--url", url, "-H", "NoColonHere"}, `--header`},
		{"body file", []string{"run", "--url", url, "--body", "@/nonexistent/body.json"}, "/nonexistent/body.json"},
		{"arrival", []string{"run", "--url", url, "--arrival", "bursty"}, `--arrival must be poisson, gamma or constant; got "bursty"`},
		{"burstiness", []string{"run", "--url", url, "--arrival", "gamma", "--burstiness", "-1"}, "--burstiness must be a positive number"},
		{"tick", []string{"run", "--url", url, "--tick", "10ms"}, "--tick must be 100ms or more; got 10ms"},
		{"slo", []string{"run", "--url", url, "--slo", "p95 under 2s"}, "--slo: SLO objective must look like p95<=2s"},
		{"slo ttft of http", []string{"run", "--url", url, "--slo", "p95<=2s,ttft<=500ms"}, `--slo: SLO objective "ttft<=500ms": a plain HTTP target sends no tokens, so it has no time to first token; its first answer is the first byte: ttfb<=500ms`},
		{"slo tpot of http", []string{"run", "--url", url, "--slo", "tpot<=50ms"}, "a plain HTTP target sends no tokens, so it has no time per output token"},
		{"slo ttfb of a model", []string{"run", "--model", url, "--slo", "ttfb<=1s"}, "a model's first answer is its first token: ttft<=1s"},
		{"fail-on", []string{"run", "--url", url, "--fail-on", "always"}, `--fail-on must be polluted, suspect or slo; got "always"`},
		{"fail-on slo without slo", []string{"run", "--url", url, "--fail-on", "slo"}, "--fail-on slo needs an --slo"},
		{"window", []string{"run", "--url", url, "--window", "noon"}, `--window must be peak, offpeak or mid; got "noon"`},
		{"threshold", []string{"run", "--url", url, "--steal-threshold", "150"}, "--steal-threshold must be a percentage from 0 to 100; got 150"},
		{"max-inflight", []string{"run", "--url", url, "--max-inflight", "0"}, "--max-inflight must be at least 1"},
		{"timeout", []string{"run", "--url", url, "--timeout", "0s"}, "--timeout must be positive"},
		{"pid", []string{"run", "--url", url, "--pid", "999999999"}, "--pid 999999999: no such process"},
		{"unknown flag", []string{"run", "--url", url, "--rps", "5"}, "unknown flag: --rps"},
		{"check for", []string{"check", "--for", "0s"}, "--for must be a positive duration"},
		{"watch nothing", []string{"watch"}, "requires at least 1 arg"},
		{"watch missing command", []string{"watch", "--", "/nonexistent/loadtool"}, `cannot run "/nonexistent/loadtool"`},
		{"demo workers", []string{"demo", "--workers", "0"}, "--workers must be at least 1"},
		{"huge header", []string{"run", "--url", url, "-H", "X-Big: " + strings.Repeat("a", 20000)}, "--header is 20007 bytes; the longest tare sends is 16384"},
		{"huge body", []string{"run", "--url", url, "--body", "@" + hugeFile(t)}, "is 65 MiB; the largest body tare sends is 64 MiB"},
		{"two targets", []string{"run", "--url", url, "--model", url}, "give one target"},
		{"bad model url", []string{"run", "--model", "not a url"}, "--model"},
		{"model max tokens", []string{"run", "--model", url, "--max-tokens", "-3"}, "--max-tokens must be 0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := tareCmd(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("stderr has a stack trace: %s", stderr)
			}
		})
	}
	if hits != 0 {
		t.Errorf("bad input sent %d requests; want none", hits)
	}
}

// TestRunRefusedTargetIsAMeasurement: a target that refuses connections is
// measured, not an error: every request counted as refused, exit 0.
func TestRunRefusedTargetIsAMeasurement(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/"
	srv.Close() // nothing listens there now
	code, stdout, stderr := tareCmd(t, "run", "--url", url, "--rate", "100/s", "--jobs", "20", "--quiet", "--json", "--tick", "100ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary json: %v\n%s", err, stdout)
	}
	if s.Requests.Total != 20 || s.Requests.Errors != 20 || s.ErrorKinds["refused"] != 20 {
		t.Errorf("requests %+v kinds %v; want 20 refused", s.Requests, s.ErrorKinds)
	}
}

func TestRunJSON(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.Header.Get("X-Test") != "yes" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "-H", "X-Test: yes", "-H", "Authorization: Bearer s3cret-token",
		"--rate", "200/s", "--jobs", "100", "--arrival", "constant", "--quiet", "--json", "--tick", "100ms", "--label", "json-test")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary json: %v\n%s", err, stdout)
	}
	if s.Schema != tare.SummarySchema || s.Run.Label != "json-test" || s.Run.Status != tare.StatusComplete {
		t.Errorf("schema %q run %+v", s.Schema, s.Run)
	}
	if s.Requests.Total != 100 || s.Requests.OK != 100 || hits != 100 {
		t.Errorf("requests %+v, server saw %d; want 100 ok", s.Requests, hits)
	}
	if s.Latency.P99 == nil || s.Service.P99 == nil || s.SendLag.P99 == nil || s.Host.Steal.Mean == nil {
		t.Errorf("missing figures: latency %+v service %+v lag %+v steal %+v", s.Latency, s.Service, s.SendLag, s.Host.Steal)
	}
	if *s.Latency.P99 < *s.Service.P50 {
		t.Errorf("latency p99 %v below service p50 %v", *s.Latency.P99, *s.Service.P50)
	}
	if strings.Contains(stdout, "s3cret-token") || strings.Contains(stderr, "s3cret-token") {
		t.Errorf("the Authorization header leaked into the output")
	}
	if s.Run.Config["header"] == "" || !strings.Contains(s.Run.Config["header"], "Authorization: [redacted]") {
		t.Errorf("config %q: want the header recorded with its value redacted", s.Run.Config["header"])
	}
}

// TestRunTTFB: a plain HTTP target's first answer is judged as what it
// is, the time to the first byte: ttfb in the summary, an SLO on it, and
// goodput against it.
func TestRunTTFB(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // the rest comes later
		w.Write([]byte(" and the rest"))
	}))
	defer srv.Close()
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "100/s", "--jobs", "30", "--slo", "ttfb<=10s",
		"--quiet", "--json", "--no-store", "--tick", "100ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.TTFB == nil || s.TTFB.P95 == nil || s.Model != nil {
		t.Fatalf("ttfb %+v, model %+v: want the first byte's figures and no model's", s.TTFB, s.Model)
	}
	if *s.TTFB.P95 >= *s.Latency.P95 {
		t.Errorf("ttfb p95 %.1f ms, latency p95 %.1f ms: the first byte came 20 ms before the rest", *s.TTFB.P95, *s.Latency.P95)
	}
	if c := s.Verdict.SLO; len(c) != 1 || c[0].Objective != "ttfb<=10s" || c[0].Value == nil || *c[0].Value != *s.TTFB.P95 || !c[0].Met {
		t.Errorf("SLO checks %+v: want ttfb<=10s against the ttfb p95 %v, met", c, *s.TTFB.P95)
	}
	if g := s.Goodput; g == nil || g.SLO != "ttfb<=10s" || g.Met != 30 {
		t.Errorf("goodput %+v: want all 30 within ttfb<=10s", g)
	}
}

// TestRunNetHTTP: --net-http reaches the target on goroutines through
// net/http, and without it the event loop does; the summary says which,
// and the connections of both, with a response head larger than a read
// (32 KB) read by both.
func TestRunNetHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Large", strings.Repeat("v", 32<<10))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		flags   []string
		engine  string
		engines int
	}{
		{[]string{"--engines", "2"}, "event loop", 2},
		{[]string{"--net-http"}, "goroutines", 0},
	} {
		args := append([]string{"run", "--url", srv.URL + "/", "--rate", "200/s", "--jobs", "20", "--quiet", "--json", "--no-store"}, tt.flags...)
		code, stdout, stderr := tareCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d; stderr %s", tt.flags, code, stderr)
		}
		var s tare.Summary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("summary json: %v\n%s", err, stdout)
		}
		if s.Requests.OK != 20 || s.Requests.Errors != 0 {
			t.Errorf("%v: %d ok, %d errors; want 20, 0", tt.flags, s.Requests.OK, s.Requests.Errors)
		}
		// Either way the HTTP target counts its connections.
		if g := s.Generator; g.Engine != tt.engine || g.Engines != tt.engines || g.Connections < 1 || g.ConnectionUse == nil {
			t.Errorf("%v: generator %+v; want engine %q ×%d, and its connections", tt.flags, g, tt.engine, tt.engines)
		}
	}
}

// TestRunPoissonAchievesOffered: 1,000 Poisson arrivals at 200/s against a
// loopback server, all served: the achieved rate is the offered one but
// for the run's tail, which its slowest request measures. Open loop, a
// generator that falls behind catches up, and its lag is in the latency
// (counted from the scheduled time); a closed loop, or latency counted
// from the send, would leave the run longer than its latencies say.
func TestRunPoissonAchievesOffered(t *testing.T) {
	if testing.Short() {
		t.Skip("5 s of load; skipped with -short")
	}
	// Not beside the tests that load the machine on purpose.
	interfere.Exclusive(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "200/s", "--jobs", "1000", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	offered, achieved, slowest := *s.Rate.Offered, *s.Rate.Achieved, *s.Latency.Max/1000
	// offered = n / the arrivals' span (to one mean gap past the last);
	// achieved = n / the run's wall, which ends after the last request's
	// answer: after the last arrival (a gap, 0.1 %, before the span's
	// end), and no later than its slowest request after the span, give
	// or take the run's own start and end (5 % of the span).
	span, wall := n/offered, n/achieved
	t.Logf("offered %.1f/s achieved %.1f/s: wall %.3f s, span %.3f s, slowest request %.3f s; send lag p99 %.2f ms", offered, achieved, wall, span, slowest, *s.SendLag.P99)
	if s.Requests.OK != n {
		t.Errorf("requests %+v, want %d ok", s.Requests, n)
	}
	if wall < span*0.99 || wall > span*1.05+slowest {
		t.Errorf("achieved %.1f/s of the offered %.1f/s: the run took %.3f s for arrivals over %.3f s whose slowest request took %.3f s; want the arrivals' span plus at most that tail", achieved, offered, wall, span, slowest)
	}
}

// TestInterruptKeepsTheMeasurement: cancelling a run (what Ctrl-C does)
// stops the arrivals and still prints the summary, marked interrupted.
func TestInterruptKeepsTheMeasurement(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"run", "--url", srv.URL + "/", "--rate", "50/s", "--duration", "1m", "--quiet", "--json", "--tick", "100ms"}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	var s tare.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, out.String())
	}
	if s.Run.Status != tare.StatusInterrupted {
		t.Errorf("status %q, want interrupted", s.Run.Status)
	}
	if s.Requests.Total == 0 || s.Requests.Total > 200 || s.Requests.OK != s.Requests.Total {
		t.Errorf("requests %+v: want the ~75 sent before the interrupt, all ok", s.Requests)
	}
	if o := s.Rate.Offered; o == nil || *o < 25 || *o > 100 {
		t.Errorf("offered rate %v: want it counted over the time the arrivals ran (~50/s)", o)
	}
}

// TestDrainZeroIsNone: --drain 0 means no drain: on Ctrl-C the requests
// in flight are cancelled at once, not given the default 10 s. The
// service answers each half a default drain after it came: a drain would
// see answers, none sees none.
func TestDrainZeroIsNone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(load.DefaultDrain / 2):
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"run", "--url", srv.URL + "/", "--rate", "20/s", "--duration", "1m", "--drain", "0", "--quiet", "--json", "--no-store", "--tick", "100ms"},
		strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	var s tare.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, out.String())
	}
	if s.Run.Status != tare.StatusInterrupted || s.Requests.Total == 0 || s.Requests.OK != 0 {
		t.Errorf("status %s, requests %+v: want interrupted, every request cut short (one answered: --drain 0 drained)", s.Run.Status, s.Requests)
	}
}

func TestCompletion(t *testing.T) {
	code, stdout, _ := tareCmd(t, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "__start_tare") {
		t.Errorf("completion bash: exit %d, %d bytes", code, len(stdout))
	}
}

// TestRunModel loads the simulated model through the OpenAI-compatible
// client: TTFT, TPOT, tokens and goodput against a per-request SLO.
func TestRunModel(t *testing.T) {
	srv := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 16})
	t.Setenv("TARE_API_KEY", "sk-test-secret-key")
	code, stdout, stderr := tareCmd(t, "run", "--model", srv.URL+"/v1", "--rate", "20/s", "--jobs", "30", "--max-tokens", "16",
		"--slo", "ttft<=10s,e2e<=20s", "--quiet", "--json", "--tick", "100ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Model == nil || s.Model.OutputTokens != 30*16 || s.Model.TTFT.P50 == nil || s.Model.TPOT.P50 == nil || *s.Model.TPOT.P50 <= 0 {
		t.Fatalf("model figures %+v, want 480 tokens, TTFT and TPOT", s.Model)
	}
	if g := s.Goodput; g == nil || g.Met != 30 || *g.AttainmentPct != 100 {
		t.Errorf("goodput %+v, want all 30 within a generous SLO", g)
	}
	if strings.Contains(stdout+stderr, "sk-test-secret-key") {
		t.Errorf("the API key leaked into the output")
	}
}

// hugeFile is a sparse file just over the largest body tare sends.
func hugeFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "huge.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(65 << 20); err != nil {
		t.Fatal(err)
	}
	return path
}
