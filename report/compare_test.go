package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// comparison is a three-window protocol laid out as stats.Compare and
// judge.Protocol leave it, with a test, an SLO and a warning.
func comparison() *tare.Comparison {
	f := tare.Float
	start := time.Date(2026, 12, 1, 14, 37, 0, 0, time.UTC)
	run := func(id, window string, day int, p95, steal float64, level tare.Level) tare.ComparedRun {
		return tare.ComparedRun{
			ID: id, Source: "store", Label: "checkout", Window: window, StartedAt: start.Add(time.Duration(day) * 12 * time.Hour),
			Requests: 1200, Latency: tare.LatencyMS{Avg: f(p95 / 2), P50: f(p95 / 3), P90: f(p95 * 0.9), P95: f(p95), P99: f(p95 * 1.5), Max: f(p95 * 3)},
			OfferedPerS: f(20), AchievedPerS: f(19.8), TokensPerS: f(410.5), CPUBusyPct: f(61), Steal: tare.StealStats{Mean: f(steal), Max: f(steal * 3)},
			Verdict: level, Ticks: 60, Records: 1200,
			VCPUs: 2, CPUBy: &tare.CPUBy{SystemUnderTest: 30, Tare: 2, Others: steal, Kernel: 1, Idle: 67 - 2*steal, Steal: steal,
				TopOthers: []tare.ProcessShare{{Name: "backup", PID: 4242, CPUPct: steal}}},
			NeighbourWaitPct: f(steal / 2), ThrottledPct: f(0), SendLag: tare.LagMS{P50: f(0.1), P99: f(steal / 4), Max: f(steal)},
			GeneratorCPUPct: f(3.5), SUTCPUPerRequestMS: f(30.3),
		}
	}
	ratio := func(metric string, a, b, lo, hi float64) tare.MetricTest {
		return tare.MetricTest{Metric: metric, AMS: f(a), BMS: f(b), Ratio: f(a / b), RatioLow: f(lo), RatioHigh: f(hi),
			DivergencePct: f(100 * (max(a, b)/min(a, b) - 1)), Significant: lo > 1 || hi < 1}
	}
	return &tare.Comparison{
		Schema:   tare.CompareSchema,
		Protocol: "checkout",
		Runs: []tare.ComparedRun{
			run("0193a1b2-4c01-7a3e-9d41-5e0f6a7b8c91", "peak", 0, 2400, 18, tare.Polluted),
			run("0193a4f7-9d22-7b10-8c2a-1f3e4d5c6b72", "offpeak", 1, 900, 1.5, tare.Clean),
			run("0193a7e0-0b13-7c55-a0b9-2d4c6e8f0a13", "mid", 2, 1300, 4, tare.Clean),
		},
		DivergencePct: tare.Divergence{Avg: f(166.7), P50: f(166.7), P95: f(166.7), P99: f(166.7), Throughput: f(0)},
		Tests: []tare.WindowTest{
			{A: "peak", B: "offpeak", TicksA: 60, TicksB: 60, U: f(3420), Z: f(8.91), PValue: f(0), DiffMS: f(1480.5), CILowMS: f(1350), CIHighMS: f(1610.25), ConfidencePct: 95,
				Requests: &tare.RequestTest{RequestsA: 1200, RequestsB: 1200, U: f(1.2e6), Z: f(30.2), PValue: f(0), SlowerPct: f(83.3), ConfidencePct: 99.38, FamilyConfidencePct: 95,
					Metrics: []tare.MetricTest{ratio("avg", 1200, 450, 2.5, 2.8), ratio("p50", 800, 300, 2.5, 2.8), ratio("p95", 2400, 900, 2.4, 2.9), ratio("p99", 3600, 1350, 2.1, 3.3)}}},
			{A: "peak", B: "mid", TicksA: 60, TicksB: 8, U: f(410), Z: f(2.1), PValue: f(0.0357), DiffMS: f(1050), CILowMS: f(-20), CIHighMS: f(1900), ConfidencePct: 95,
				Warning: "only 8 ticks with completions in mid: the test has little power (want 10 or more in each); run longer"},
		},
		Capacity: tare.CapacityRange{
			MetricRange: tare.MetricRange{Metric: "p95_ms", Best: f(900), BestWindow: "offpeak", Worst: f(2400), WorstWindow: "peak", Typical: f(1300), TypicalWindow: "mid", Gap: f(1500), GapPct: f(166.7)},
			From:        "windows",
			Metrics: []tare.MetricRange{
				{Metric: "p50_ms", Best: f(300), BestWindow: "offpeak", Worst: f(800), WorstWindow: "peak", Typical: f(433.3), TypicalWindow: "mid", Gap: f(500), GapPct: f(166.7)},
				{Metric: "p95_ms", Best: f(900), BestWindow: "offpeak", Worst: f(2400), WorstWindow: "peak", Typical: f(1300), TypicalWindow: "mid", Gap: f(1500), GapPct: f(166.7)},
				{Metric: "p99_ms", Best: f(1350), BestWindow: "offpeak", Worst: f(3600), WorstWindow: "peak", Typical: f(1950), TypicalWindow: "mid", Gap: f(2250), GapPct: f(166.7)},
			},
		},
		Changes: []tare.WindowChange{
			{Window: "peak", Against: "offpeak", Items: []tare.Change{
				{Kind: tare.ChangeNeighbour, Name: "backup", Value: f(36), Against: f(3), Unit: "% of a CPU", In: "peak", Detail: "in peak, `backup` used 36% of a CPU (3% in offpeak)"},
				{Kind: tare.ChangeSteal, Value: f(18), Against: f(1.5), Unit: "%", In: "peak", Detail: "steal took 18.0% of the host's CPU against 1.5% in offpeak"},
			}},
			{Window: "mid", Against: "offpeak", Items: []tare.Change{}},
		},
		Verdict: tare.CompareVerdict{
			Level: tare.HostVariable, ThresholdPct: 30, Diverged: []string{"avg", "p50", "p95", "p99"}, LatencyFloorMS: 1,
			Metrics: []tare.MetricVerdict{
				{Metric: "avg", Status: tare.MetricDiverged, A: "peak", B: "offpeak", AValue: f(1200), BValue: f(450), DivergencePct: f(166.7), Tested: true, Detail: "166.7% apart, beyond noise: its 99.4% interval ×2.5 … ×2.8 on 1,200 and 1,200 requests"},
				{Metric: "p50", Status: tare.MetricDiverged, A: "peak", B: "offpeak", AValue: f(800), BValue: f(300), DivergencePct: f(166.7), Tested: true, Detail: "166.7% apart, beyond noise: its 99.4% interval ×2.5 … ×2.8 on 1,200 and 1,200 requests"},
				{Metric: "p95", Status: tare.MetricDiverged, A: "peak", B: "offpeak", AValue: f(2400), BValue: f(900), DivergencePct: f(166.7), Tested: true, Detail: "166.7% apart, beyond noise: its 99.4% interval ×2.4 … ×2.9 on 1,200 and 1,200 requests"},
				{Metric: "p99", Status: tare.MetricDiverged, A: "peak", B: "offpeak", AValue: f(3600), BValue: f(1350), DivergencePct: f(166.7), Tested: true, Detail: "166.7% apart, beyond noise: its 99.4% interval ×2.1 … ×3.3 on 1,200 and 1,200 requests"},
				{Metric: "throughput", Status: tare.MetricWithin, DivergencePct: f(0), Detail: "within 30%"},
			},
			Advice: []string{"The host is the variable: no scaling decision is valid from these runs.", "Do not scale up (or down) on these figures."},
			SLO: []tare.WindowSLO{
				{Window: "peak", Checks: []tare.SLOCheck{{Objective: "p95<=2s", Value: f(2400), LimitMS: 2000}}},
				{Window: "offpeak", Met: true, Checks: []tare.SLOCheck{{Objective: "p95<=2s", Met: true, Value: f(900), LimitMS: 2000}}},
			},
		},
		Warnings: []string{"no per-tick timeline for old.json (a summary file keeps none)"},
	}
}

