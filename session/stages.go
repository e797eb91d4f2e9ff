package session

import (
	"fmt"
	"math"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// stageSpans are the measured parts of the stages: each stage's seconds
// after the warm-up, leaving out jumps (0s stages) and stages the warm-up
// covers whole. index maps a span back to its stage.
func stageSpans(st arrival.Stages, warmup time.Duration) (spans []stats.Span, index []int) {
	for i, s := range st {
		from, to := max(st.Start(i), warmup), st.Start(i)+s.Duration
		if to > from {
			spans = append(spans, stats.Span{From: from, To: to})
			index = append(index, i)
		}
	}
	return spans, index
}

// stageSummaries judges every stage on its own figures and timeline, as
// the run is judged on its whole ones, and words where a stage's verdict
// is worse than the run's.
func stageSummaries(parts *stats.Parts, st arrival.Stages, index []int, spans []stats.Span, th judge.Thresholds, slo judge.SLO, run *tare.Summary) {
	for k := range parts.Len() {
		i := index[k]
		s, ticks := parts.Summary(k)
		v := judge.Judge(&s, ticks, th, slo)
		out := tare.StageSummary{
			StartS:       spans[k].From.Seconds(),
			DurationS:    (spans[k].To - spans[k].From).Seconds(),
			FromPerS:     float64(st.From(i)),
			TargetPerS:   float64(st[i].Target),
			Requests:     s.Requests.Total,
			Errors:       s.Requests.Errors,
			OfferedPerS:  s.Rate.Offered,
			AchievedPerS: s.Rate.Achieved,
			Latency:      tare.QuantilesMS{P50: s.Latency.P50, P95: s.Latency.P95, P99: s.Latency.P99},
			Verdict:      v.Level,
		}
		for _, sig := range v.Signals {
			if sig.Fired {
				out.Fired = append(out.Fired, sig.Name)
			}
		}
		if len(v.SLO) > 0 {
			met := true
			for _, c := range v.SLO {
				met = met && c.Met
			}
			out.SLO = &met
		}
		run.Stages = append(run.Stages, out)
		if judge.Raise(run.Verdict.Level, v.Level) != run.Verdict.Level {
			run.Verdict.Warnings = append(run.Verdict.Warnings, fmt.Sprintf("stage %d (%s to %s, from %s) was %s though the run as a whole is %s: its figures are not to be trusted alone",
				i+1, st.From(i), st[i].Target, round1(spans[k].From), v.Level, run.Verdict.Level))
		}
	}
}

// round1 is d to the tenth of a second, for messages.
func round1(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// stagedSpan is the arrival window of a staged schedule whose last arrival
// was at last: the schedule's end, or one gap at the rate of the moment
// after last when --jobs ended it sooner.
func stagedSpan(st arrival.Stages, last time.Duration) time.Duration {
	end := st.Duration()
	if r := st.RateAt(last); r > 0 {
		end = min(end, last+time.Duration(math.Round(float64(time.Second)/r)))
	}
	return end
}
