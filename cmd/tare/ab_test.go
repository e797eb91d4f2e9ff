package main

import (
	"context"
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
	"github.com/tare-dev/tare/store"
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
		{"on", []string{"--a", url, "--b", url, "--on", "p90"}, `--on must be one of p50, p95, p99, ttft_p95, tpot_p95, unwaited_p50, unwaited_p95, unwaited_p99; got "p90"`},
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
	code, stdout, stderr := tareCmd(t, "ab", "--a", a.URL+"/", "--b", b.URL+"/", "--rate", "100/s", "--trial", "1s", "--trials", "6",
		"--on", "p50", "--fail-on", "regression", "--json", "--quiet", "--label", "regress", "--tick", "250ms")
	var got tare.AB
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s\nstderr: %s", err, stdout, stderr)
	}
	if code != 1 || got.Schema != tare.ABSchema || got.Result != tare.ABSlower || !strings.Contains(stderr, "B is slower than A by more than 5 %") {
		t.Fatalf("exit %d, schema %q, result %s (%s), stderr %q; want 1, %s, b_slower", code, got.Schema, got.Result, got.Verdict, stderr, tare.ABSchema)
	}
	if len(got.Pairs) != 6 || got.Pairs[0].A.RunID == "" || got.Pairs[0].B.RunID == "" {
		t.Fatalf("%d pairs, first run ids %q, %q: want 6 pairs, each trial stored", len(got.Pairs), got.Pairs[0].A.RunID, got.Pairs[0].B.RunID)
	}
	code, out, _ := tareCmd(t, "runs", "show", got.Pairs[0].B.RunID)
	if code != 0 || !strings.Contains(out, "regress/b1") {
		t.Errorf("tare runs show of B's first trial: exit %d, want 0 and its label regress/b1:\n%s", code, out)
	}
	// The A/B run itself is kept: listed, and shown as tare ab printed it.
	if got.ID == "" {
		t.Fatal("the A/B run has no id: it was not stored")
	}
	if code, out, stderr := tareCmd(t, "runs", "show", got.ID, "--json"); code != 0 || out != stdout {
		t.Errorf("tare runs show %s --json: exit %d (%s), want 0 and what tare ab printed:\n%s\nwant\n%s", got.ID, code, stderr, out, stdout)
	}
	code, out, _ = tareCmd(t, "runs", "list", "--label", "regress")
	if line := lineWith(out, got.ID); code != 0 || !strings.Contains(line, " ab ") || !strings.Contains(line, "b_slower") {
		t.Errorf("tare runs list: exit %d, want the A/B run's line with kind ab and its result b_slower:\n%s", code, out)
	}
}

