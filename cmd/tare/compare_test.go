package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestCompareSeed: the seed's two runs, as the summary files tare run
// --json writes, diverge by 100 % (avg), 140.9 % (p95) and 304.5 % (p99):
// the host is the variable, and the advice is not to scale up.
func TestCompareSeed(t *testing.T) {
	files := []string{"compare", "testdata/seed-peak.json", "testdata/seed-offpeak.json"}
	tests := []struct {
		name  string
		extra []string
	}{
		{"compare-seed", nil},
		{"compare-seed-slo", []string{"--slo", "p95<=2s"}},
		{"compare-seed-json", []string{"--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, append(files, tt.extra...)...)
			if code != 0 {
				t.Fatalf("exit %d; stderr %s", code, stderr)
			}
			golden(t, tt.name+".stdout", stdout)
			golden(t, tt.name+".stderr", stderr)
		})
	}

	_, stdout, _ := tareCmd(t, append(files, "--json")...)
	var c tare.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatal(err)
	}
	d := c.DivergencePct
	for _, m := range []struct {
		name string
		got  *float64
		want float64
	}{{"avg", d.Avg, 100}, {"p95", d.P95, 140.9}, {"p99", d.P99, 304.5}} {
		if m.got == nil || math.Abs(*m.got-m.want) > 1e-9 {
			t.Errorf("divergence %s = %v, want %g", m.name, m.got, m.want)
		}
	}
	if c.Schema != tare.CompareSchema || c.Verdict.Level != tare.HostVariable {
		t.Errorf("schema %q level %q, want %s and host-variable", c.Schema, c.Verdict.Level, tare.CompareSchema)
	}
	advice := strings.ToLower(strings.Join(c.Verdict.Advice, "\n"))
	if !strings.Contains(advice, "no scaling decision is valid from these runs") || !strings.Contains(advice, "do not scale up") {
		t.Errorf("advice:\n%s\nwant it to say no scaling decision is valid and not to scale up", advice)
	}
	if strings.Contains(strings.ReplaceAll(advice, "do not scale up", ""), "scale up") {
		t.Errorf("advice recommends scaling up:\n%s", advice)
	}
	if cp := c.Capacity; *cp.Best != 1710 || *cp.Worst != 4120 || *cp.GapPct != 140.9 {
		t.Errorf("capacity %+v, want best 1710 ms (off-peak), worst 4120 ms (peak), gap 140.9%%", cp)
	}
}

func TestCompareBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"one run", []string{"compare", "testdata/seed-peak.json"}, "compare needs at least two runs"},
		{"no such file", []string{"compare", "testdata/none.json", "testdata/seed-peak.json"}, `no summary file "testdata/none.json"`},
		{"not a summary", []string{"compare", "testdata/help.stdout", "testdata/seed-peak.json"}, "testdata/help.stdout is not a tare.summary/v1 JSON"},
		{"threshold", []string{"compare", "testdata/seed-peak.json", "testdata/seed-offpeak.json", "--threshold", "0"}, "--threshold must be a percentage above 0"},
		{"latency floor", []string{"compare", "testdata/seed-peak.json", "testdata/seed-offpeak.json", "--latency-floor", "-1ms"}, "--latency-floor must be 0 (the runs' own) or a duration, like 1ms; got -1ms"},
		{"latency floor unit", []string{"compare", "testdata/seed-peak.json", "testdata/seed-offpeak.json", "--latency-floor", "5"}, "latency-floor"},
		{"slo", []string{"compare", "testdata/seed-peak.json", "testdata/seed-offpeak.json", "--slo", "fast"}, "--slo: SLO objective must look like p95<=2s"},
		{"unknown run", []string{"compare", "0000dead", "testdata/seed-peak.json"}, `"0000dead" is neither a summary file, a protocol nor a stored run`},
		{"no args", []string{"compare"}, "requires at least 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := tareCmd(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
}