func TestCompareGolden(t *testing.T) {
	c := comparison()
	var txt, js bytes.Buffer
	if err := CompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "compare.golden.txt", txt.Bytes())
	if err := CompareJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "compare.golden.json", js.Bytes())

	// A sweep protocol: capacity in requests per second, runs without
	// windows: the best and worst run.
	f := tare.Float
	c.Capacity = tare.CapacityRange{From: "windows", MetricRange: tare.MetricRange{Metric: "rate_per_s", Best: f(24), BestWindow: "offpeak", Worst: f(11.5), WorstWindow: "peak", Typical: f(20), TypicalWindow: "mid", Gap: f(12.5), GapPct: f(108.7)}}
	c.Sweeps = []tare.SweepCapacity{{Window: "peak", CapacityPerS: f(11.5), Steps: 6}, {Window: "offpeak", CapacityPerS: f(24), Steps: 8}, {Window: "mid", CapacityPerS: f(20), AtLeast: true, Steps: 5}}
	txt.Reset()
	if err := CompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "compare-sweep.golden.txt", txt.Bytes())

	// Too little data, and a peak window quieter than the off-peak one.
	c.Sweeps, c.Changes = nil, nil
	c.Capacity = tare.CapacityRange{From: "windows",
		MetricRange: tare.MetricRange{Metric: "p95_ms", Best: f(0.51), BestWindow: "peak", Worst: f(0.91), WorstWindow: "mid", Typical: f(0.58), TypicalWindow: "offpeak", Gap: f(0.4), GapPct: f(78.4)},
		Findings:    []string{"Off-peak, the window expected to be the quietest, was not: p95 was 0.51ms in peak against 0.58ms in offpeak, a difference within the latency floor (1.00ms): noise, so nothing to conclude about the host's hours"}}
	c.Verdict = tare.CompareVerdict{Level: tare.Inconclusive, ThresholdPct: 30, Diverged: []string{}, LatencyFloorMS: 1,
		Metrics: []tare.MetricVerdict{
			{Metric: "p95", Status: tare.MetricBelowFloor, A: "mid", B: "peak", AValue: f(0.91), BValue: f(0.51), DivergencePct: f(78.4), Tested: true, Detail: "78.4% apart, but only 0.40ms: within the latency floor (1.00ms), scheduler noise, not a host effect"},
			{Metric: "p99", Status: tare.MetricTooLittleData, A: "mid", B: "peak", AValue: f(3.77), BValue: f(1.27), DivergencePct: f(196.9), Tested: true, Detail: "196.9% apart, but its 99.6% interval ×0.568 … ×7.81 on 200 and 200 requests includes no difference: too little data to tell"},
		},
		Need:   &tare.DataNeed{RequestsPerWindow: 490, Seconds: f(10), Detail: "about 490 requests a window (about 10 s at 50/s, as many one-second ticks)"},
		Advice: []string{"Too little data to tell whether the host is the variable.", "Run about 490 requests a window."}}
	txt.Reset()
	if err := CompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "compare-inconclusive.golden.txt", txt.Bytes())
}