// TestRunsShowAB: a stored A/B run is listed with kind ab among the runs,
// tare runs show prints it as tare ab did (the golden), its JSON the
// tare.ab/v1, and tare report draws its pairs; runs export names its
// trials instead, runs delete removes it; an unknown id still says no run
// is stored.
func TestRunsShowAB(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ab.db")
	t.Setenv("TARE_DB", db)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ab := goldenAB()
	if err := st.SaveAB(ctx, ab); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, stdout, stderr := tareCmd(t, "runs", "show", ab.ID[:8])
	if code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr)
	}
	golden(t, "runs-show-ab.stdout", stdout)
	code, stdout, stderr = tareCmd(t, "runs", "show", ab.ID, "--json")
	var back tare.AB
	if err := json.Unmarshal([]byte(stdout), &back); code != 0 || err != nil || back.ID != ab.ID || back.Schema != tare.ABSchema || len(back.Pairs) != 2 {
		t.Fatalf("runs show --json: exit %d (%s), %v: %+v", code, stderr, err, back)
	}
	code, stdout, _ = tareCmd(t, "runs", "list")
	if line := lineWith(stdout, ab.ID); code != 0 || !strings.Contains(line, " ab ") || !strings.Contains(line, "p95 B +8.2%") {
		t.Errorf("runs list: exit %d, want the A/B run with kind ab and B against A on p95:\n%s", code, stdout)
	}
	code, stdout, stderr = tareCmd(t, "report", ab.ID[:8], "-o", "-")
	if code != 0 || !strings.Contains(stdout, `id="svg-ab-pairs"`) || !strings.Contains(stdout, "A/B run checkout") {
		t.Errorf("tare report of the A/B run: exit %d (%s), want its paired trials drawn", code, stderr)
	}
	if code, _, stderr := tareCmd(t, "runs", "export", ab.ID); code != 2 || !strings.Contains(stderr, "is an A/B run") || !strings.Contains(stderr, "run-b2") {
		t.Errorf("runs export of the A/B run: exit %d, want 2 naming its trials: %s", code, stderr)
	}
	if code, stdout, stderr := tareCmd(t, "runs", "delete", "--yes", ab.ID); code != 0 || !strings.Contains(stdout, "deleted A/B run") {
		t.Errorf("runs delete of the A/B run: exit %d: %s%s", code, stdout, stderr)
	}
	if code, _, _ := tareCmd(t, "runs", "show", ab.ID); code != 2 {
		t.Errorf("runs show of the deleted A/B run: exit %d, want 2", code)
	}
	if code, _, stderr := tareCmd(t, "runs", "show", "ffffffff"); code != 2 || !strings.Contains(stderr, "no stored run") {
		t.Errorf("runs show of an unknown id: exit %d: %s", code, stderr)
	}
}

// goldenAB is a stored A/B run of two pairs, B 8 % slower on p95, one
// trial of A polluted.
func goldenAB() tare.AB {
	f := func(v float64) *float64 { return &v }
	start := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	trial := func(id string, p50 float64, level tare.Level) tare.ABTrial {
		return tare.ABTrial{RunID: id, StartedAt: start, Requests: 300, Verdict: level, Hit: level == tare.Polluted,
			Latency: tare.LatencyMS{P50: f(p50), P95: f(2 * p50), P99: f(3 * p50)}}
	}
	return tare.AB{Schema: tare.ABSchema, ID: "0193a0b0-0000-7000-8000-00000000ab01", Mode: tare.ABInterleaved, Label: "checkout", Seed: 1,
		A: tare.ABVariant{Target: "GET http://127.0.0.1:8080/"}, B: tare.ABVariant{Target: "GET http://127.0.0.1:8081/"},
		TrialS: 6, RatePerS: 50, On: "p95", TolerancePct: 5, ConfidencePct: 95,
		Pairs: []tare.ABPair{
			{N: 1, First: "b", A: trial("run-a1", 10, tare.Polluted), B: trial("run-b1", 10.9, tare.Clean), Ratios: map[string]*float64{"p95": f(1.09)}},
			{N: 2, First: "a", A: trial("run-a2", 11, tare.Clean), B: trial("run-b2", 11.8, tare.Clean), Ratios: map[string]*float64{"p95": f(1.073)}},
		},
		Ratios:       []tare.ABRatio{{Metric: "p95", Pairs: 2, Ratio: f(1.082), RatioLow: f(1.049), RatioHigh: f(1.116), DiffPct: f(8.2), DiffLowPct: f(4.9), DiffHighPct: f(11.6)}},
		Interference: tare.ABNoise{HitA: 1, OneSided: 1, Detail: "1 of A's and 0 of B's 2 trials were polluted; in 1 pair one side was hit and the other not"},
		Result:       tare.ABSlower, Verdict: "B is slower: p95 +8.2 % (95 % CI +4.9 to +11.6 %)",
		StartedAt: start, EndedAt: start.Add(30 * time.Second), Status: string(tare.StatusComplete)}
}

// lineWith is the line of out that holds s, or "".
func lineWith(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestABModels: tare ab --as model compares two model endpoints, TTFT
// and TPOT too: B, whose every token costs four times A's, comes out
// slower on TPOT (its estimate; 4 pairs cannot bound the interval at
// 95 %, so the result is inconclusive, never faster).
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
