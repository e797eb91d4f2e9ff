package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// testAB is a small A/B run of two pairs whose trials are the runs
// named, and whose B target carries a password.
func testAB(id, label string, started time.Time, trialIDs ...string) tare.AB {
	p95 := func(v float64) tare.LatencyMS { return tare.LatencyMS{P95: tare.Float(v)} }
	ab := tare.AB{Schema: tare.ABSchema, ID: id, Mode: tare.ABInterleaved, Label: label, Seed: 7,
		A: tare.ABVariant{Target: "http://127.0.0.1:8080/"}, B: tare.ABVariant{Target: "http://u:hunter2@127.0.0.1:8081/"},
		TrialS: 2, RatePerS: 50, On: "p95", TolerancePct: 3, ConfidencePct: 95,
		Ratios: []tare.ABRatio{{Metric: "p95", Pairs: 2, Ratio: tare.Float(1.08), RatioLow: tare.Float(1.02), RatioHigh: tare.Float(1.15)}},
		Result: tare.ABSlower, Verdict: "B is slower", StartedAt: started, EndedAt: started.Add(10 * time.Second),
		Status: string(tare.StatusComplete)}
	for n := 1; n <= len(trialIDs)/2; n++ {
		ab.Pairs = append(ab.Pairs, tare.ABPair{N: n, First: "a",
			A:      tare.ABTrial{RunID: trialIDs[2*n-2], Requests: 100, Latency: p95(10), Verdict: tare.Clean},
			B:      tare.ABTrial{RunID: trialIDs[2*n-1], Requests: 100, Latency: p95(10.8), Verdict: tare.Polluted, Hit: true},
			Ratios: map[string]*float64{"p95": tare.Float(1.08), "p50": nil}})
	}
	return ab
}

// TestABRoundTrip: an A/B run reads back as the same tare.ab/v1 it was
// saved as, its trials' run ids with it, save a password in a target; the
// listing filters as runs' does, and a deleted one is gone.
func TestABRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		base := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
		older := testAB("ab-1", "checkout", base, "t-a1", "t-b1", "t-a2", "t-b2")
		newer := testAB("ab-2", "search", base.Add(time.Hour), "t-a3", "t-b3")
		for _, ab := range []tare.AB{older, newer} {
			if err := s.SaveAB(ctx, ab); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.FindAB(ctx, "ab-1")
		if err != nil {
			t.Fatal(err)
		}
		want := older
		want.B.Target = "http://u:redacted@127.0.0.1:8081/"
		if g, w := mustMarshal(t, got), mustMarshal(t, want); !bytes.Equal(g, w) {
			t.Errorf("read back:\n got %s\nwant %s", g, w)
		}
		if strings.Contains(string(mustMarshal(t, got)), "hunter2") {
			t.Error("the password of B's target was stored")
		}

		list := func(f tare.RunFilter) string {
			t.Helper()
			abs, err := s.FindABs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, ab := range abs {
				ids = append(ids, ab.ID)
			}
			return strings.Join(ids, " ")
		}
		for _, c := range []struct {
			name string
			f    tare.RunFilter
			want string
		}{
			{"all, newest first", tare.RunFilter{}, "ab-2 ab-1"},
			{"limit", tare.RunFilter{Limit: 1}, "ab-2"},
			{"label", tare.RunFilter{Label: "checkout"}, "ab-1"},
			{"target of B", tare.RunFilter{Target: ":8081"}, "ab-2 ab-1"},
			{"since", tare.RunFilter{Since: base.Add(time.Minute)}, "ab-2"},
			{"a window: no A/B run is one", tare.RunFilter{Window: tare.WindowPeak}, ""},
		} {
			if got := list(c.f); got != c.want {
				t.Errorf("%s: %q, want %q", c.name, got, c.want)
			}
		}

		wantCode(t, s.SaveAB(ctx, older), tare.EINVALID)
		wantCode(t, s.SaveAB(ctx, tare.AB{}), tare.EINVALID)
		if err := s.DeleteAB(ctx, "ab-1"); err != nil {
			t.Fatal(err)
		}
		_, err = s.FindAB(ctx, "ab-1")
		wantCode(t, err, tare.ENOTFOUND)
		wantCode(t, s.DeleteAB(ctx, "ab-1"), tare.ENOTFOUND)
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
