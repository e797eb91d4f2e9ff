package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/store"
)

// writePlan writes a plan file into a fresh directory and returns its path.
func writePlan(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProtocolNow runs a plan's three windows back to back against a
// loopback server with a tiny load, stores them under a protocol id of
// their own, and compares them, per-tick tests included.
func TestProtocolNow(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "tare.db"))
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Plan") != "yes" || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	plan := writePlan(t, "shop.yaml", fmt.Sprintf(`url: %s/checkout
method: POST
header: ["X-Plan: yes"]
body: '{"cart": 1}'
rate: 100/s
jobs: 60
arrival: constant
tick: 100ms
slo: p95<=2s
thresholds: {divergence: 1000}
`, srv.URL))
	code, stdout, stderr := tareCmd(t, "protocol", "run", plan, "--now", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "dry run of") {
		t.Errorf("stderr %q: want the dry run announced", stderr)
	}
	var c tare.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("comparison: %v\n%s", err, stdout)
	}
	if hits.Load() != 180 {
		t.Errorf("the server saw %d requests, want 3 windows of 60", hits.Load())
	}
	var windows []string
	for _, r := range c.Runs {
		windows = append(windows, r.Window)
		if r.Requests != 60 || r.Verdict == "" {
			t.Errorf("run %s: %d requests, verdict %q", r.Window, r.Requests, r.Verdict)
		}
	}
	if strings.Join(windows, ",") != "peak,offpeak,mid" || !strings.HasPrefix(c.Protocol, "shop-dry-") {
		t.Errorf("windows %v protocol %q: want peak, offpeak, mid of shop-dry-…", windows, c.Protocol)
	}
	if len(c.Tests) != 3 || c.Tests[0].PValue == nil {
		t.Errorf("tests %+v: want three window pairs tested on per-tick p95", c.Tests)
	}
	// Whether sub-millisecond windows on a busy test machine agree is the
	// machine's business (judge's tests pin the verdict); the plan's
	// threshold and SLO must reach it.
	if c.Verdict.Level == "" || c.Verdict.ThresholdPct != 1000 || len(c.Verdict.SLO) != 3 {
		t.Errorf("verdict %+v: want a verdict at the plan's 1000%% threshold, the SLO checked in 3 windows", c.Verdict)
	}
	if !strings.Contains(strings.Join(c.Warnings, " "), "a dry run") {
		t.Errorf("warnings %q: want the comparison labelled a dry run", c.Warnings)
	}

	// The runs are stored with the dry-run protocol id and their windows.
	code, stdout, _ = tareCmd(t, "runs", "list", "--protocol", c.Protocol, "--json")
	var runs []tare.Run
	if code != 0 || json.Unmarshal([]byte(stdout), &runs) != nil || len(runs) != 3 {
		t.Fatalf("runs list: exit %d, %d runs:\n%s", code, len(runs), stdout)
	}
	for _, r := range runs {
		if !strings.HasPrefix(r.Label, "dry run") || r.Config["protocol.dry_run"] != "true" || r.Config["header"] != "X-Plan: yes" {
			t.Errorf("run %s: label %q config %v", r.Window, r.Label, r.Config)
		}
	}
	// compare reads runs back by id (a unique prefix will do) and by
	// protocol id; status by protocol id.
	if code, stdout, stderr := tareCmd(t, "compare", runs[0].ID[:20], runs[1].ID); code != 0 || !strings.Contains(stdout, "comparison of 2 runs") ||
		!strings.Contains(stdout, "Mann-Whitney") {
		t.Errorf("compare two run ids: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := tareCmd(t, "compare", c.Protocol); code != 0 || !strings.Contains(stdout, "comparison of 3 runs") {
		t.Errorf("compare %s: exit %d\n%s", c.Protocol, code, stdout)
	}
	if code, stdout, _ := tareCmd(t, "protocol", "status", c.Protocol); code != 0 || !strings.Contains(stdout, "a dry run") {
		t.Errorf("status: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := tareCmd(t, "protocol", "status"); code != 0 || !strings.Contains(stdout, c.Protocol) {
		t.Errorf("status list: exit %d\n%s", code, stdout)
	}
}

// clockPlan writes a plan whose windows sit around now in UTC: the peak
// opens within the hour after the next, so tare has to wait for it.
func clockPlan(t *testing.T, url string, now time.Time) string {
	t.Helper()
	span := func(from, to int) string {
		h := func(d int) string { return fmt.Sprintf("%02d:00", (now.Hour()+24+d)%24) }
		return h(from) + "-" + h(to)
	}
	return writePlan(t, "waits.yaml", fmt.Sprintf("url: %s\nrate: 10/s\njobs: 5\ntz: UTC\nwindows:\n  peak: %s\n  offpeak: %s\n", url, span(2, 4), span(6, 8)))
}

// TestProtocolCtrlCWhileWaiting: Ctrl-C while waiting for a window stops
// cleanly, says how to carry on, and sends nothing.
func TestProtocolCtrlCWhileWaiting(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "tare.db"))
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	plan := clockPlan(t, srv.URL, time.Now().UTC())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out, errb strings.Builder
	err := run(ctx, []string{"protocol", "run", plan}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	for _, want := range []string{"waiting: the peak window (day 1) starts its run at", "stopped. Run the same command again to carry on"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent while waiting", hits.Load())
	}
}

// TestProtocolStatus reads a protocol's slots back from the store: one
// window done, one waiting, one missed.
func TestProtocolStatus(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tare.db")
	t.Setenv("TARE_DB", db)
	now := time.Now().UTC().Truncate(time.Minute)
	h := func(d int) time.Duration { return time.Duration((now.Hour()+24+d)%24) * time.Hour }
	sched := protocol.Schedule{Protocol: "shop", Days: 1, Location: time.UTC, Seed: 1, RunLength: 10 * time.Minute, Windows: []tare.Window{
		{Name: "peak", From: h(-1), To: h(1)},   // open now: done below
		{Name: "offpeak", From: h(3), To: h(5)}, // to come
		{Name: "mid", From: h(-3), To: h(-2)},   // closed before the peak's run: tomorrow's counts
	}}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	run := tare.Run{ID: store.NewRunID(), Label: "shop", Window: "peak", Protocol: "shop", Target: "GET http://127.0.0.1:9/", StartedAt: now.Add(-5 * time.Minute), Status: tare.StatusRunning, Config: sched.Config()}
	if err := st.CreateRun(ctx, run, tare.Env{}); err != nil {
		t.Fatal(err)
	}
	run.Status = tare.StatusComplete
	if err := st.FinishRun(ctx, tare.Summary{Schema: tare.SummarySchema, Run: run}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, stdout, stderr := tareCmd(t, "protocol", "status", "shop")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"peak     1    " + run.StartedAt.Format("2006-01-02 15:04") + "  done     " + run.ID, "offpeak  1", "waiting", "next: the offpeak window, day 1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := tareCmd(t, "protocol", "status", "nosuch"); code != 2 || !strings.Contains(stderr, `no runs of protocol "nosuch"`) {
		t.Errorf("unknown protocol: exit %d: %s", code, stderr)
	}
}

func TestProtocolCron(t *testing.T) {
	plan := writePlan(t, "checkout.yaml", "url: http://127.0.0.1:8080/\nrate: 2/s\njobs: 500\ntz: Europe/Paris\ndays: 3\nwindows: {peak: 14:30-16:00, offpeak: 02:00-04:00, mid: 08:00-10:00}\n")
	code, stdout, stderr := tareCmd(t, "protocol", "cron", plan, "--db", "/var/lib/tare/tare.db")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	exe, _ := os.Executable()
	stdout = strings.ReplaceAll(stdout, exe, "/usr/local/bin/tare")
	stdout = strings.ReplaceAll(stdout, filepath.Dir(plan), "/etc/tare")
	golden(t, "protocol-cron.stdout", stdout)
}

// TestRetiredThreshold: thresholds.generator-delay, which no longer does
// anything, is ignored with a warning naming its line and what judges
// instead, as its flag is; it is no threshold to use in the error about a
// misspelt one.
func TestRetiredThreshold(t *testing.T) {
	const base = "url: http://127.0.0.1:8080/\nrate: 2/s\njobs: 50\n"
	plan := writePlan(t, "plain.yaml", base)
	_, want, _ := tareCmd(t, "protocol", "cron", plan)
	if err := os.WriteFile(plan, []byte(base+"thresholds:\n  steal: 12\n  generator-delay: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := tareCmd(t, "protocol", "cron", plan)
	if code != 0 || stdout != want {
		t.Errorf("exit %d, stdout %q; want 0 and what the plan without the key gives, %q (stderr %s)", code, stdout, want, stderr)
	}
	const why = "no longer used, and ignored: tare's own wait for a CPU changes the figures only through send lag, which --send-lag-threshold (thresholds.send-lag) judges; remove it"
	if !strings.Contains(stderr, "line 6, key thresholds.generator-delay: "+why) {
		t.Errorf("stderr %q: want the warning naming line 6", stderr)
	}
	code, _, stderr = tareCmd(t, "protocol", "cron", writePlan(t, "typo.yaml", base+"thresholds:\n  stael: 12\n"))
	if code != 2 || !strings.Contains(stderr, `unknown threshold "stael"; use one of latency-factor`) || strings.Contains(stderr, "generator-delay") {
		t.Errorf("exit %d, stderr %q: want 2, the thresholds to use, and not generator-delay among them", code, stderr)
	}
	code, _, stderr = tareCmd(t, "check", "--for", "1s", "--tick", "500ms", "--generator-delay-threshold", "5")
	if code == 2 || !strings.Contains(stderr, "Flag --generator-delay-threshold has been deprecated, tare's own wait for a CPU") {
		t.Errorf("check --generator-delay-threshold: exit %d, stderr %q: want it accepted, deprecated with why", code, stderr)
	}
}

// TestProtocolBadPlan: a bad plan exits 2 naming the line and the key,
// before any load is sent.
func TestProtocolBadPlan(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	url := "url: " + srv.URL + "\n"
	tests := []struct {
		name, plan, want string
		args             []string
	}{
		{"rate", url + "rate: fast\n", `line 2, key rate: rate must look like 200/s, 12/m or 3/h; got "fast"`, nil},
		{"duration", url + "duration: soon\n", `line 2, key duration: duration must be a duration like 30s, 1m30s or 250ms; got "soon"`, nil},
		{"jobs negative", url + "jobs: -4\n", "line 2, key jobs: jobs must be 0 or more; got -4", nil},
		{"threshold", url + "thresholds:\n  steal: 150\n", "line 3, key thresholds.steal: steal must be a percentage from 0 to 100; got 150", nil},
		{"slo", url + "slo: fast\n", "line 2, key slo: slo: SLO objective must look like p95<=2s", nil},
		{"url", "url: ftp://127.0.0.1/\n", `line 1, key url: url must start with http:// or https://`, nil},
		{"unknown key", url + "rps: 5\n", `line 2, key rps: unknown key "rps"`, nil},
		{"load too long for the window", url + "duration: 3h\n", "the load takes", nil},
		{"sweep without slo", url + "sweep: {from: 1/s, to: 5/s}\n", "key sweep: a sweep needs an slo:", nil},
		{"sweep rate", url + "slo: p95<=1s\nsweep:\n  from: 1/s\n  to: lots\n", `line 5, key sweep.to: rate must look like 200/s`, nil},
		{"no such plan", "", `no plan file`, []string{"protocol", "run", "/nonexistent/plan.yaml"}},
		{"window flag", url, `--window must be peak, offpeak or mid; got "noon"`, []string{"--window", "noon"}},
		{"tz flag", url, `--tz: time zone "Nowhere" is not an IANA name`, []string{"--tz", "Nowhere"}},
		{"days flag", url, "--days must be from 1 to 366; got 400", []string{"--days", "400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.plan != "" {
				args = append([]string{"protocol", "run", writePlan(t, "p.yaml", tt.plan), "--now"}, tt.args...)
			}
			code, _, stderr := tareCmd(t, args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("bad plans sent %d requests", hits.Load())
	}
}

