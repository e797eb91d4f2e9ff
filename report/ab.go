package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/tare-dev/tare"
)

// ABJSON writes an A/B run as the tare.ab/v1 JSON.
func ABJSON(w io.Writer, ab *tare.AB) error {
	return writeJSON(w, ab, "ab")
}

// ABPair is the line a pair of trials gets as the run goes: each side's
// p95, B/A, the trials' verdicts, and the result so far.
func ABPair(p tare.ABPair, sofar *tare.AB) string {
	order := "duet"
	switch p.First {
	case "a":
		order = "A first"
	case "b":
		order = "B first"
	}
	return fmt.Sprintf("pair %d (%s): %s A %s, B %s, B/A %s  verdicts %s/%s  so far: %s",
		p.N, order, sofar.On, ms(p.A.Value(sofar.On)), ms(p.B.Value(sofar.On)), ratio(p.Ratios[sofar.On]),
		p.A.Verdict, p.B.Verdict, sofar.Result)
}

// ABText writes an A/B run for a person: the variants, each pair, B
// against A per metric, how the interference fell, and the result.
func ABText(w io.Writer, ab *tare.AB) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tare ab (%s): %d trial %s of %.1fs, each variant at %.1f/s, seed %d\n",
		ab.Mode, len(ab.Pairs), pairWord(len(ab.Pairs)), ab.TrialS, ab.RatePerS, ab.Seed)
	fmt.Fprintf(&b, "  A  %s\n  B  %s\n", ab.A.Target, ab.B.Target)
	if ab.Status != string(tare.StatusComplete) {
		fmt.Fprintf(&b, "  %s: the pairs measured so far are judged\n", ab.Status)
	}
	b.WriteString("\npair  first  A p50     A p95     B p50     B p95     B/A " + ab.On + "  verdict A/B\n")
	for _, p := range ab.Pairs {
		first := strings.ToUpper(p.First)
		if first == "" {
			first = "-"
		}
		fmt.Fprintf(&b, "%4d  %-5s  %-8s  %-8s  %-8s  %-8s  %-7s  %s/%s\n", p.N, first,
			ms(p.A.Latency.P50), ms(p.A.Latency.P95), ms(p.B.Latency.P50), ms(p.B.Latency.P95),
			ratio(p.Ratios[ab.On]), p.A.Verdict, p.B.Verdict)
	}
	fmt.Fprintf(&b, "\nB against A (%g %% CI over pairs)\n", ab.ConfidencePct)
	for _, r := range ab.Ratios {
		if r.Ratio == nil {
			fmt.Fprintf(&b, "  %-9s n/a (%d %s)\n", r.Metric, r.Pairs, pairWord(r.Pairs))
			continue
		}
		if r.DiffLowPct == nil {
			fmt.Fprintf(&b, "  %-9s %s  %+.1f %%  (no interval: %d %s cannot bound it)\n", r.Metric, ratio(r.Ratio), *r.DiffPct, r.Pairs, pairWord(r.Pairs))
			continue
		}
		fmt.Fprintf(&b, "  %-9s %s  %+.1f %%  (%+.1f to %+.1f %%)\n", r.Metric, ratio(r.Ratio), *r.DiffPct, *r.DiffLowPct, *r.DiffHighPct)
	}
	fmt.Fprintf(&b, "\nInterference: %s\n", ab.Interference.Detail)
	for _, warning := range ab.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", warning)
	}
	fmt.Fprintf(&b, "\nResult: %s\n  %s\n", ab.Result, ab.Verdict)
	if ab.ID != "" {
		fmt.Fprintf(&b, "\nStored as A/B run %s (tare runs show, tare report); its trials are runs of their own.\n", ab.ID)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write ab text: %w", err)
	}
	return nil
}

func ratio(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *v)
}

func pairWord(n int) string {
	if n == 1 {
		return "pair"
	}
	return "pairs"
}
