package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestMerged: a sharded run's verdict is its shards': the worst of their
// levels, each fired signal named with its shard, what to do about it
// once, the shards' warnings named; the SLO alone is checked on the
// pooled figures, and what a hard SLO can promise is said of the worst
// host's steal.
func TestMerged(t *testing.T) {
	th := DefaultThresholds()
	judged := func(steal float64, by *tare.CPUBy, runDelay float64) *tare.Summary {
		s, ticks := run([]float64{steal, steal, steal, steal, steal, steal})
		s.Requests = tare.Requests{Total: 100, OK: 100}
		s.Latency.P95, s.Latency.P50 = tare.Float(30), tare.Float(10)
		s.Host.Steal.Max = tare.Float(steal)
		if by != nil {
			s.Host.CPUBy, s.Host.RunDelayPct, s.Host.NeighbourWaitPct = by, tare.Float(runDelay), tare.Float(runDelay)
			s.SUT = &tare.SUTSummary{PIDs: []int{42}, FoundBy: "--pid"}
		}
		s.Thresholds = th.Map()
		s.Verdict = Judge(s, ticks, th, nil)
		return s
	}
	quiet := judged(0.2, &tare.CPUBy{SystemUnderTest: 30, Tare: 5, Idle: 65}, 0.1)
	crowded := judged(0.4, &tare.CPUBy{SystemUnderTest: 10, Tare: 5, Others: 50, Idle: 35,
		TopOthers: []tare.ProcessShare{{Name: "batch", PID: 4121, CPUPct: 48}}}, 12)
	if quiet.Verdict.Level != tare.Clean || crowded.Verdict.Level != tare.Polluted {
		t.Fatalf("the shards are %s and %s, want clean and polluted", quiet.Verdict.Level, crowded.Verdict.Level)
	}
	crowded.Verdict.Warnings = append(crowded.Verdict.Warnings, "only 6 host ticks: the verdict has little to go on; run longer")

	// The pooled figures: more latency than the SLO allows.
	pooled := &tare.Summary{Requests: tare.Requests{Total: 200, OK: 200}, Latency: tare.LatencyMS{P95: tare.Float(40), P50: tare.Float(10)}}
	slo, err := ParseSLO("p95<=35ms")
	if err != nil {
		t.Fatal(err)
	}
	v := Merged(pooled, []Shard{{"shard 1/2 on host a", quiet}, {"shard 2/2 on host b", crowded}}, th, slo)

	if v.Level != tare.Polluted {
		t.Errorf("merged level %s, want polluted: the worst shard's", v.Level)
	}
	for _, sig := range v.Signals {
		if !sig.Fired || !strings.HasPrefix(sig.Detail, "shard 2/2 on host b: ") {
			t.Errorf("signal %s (fired %v): %q; want only the crowded shard's fired signals, named", sig.Name, sig.Fired, sig.Detail)
		}
	}
	if !slices.ContainsFunc(v.Signals, func(s tare.Signal) bool { return s.Name == SignalNeighbours }) {
		t.Errorf("the crowded shard's neighbours signal is not there: %+v", v.Signals)
	}
	if len(v.SLO) != 1 || v.SLO[0].Met || v.SLO[0].Value == nil || *v.SLO[0].Value != 40 {
		t.Errorf("SLO checks %+v: want p95<=35ms checked on the pooled 40 ms, failed", v.SLO)
	}
	advice := strings.Join(v.Advice, "\n")
	for _, want := range []string{"Do not scale up (or down) on these figures", "Stop `batch` (pid 4121)", "The SLO failed ([p95<=35ms: 40 ms]), but interference shaped the figures"} {
		if strings.Count(advice, want) != 1 {
			t.Errorf("advice says %q %d times, want once:\n%s", want, strings.Count(advice, want), advice)
		}
	}
	if strings.Contains(advice, "No interference from outside the test") {
		t.Errorf("the quiet shard's level speaks for the polluted run:\n%s", advice)
	}
	if !slices.Contains(v.Warnings, "shard 2/2 on host b: only 6 host ticks: the verdict has little to go on; run longer") {
		t.Errorf("warnings %q: want the shard's own, named", v.Warnings)
	}
}
