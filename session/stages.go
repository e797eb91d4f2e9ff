package session

import (
	"fmt"
	"math"
	"slices"
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
		head := tare.StageSummary{
			Stage:      i + 1,
			StartS:     spans[k].From.Seconds(),
			DurationS:  (spans[k].To - spans[k].From).Seconds(),
			FromPerS:   float64(st.From(i)),
			TargetPerS: float64(st[i].Target),
		}
		s, ticks := parts.Summary(k)
		addStage(run, judgeStage(head, &s, ticks, th, slo))
	}
}

// judgeStage is head, a stage's schedule, completed with its figures s and
// the verdict on them and its timeline.
func judgeStage(head tare.StageSummary, s *tare.Summary, ticks []tare.Tick, th judge.Thresholds, slo judge.SLO) tare.StageSummary {
	v := judge.Judge(s, ticks, th, slo)
	out := head
	out.Requests, out.Errors = s.Requests.Total, s.Requests.Errors
	out.OfferedPerS, out.AchievedPerS = s.Rate.Offered, s.Rate.Achieved
	out.Latency = tare.QuantilesMS{P50: s.Latency.P50, P95: s.Latency.P95, P99: s.Latency.P99}
	out.Verdict = v.Level
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
	return out
}

// addStage adds stage to the run's stages, and words it when its verdict
// is worse than the run's, by its number (a stage stored before numbers
// were has none: its rates alone name it).
func addStage(run *tare.Summary, stage tare.StageSummary) {
	run.Stages = append(run.Stages, stage)
	name := "the stage"
	if stage.Stage > 0 {
		name = fmt.Sprintf("stage %d", stage.Stage)
	}
	if judge.Raise(run.Verdict.Level, stage.Verdict) != run.Verdict.Level {
		run.Verdict.Warnings = append(run.Verdict.Warnings, fmt.Sprintf("%s (%s to %s, from %s) was %s though the run as a whole is %s: its figures are not to be trusted alone",
			name, arrival.Rate(stage.FromPerS), arrival.Rate(stage.TargetPerS), round1(seconds(stage.StartS)), stage.Verdict, run.Verdict.Level))
	}
}

// shardStages records the stages of a sharded run again from the shards'
// pooled records, so that each stage's percentiles are those of all its
// records. Every shard ran the same stages at 1/N of the rates (Prepare
// scales them), each by its own clock from its own start.
type shardStages struct {
	parts  *stats.Parts
	heads  []tare.StageSummary // each stage's schedule, its rates summed over the shards
	starts []time.Time         // each shard's start, on the merged time axis
}

// newShardStages returns the recorders of the stages the shards' stored
// summaries name, configured as cfg, or nil when they ran none; shards
// whose stages differ are a warning, and no stages.
func newShardStages(cfg stats.Config, parts []tare.Summary, starts []time.Time) (*shardStages, string, error) {
	const differ = "the shards' summaries do not name the same stages (a shard that never finished names none): the merged run has no figures per stage (each shard's own are in its row)"
	first := parts[0].Stages
	m := &shardStages{heads: make([]tare.StageSummary, len(first)), starts: starts}
	spans := make([]stats.Span, len(first))
	for k, st := range first {
		m.heads[k] = tare.StageSummary{Stage: st.Stage, StartS: st.StartS, DurationS: st.DurationS}
		spans[k] = stats.Span{From: seconds(st.StartS), To: seconds(st.StartS) + seconds(st.DurationS)}
	}
	for _, p := range parts {
		if len(p.Stages) != len(first) {
			return nil, differ, nil
		}
		for k, st := range p.Stages {
			if st.Stage != first[k].Stage || st.StartS != first[k].StartS || st.DurationS != first[k].DurationS {
				return nil, differ, nil
			}
			m.heads[k].FromPerS += st.FromPerS
			m.heads[k].TargetPerS += st.TargetPerS
		}
	}
	if len(first) == 0 {
		return nil, "", nil
	}
	var err error
	m.parts, err = stats.NewParts(cfg, spans)
	return m, "", err
}

// add records res, of shard i, in the stage it was scheduled in.
func (m *shardStages) add(i int, res *tare.Result) {
	if m != nil {
		m.parts.AddResultFrom(m.starts[i], res)
	}
}

// summarise adds the merged stages to run, each judged on its pooled
// figures and raised to the worst of the shards' own verdicts on it
// (judged on their hosts, which the pooled records do not have), with
// the signals that fired there.
func (m *shardStages) summarise(parts []tare.Summary, th judge.Thresholds, slo judge.SLO, run *tare.Summary) {
	if m == nil {
		return
	}
	for k, head := range m.heads {
		s, ticks := m.parts.Summary(k)
		out := judgeStage(head, &s, ticks, th, slo)
		for _, p := range parts {
			out.Verdict = judge.Raise(out.Verdict, p.Stages[k].Verdict)
			for _, name := range p.Stages[k].Fired {
				if !slices.Contains(out.Fired, name) {
					out.Fired = append(out.Fired, name)
				}
			}
		}
		addStage(run, out)
	}
}

// seconds is s seconds to the nanosecond, undoing Duration.Seconds.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

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