// TestProtocolNowSweep: a plan with a sweep: section sweeps the rate in
// each window; the comparison's capacity range is in requests per second.
func TestProtocolNowSweep(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "tare.db"))
	// A fast service and a generous SLO: the test is of the plumbing, and
	// must hold on a machine that other tests keep busy.
	srv := oneAtATime(time.Millisecond)
	defer srv.Close()
	plan := writePlan(t, "sweep.yaml", fmt.Sprintf(`url: %s
duration: 1s
arrival: constant
tick: 100ms
slo: p95<=500ms
sweep: {from: 30/s, to: 60/s, step: 30/s, narrow: 0, cooldown: 0s}
windows: {peak: 14:00-16:00, offpeak: 02:00-04:00}
`, srv.URL))
	code, stdout, stderr := tareCmd(t, "protocol", "run", plan, "--now", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	var c tare.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("comparison: %v\n%s", err, stdout)
	}
	if len(c.Sweeps) != 2 || c.Capacity.Metric != "rate_per_s" || c.Capacity.Best == nil || c.Capacity.Worst == nil {
		t.Fatalf("sweeps %+v capacity %+v: want two sweeps and a range in requests per second", c.Sweeps, c.Capacity)
	}
	for _, s := range c.Sweeps {
		if s.Steps != 2 || s.CapacityPerS == nil || *s.CapacityPerS != 60 || !s.AtLeast {
			t.Errorf("sweep %+v: want 2 steps that held, capacity at least 60/s", s)
		}
	}
	if len(c.Runs) != 2 || c.Runs[0].Window != "peak" || c.Runs[1].Window != "offpeak" {
		t.Errorf("runs %+v: want the highest step of each window", c.Runs)
	}
}

