package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/abservice"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestABBadInput: a mistake in tare ab's flags exits 2 naming the flag,
// before any request reaches either variant.
func TestABBadInput(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	url := srv.URL + "/"
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no B", []string{"--a", url}, "tare ab needs both variants: --a URL and --b URL"},
		{"fail-on slo", []string{"--a", url, "--b", url, "--fail-on", "slo"}, `--fail-on must be regression (tare ab fails on B slower than A); got "slo"`},
		{"mode", []string{"--a", url, "--b", url, "--mode", "sequential"}, `--mode must be interleaved or duet; got "sequential"`},
		{"on", []string{"--a", url, "--b", url, "--on", "p90"}, `--on must be one of p50, p95, p99, ttft_p95, tpot_p95; got "p90"`},
		{"one pair", []string{"--a", url, "--b", url, "--trials", "1"}, "--trials must be at least 2"},
		{"tolerance", []string{"--a", url, "--b", url, "--tolerance", "0"}, "--tolerance must be a percentage above 0"},
		{"precision", []string{"--a", url, "--b", url, "--precision", "-1"}, "--precision must be 0 (run every pair)"},
		{"negative trial", []string{"--a", url, "--b", url, "--trial", "-1s"}, "--trial must be 0 (chosen from --rate) or more"},
		{"bad B", []string{"--a", url, "--b", "http://ho st/"}, "variant B: --b must look like http://host:port/path"},
		{"B's header", []string{"--a", url, "--b", url, "--b-header", "nocolon"}, "--header"},
		{"url", []string{"--a", url, "--b", url, "--url", url}, "unknown flag: --url"},
		{"as", []string{"--a", url, "--b", url, "--as", "queue"}, `--as must be url or model; got "queue"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"ab", "--no-store", "--quiet"}, tt.args...)
			code, _, stderr := tareCmd(t, args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("tare %s: exit %d, stderr %q; want 2 and %q", strings.Join(args, " "), code, stderr, tt.want)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the variants, want none", n)
	}
}

// TestABFailOnRegression: tare ab --json --fail-on regression against a
// B with five times A's work prints tare.ab/v1 with the result b_slower,
// each trial stored as a run, and exits 1; B against A itself does not.
func TestABFailOnRegression(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 12 trials of real load: not with -short")
	}
	interfere.Exclusive(t)
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "ab.db"))
	units := abservice.UnitsFor(time.Millisecond)
	a, b := abservice.Start(2*units), abservice.Start(10*units)
	defer a.Close()
	defer b.Close()
	code, stdout, stderr := tareCmd(t, "ab", "--a", a.URL+"/", "--b", b.URL+"/", "--rate", "100/s", "--trial", "1s", "--trials", "4",
		"--on", "p50", "--fail-on", "regression", "--json", "--quiet", "--label", "regress", "--tick", "250ms")
	var got tare.AB
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s\nstderr: %s", err, stdout, stderr)
	}
	if code != 1 || got.Schema != tare.ABSchema || got.Result != tare.ABSlower || !strings.Contains(stderr, "B is slower than A by more than 5 %") {
		t.Fatalf("exit %d, schema %q, result %s (%s), stderr %q; want 1, %s, b_slower", code, got.Schema, got.Result, got.Verdict, stderr, tare.ABSchema)
	}
	if len(got.Pairs) != 4 || got.Pairs[0].A.RunID == "" || got.Pairs[0].B.RunID == "" {
		t.Fatalf("%d pairs, first run ids %q, %q: want 4 pairs, each trial stored", len(got.Pairs), got.Pairs[0].A.RunID, got.Pairs[0].B.RunID)
	}
	code, out, _ := tareCmd(t, "runs", "show", got.Pairs[0].B.RunID)
	if code != 0 || !strings.Contains(out, "regress/b1") {
		t.Errorf("tare runs show of B's first trial: exit %d, want 0 and its label regress/b1:\n%s", code, out)
	}
}

// TestABModels: tare ab --as model compares two model endpoints, TTFT
// and TPOT too: B, whose every token costs four times A's, comes out
// slower on TPOT (its estimate; the interval of 4 pairs on a busy host
// may still hold 1).
func TestABModels(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 6 trials of real load: not with -short")
	}
	interfere.Exclusive(t)
	a := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 8})
	b := testservice.Model(t, modelsim.Config{TokenCost: 800 * time.Microsecond, MeanTokens: 8})
	code, stdout, stderr := tareCmd(t, "ab", "--as", "model", "--a", a.URL+"/v1", "--b", b.URL+"/v1", "--max-tokens", "8",
		"--rate", "20/s", "--trial", "1s", "--trials", "4", "--on", "tpot_p95", "--json", "--quiet", "--no-store", "--tick", "250ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got tare.AB
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	metrics := map[string]*float64{}
	for _, r := range got.Ratios {
		metrics[r.Metric] = r.Ratio
	}
	if metrics["ttft_p95"] == nil || metrics["tpot_p95"] == nil || got.On != "tpot_p95" {
		t.Fatalf("ratios %+v on %s: want ttft_p95 and tpot_p95, decided on tpot_p95", got.Ratios, got.On)
	}
	if r := *metrics["tpot_p95"]; r <= 1 || got.Result == tare.ABFaster {
		t.Errorf("TPOT p95 of B/A %.3f, result %s (%s): want B slower", r, got.Result, got.Verdict)
	}
}
