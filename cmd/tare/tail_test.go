package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/modelsim"
)

// TestCodesOwnFiguresBesideAHog: a service pinned to CPU 0 measured
// quiet, then beside a hog that holds CPU 0 half of the time. The
// polluted run's own figures for the code (its requests that overlapped
// no outside wait, tail.quiet_ms) are the quiet run's p50 and p99 within
// 20 %, while its figures over every request are not: per-request blame
// measures what the code does on a quiet host from a polluted run.
//
// Its quiet run must be quiet, so it runs only with TARE_SCENARIOS=1, by
// hand: it is out of CI's gate while it is right 2 runs in 3 (the third
// gave the code's own p99 at 0.75× the quiet run's: the requests slow
// on their own are likelier to overlap the hog, and leave the figure).
func TestCodesOwnFiguresBesideAHog(t *testing.T) {
	if os.Getenv("TARE_SCENARIOS") != "1" {
		t.Skip("needs the machine to itself: scripts/test runs it alone after the suite (or set TARE_SCENARIOS=1)")
	}
	probeHere(t)
	interfere.Exclusive(t)
	c := exec.CommandContext(t.Context(), "taskset", "-c", "0", os.Args[0], "model", "--listen", "127.0.0.1:0",
		"--token-cost", "1ms", "--mean-tokens", "2", "--token-spread", "0")
	c.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
	svc, err := modelsim.Start(c, 30*time.Second, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	run := func() tare.Summary {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "taskset", "-c", "1", os.Args[0], "run", "--model", svc.URL, "--max-tokens", "2",
			"--rate", "40/s", "--duration", "10s", "--no-store", "--json", "--quiet")
		cmd.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, _ := cmd.Output() // a polluted verdict exits 0; a fault prints no summary
		var s tare.Summary
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("tare run: %v\n%s\n%s", err, out, stderr.String())
		}
		return s
	}
	quiet := run()
	hog := interfere.Duty(t, 20*time.Millisecond, 20*time.Millisecond, interfere.Pinned(0)...)
	polluted := run()
	_ = hog.Process.Kill()
	tl := polluted.Tail
	if tl == nil || tl.Quiet.P50 == nil || tl.Quiet.P99 == nil || quiet.Latency.P50 == nil || quiet.Latency.P99 == nil {
		t.Fatalf("tail %+v, quiet latency %+v: want both measured", tl, quiet.Latency)
	}
	t.Logf("quiet run: p50 %.2f p99 %.2f ms; beside the hog: p50 %.2f p99 %.2f ms over all, code's own p50 %.2f p99 %.2f ms (%d of %d requests overlapped outside waits); %s",
		*quiet.Latency.P50, *quiet.Latency.P99, *polluted.Latency.P50, *polluted.Latency.P99, *tl.Quiet.P50, *tl.Quiet.P99, tl.Overlapped, tl.Requests, polluted.Verdict.Level)
	if tl.Overlapped == 0 {
		t.Errorf("no request overlapped the hog's waits: %+v", tl)
	}
	for _, q := range []struct {
		name       string
		quiet, own float64
	}{
		{"p50", *quiet.Latency.P50, *tl.Quiet.P50},
		{"p99", *quiet.Latency.P99, *tl.Quiet.P99},
	} {
		if r := q.own / q.quiet; r < 1/1.2 || r > 1.2 {
			t.Errorf("the code's own %s beside the hog is %.2f× the quiet run's (%.2f against %.2f ms), want within 20 %%", q.name, r, q.own, q.quiet)
		}
	}
}