// TestGoldenProtocolHelp pins the help of the commands of the protocol.
func TestGoldenProtocolHelp(t *testing.T) {
	for _, args := range [][]string{{"compare"}, {"sweep"}, {"protocol"}, {"protocol", "run"}, {"protocol", "cron"}, {"protocol", "status"}} {
		name := strings.Join(args, "-") + "-help"
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, append(args, "--help")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			golden(t, name+".stdout", stdout)
		})
	}
}

// TestProtocolBodyBesideThePlan: a plan's body: @file is read from the
// plan's directory, wherever tare runs from (cron starts it in $HOME).
func TestProtocolBodyBesideThePlan(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "tare.db"))
	var bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		if string(b[:n]) != `{"order": 7}` {
			bad.Add(1)
		}
	}))
	defer srv.Close()
	plan := writePlan(t, "order.yaml", fmt.Sprintf("url: %s\nbody: '@order.json'\nrate: 100/s\njobs: 3\ntick: 100ms\nwindows: {peak: 14:00-16:00, mid: 08:00-10:00}\n", srv.URL))
	if err := os.WriteFile(filepath.Join(filepath.Dir(plan), "order.json"), []byte(`{"order": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := tareCmd(t, "protocol", "run", plan, "--now", "--quiet", "--json")
	if code != 0 || bad.Load() != 0 {
		t.Errorf("exit %d, %d requests with the wrong body; stderr %s", code, bad.Load(), stderr)
	}
}