func TestSweepGolden(t *testing.T) {
	f := tare.Float
	s := &tare.Sweep{
		Schema: tare.SweepSchema, Target: "POST http://127.0.0.1:8089/v1/chat/completions", Window: "offpeak", SLO: "p95<=250ms",
		Steps: []tare.SweepStep{
			{RunID: "r1", OfferedPerS: 10, AchievedPerS: f(9.9), P95MS: f(48.2), Status: tare.StepOK, Reasons: []string{}, Verdict: tare.Clean},
			{RunID: "r2", OfferedPerS: 15, AchievedPerS: f(14.8), P95MS: f(52.1), Status: tare.StepOK, Reasons: []string{}, Verdict: tare.Clean},
			{RunID: "r3", OfferedPerS: 20, AchievedPerS: f(19.7), P95MS: f(77), Status: tare.StepOK, Reasons: []string{}, Verdict: tare.Suspect, Fired: []string{"run_delay"}},
			{RunID: "r4", OfferedPerS: 25, AchievedPerS: f(21.3), P95MS: f(1210), Status: tare.StepSaturated, Verdict: tare.Suspect,
				Reasons: []string{"in-flight grew by 3.9 a second over the second half of the step (16% of the offered rate; threshold 10%)", "SLO p95<=250ms: 1210 ms"}},
			{RunID: "r5", OfferedPerS: 22.5, AchievedPerS: f(22.1), P95MS: f(98), Status: tare.StepOK, Reasons: []string{}, Verdict: tare.Clean},
		},
		CapacityPerS: f(22.5), Stopped: "narrowed to between 22.5/s (held) and 25/s (failed)",
		Warnings: []string{"step 3 was suspect: the capacity may describe the host"},
	}
	var txt, js bytes.Buffer
	if err := SweepText(&txt, s); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "sweep.golden.txt", txt.Bytes())
	if err := SweepJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "sweep.golden.json", js.Bytes())
}
