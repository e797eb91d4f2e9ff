package judge

import (
	"slices"

	"github.com/tare-dev/tare"
)

// Shard is one shard of a sharded run as the merged verdict sees it: the
// words that name it ("shard 2/4 on host gen-b") and its own stored
// summary, judged on its own host when it ran.
type Shard struct {
	Name    string
	Summary *tare.Summary
}

// Merged returns the verdict on a run whose load was split over shards,
// from their own verdicts. Host interference belongs to one host, and each
// shard was judged on its own host's ticks when it ran: the merged level
// is the worst of theirs, every signal that fired on a shard is there,
// named with it ("shard 2/4 on host gen-b: steal …"), and so are what to
// do about it and the shard's warnings. Only the SLO is checked on s, the
// figures pooled from every shard's records, with thresholds th.
func Merged(s *tare.Summary, shards []Shard, th Thresholds, slo SLO) tare.Verdict {
	v := tare.Verdict{Level: tare.Clean, Signals: []tare.Signal{}}
	var signalLines []string
	var worst tare.StealStats // the worst host's steal, for what the SLO can promise
	for _, sh := range shards {
		p := sh.Summary
		v.Level = Raise(v.Level, p.Verdict.Level)
		for _, sig := range Fired(p.Verdict) {
			sig.Detail = sh.Name + ": " + sig.Detail
			v.Signals = append(v.Signals, sig)
		}
		// What to do about its signals is its own advice, less what its
		// own level and SLO meant: the merged run's say that.
		own := ThresholdsOf(p.Thresholds)
		said := append(levelAdvice(p, p.Verdict), sloAdvice(p, p.Verdict, own)...)
		for _, line := range p.Verdict.Advice {
			if !slices.Contains(said, line) && !slices.Contains(signalLines, line) {
				signalLines = append(signalLines, line)
			}
		}
		for _, w := range p.Verdict.Warnings {
			v.Warnings = append(v.Warnings, sh.Name+": "+w)
		}
		worst.Mean, worst.Max, worst.MaxCPU = worse(worst.Mean, p.Host.Steal.Mean), worse(worst.Max, p.Host.Steal.Max), worse(worst.MaxCPU, p.Host.Steal.MaxCPU)
	}
	v.SLO = slo.Check(s)
	v.Advice = append(levelAdvice(s, v), signalLines...)
	worstHost := *s
	worstHost.Host.Steal = worst
	v.Advice = append(v.Advice, sloAdvice(&worstHost, v, th)...)
	return v
}

// worse is the higher of two figures, either of which may be unmeasured.
func worse(a, b *float64) *float64 {
	if a == nil || b != nil && *b > *a {
		return b
	}
	return a
}
