package stats

import "github.com/tare-dev/tare"

// targetTotals are the figures of one request of a targets file.
type targetTotals struct {
	requests, ok, errs, dropped int
	latency                     dist
}

// addTarget counts res against the request it took, when the run mixed
// requests; an index out of range is not counted there.
func (r *Recorder) addTarget(res *tare.Result) {
	i := res.TargetIndex
	if i < 0 || i >= len(r.targets) {
		return
	}
	t := &r.targets[i]
	t.requests++
	switch {
	case res.Dropped:
		t.dropped++
		return
	case res.Err != "":
		t.errs++
	default:
		t.ok++
	}
	if !res.Done.IsZero() {
		t.latency.add(res.Latency())
	}
}

// targetSummaries are the per-request figures, in the file's order.
func (r *Recorder) targetSummaries() []tare.TargetSummary {
	if len(r.targets) == 0 {
		return nil
	}
	out := make([]tare.TargetSummary, len(r.targets))
	for i := range r.targets {
		t := &r.targets[i]
		out[i] = tare.TargetSummary{
			Name: r.cfg.Targets[i], Requests: t.requests, OK: t.ok, Errors: t.errs, Dropped: t.dropped,
			Latency: tare.QuantilesMS{P50: t.latency.ms(50), P95: t.latency.ms(95), P99: t.latency.ms(99)},
		}
	}
	return out
}
