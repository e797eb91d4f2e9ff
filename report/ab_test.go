package report

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// TestABGolden pins tare ab's text and JSON for an A/B run of six pairs
// drawn from a seeded rand: B about 8 % slower, the host's noise on both
// sides of each pair, one pair hit on one side only.
func TestABGolden(t *testing.T) {
	ab := abFixture()
	var txt, js bytes.Buffer
	if err := ABText(&txt, &ab); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "ab.golden.txt", txt.Bytes())
	if err := ABJSON(&js, &ab); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "ab.golden.json", js.Bytes())
}

// TestABHTML: tare report of an A/B run draws its paired trials, each
// pair's B/A on p95 against 1 and the interval over the pairs, and each
// trial's polluted ticks, the pair hit on A's side only marked; the data
// part (every point drawn) is the golden.
func TestABHTML(t *testing.T) {
	ab := abFixture()
	ab.ID = "0193a0b0-0000-7000-8000-00000000ab01"
	html := string(render(t, Page{AB: &ab}))
	for _, want := range []string{`id="ab"`, `id="svg-ab-pairs"`, `id="svg-ab-interference"`, "<title>tare report · A/B run checkout</title>",
		"b_slower: B is slower: p95", "1: A = B", "95 % CI low 1.049", "95 % CI high 1.116", "polluted (hit)", "run-3"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	saveOut(t, "ab.html", []byte(html))
	goldenfile.Check(t, "html-ab.golden.json", readable(t, dataPart(t, []byte(html))))
}

// abFixture is an A/B run of six pairs drawn from a seeded rand: B about
// 8 % slower, the host's noise on both sides of each pair, one pair hit
// on A's side only.
func abFixture() tare.AB {
	f := func(v float64) *float64 { return &v }
	rng := rand.New(rand.NewPCG(42, 42))
	start := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	ab := tare.AB{Schema: tare.ABSchema, Mode: tare.ABInterleaved, Label: "checkout", Seed: 1,
		A: tare.ABVariant{Target: "GET http://127.0.0.1:8080/"}, B: tare.ABVariant{Target: "GET http://127.0.0.1:8081/"},
		TrialS: 6, RatePerS: 50, On: "p95", TolerancePct: 5, ConfidencePct: 95,
		StartedAt: start, EndedAt: start.Add(80 * time.Second), Status: string(tare.StatusComplete)}
	for n := 1; n <= 6; n++ {
		host := 1 + rng.Float64()
		trial := func(scale float64, hit bool) tare.ABTrial {
			p50 := 10 * host * scale
			level, polluted := tare.Clean, 2.0
			if hit {
				level, polluted = tare.Polluted, 40
			}
			return tare.ABTrial{RunID: "run-" + string(rune('0'+n)), StartedAt: start.Add(time.Duration(n) * 13 * time.Second),
				Requests: 300, Latency: tare.LatencyMS{P50: f(p50), P95: f(2 * p50), P99: f(3 * p50)}, Verdict: level, Hit: hit,
				PollutedTicksPct: f(polluted)}
		}
		p := tare.ABPair{N: n, First: []string{"a", "b"}[n%2], A: trial(1, n == 3), B: trial(1.08+0.02*rng.NormFloat64(), false)}
		p.Ratios = map[string]*float64{"p95": f(*p.B.Latency.P95 / *p.A.Latency.P95)}
		ab.Pairs = append(ab.Pairs, p)
	}
	ab.Ratios = []tare.ABRatio{
		{Metric: "p50", Pairs: 6, Ratio: f(1.079), RatioLow: f(1.062), RatioHigh: f(1.097), DiffPct: f(7.9), DiffLowPct: f(6.2), DiffHighPct: f(9.7)},
		{Metric: "p95", Pairs: 6, Ratio: f(1.082), RatioLow: f(1.049), RatioHigh: f(1.116), DiffPct: f(8.2), DiffLowPct: f(4.9), DiffHighPct: f(11.6)},
		{Metric: "p99", Pairs: 1},
	}
	ab.Interference = tare.ABNoise{HitA: 1, OneSided: 1, Detail: "1 of A's and 0 of B's 6 trials were polluted; in 1 pair one side was hit and the other not: the interval is wider for it"}
	ab.Result, ab.Verdict = tare.ABSlower, "B is slower: p95 +8.2 % (95 % CI +4.9 to +11.6 %)"
	return ab
}
