package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"github.com/tare-dev/tare/judge"
)

// TestTextSharded: a run merged from shards on two hosts states its whole
// schedule and gives each shard's host lines (its host, generator, whose
// CPU, the system under test it found), not the pooled records' n/a; the
// HTML figures do the same.
func TestTextSharded(t *testing.T) {
	th := judge.DefaultThresholds()
	shard := func(steal []float64, host string, edit func(*tare.Summary)) *tare.Summary {
		s, ticks := fixture(steal, tare.Float(0.3))
		s.Env.Hostname = host
		s.Run.Arrival = "poisson 50/s for 10s, shard " + host[len(host)-1:] + "/2"
		if edit != nil {
			edit(s)
		}
		s.Thresholds = th.Map()
		s.Verdict = judge.Judge(s, ticks, th, nil)
		return s
	}
	a := shard([]float64{0, 0.5, 0, 1, 0, 0, 0.2, 0, 0, 0}, "gen-1", func(s *tare.Summary) {
		s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 30, Tare: 5, Others: 2, Kernel: 1, Idle: 62}
		s.SUT = &tare.SUTSummary{PIDs: []int{5120}, FoundBy: "listening socket of 127.0.0.1:8080", CPUPct: tare.Float(60), RunDelayPct: tare.Float(1)}
	})
	b := shard([]float64{38.5, 71.2, 12.0, 89.4, 44.1, 3, 2, 1, 0, 0}, "gen-2", nil)
	merged, _ := fixture(nil, nil)
	merged.Run.Arrival = "poisson 100/s for 10s over 2 shards"
	merged.Env.Hostname = "gen-1, gen-2"
	merged.Generator, merged.Host, merged.CleanLatency = tare.Generator{}, tare.HostSummary{}, nil
	for i, p := range []*tare.Summary{a, b} {
		merged.Shards = append(merged.Shards, tare.ShardSummary{Shard: []string{"1/2", "2/2"}[i], Hostname: p.Env.Hostname, Requests: 500,
			Level: p.Verdict.Level, Fired: firedNames(p.Verdict), Arrival: p.Run.Arrival, VCPUs: p.Env.VCPUs,
			Generator: p.Generator, Host: p.Host, SUT: p.SUT})
	}
	merged.Verdict = judge.Merged(merged, []judge.Shard{{Name: "shard 1/2 on host gen-1", Summary: a}, {Name: "shard 2/2 on host gen-2", Summary: b}}, th, nil)
	var buf bytes.Buffer
	if err := Text(&buf, merged); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	goldenfile.Check(t, "sharded.golden.txt", buf.Bytes())
	for _, want := range []string{
		"poisson 100/s for 10s over 2 shards",
		"shard 1/2    on gen-1: 500 requests, poisson 50/s for 10s, shard 1/2   verdict CLEAN",
		"shard 2/2    on gen-2: 500 requests, poisson 50/s for 10s, shard 2/2   verdict POLLUTED (steal)",
		"   generator   cpu 6.5% of a core",
		"   whose cpu   under test 30.0%",
		"   under test  pid 5120 (listening socket of 127.0.0.1:8080)",
		"   under test  not found on host gen-2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the merged text does not say %q:\n%s", want, out)
		}
	}
	for _, wrong := range []string{"cpu n/a of a core", "polluted ticks n/a of 0", "under test   not found on this host"} {
		if strings.Contains(out, wrong) {
			t.Errorf("the merged text says %q, of figures only its shards have:\n%s", wrong, out)
		}
	}
	var names []string
	for _, f := range figures(merged) {
		names = append(names, f.Key)
	}
	for _, want := range []string{"shard 1/2", "shard 1/2 generator", "shard 1/2 whose cpu", "shard 1/2 under test", "shard 2/2 host cpu"} {
		if !strings.Contains("\n"+strings.Join(names, "\n")+"\n", "\n"+want+"\n") {
			t.Errorf("the HTML figures have no %q row: %q", want, names)
		}
	}
}

func firedNames(v tare.Verdict) []string {
	var out []string
	for _, s := range judge.Fired(v) {
		out = append(out, s.Name)
	}
	return out
}
