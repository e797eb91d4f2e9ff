package stats

import (
	"time"

	"github.com/tare-dev/tare"
)

// Span is a part of a run, as offsets from its start: [From, To).
type Span struct {
	From, To time.Duration
}

// Parts records consecutive parts of one run (the stages of a ramp), each
// in a Recorder of its own, so each gets its own summary and timeline and
// can be judged on its own: a result goes to the part its scheduled time
// falls in, a host sample to the part its midpoint falls in. A result's
// completion is counted apart, in the part it completed in, for the part's
// achieved rate. Like a Recorder it is fed by one goroutine.
type Parts struct {
	start     time.Time
	spans     []Span
	recs      []*Recorder
	completed []int // completions in each part's seconds, whenever scheduled
}

// NewParts returns recorders for spans of the run starting at cfg.Start,
// each configured as cfg but starting at its span's From.
func NewParts(cfg Config, spans []Span) (*Parts, error) {
	p := &Parts{start: cfg.Start, spans: spans, completed: make([]int, len(spans))}
	for _, sp := range spans {
		c := cfg
		c.Start = cfg.Start.Add(sp.From)
		rec, err := NewRecorder(c)
		if err != nil {
			return nil, err
		}
		p.recs = append(p.recs, rec)
	}
	return p, nil
}

// part is the index of the span holding t, or -1.
func (p *Parts) part(t time.Time) int { return p.partAt(t.Sub(p.start)) }

// partAt is the index of the span holding offset d, or -1.
func (p *Parts) partAt(d time.Duration) int {
	for i, sp := range p.spans {
		if d >= sp.From && d < sp.To {
			return i
		}
	}
	return -1
}

// AddResult records res in the part it was scheduled in, if any, and its
// completion in the part it completed in.
func (p *Parts) AddResult(res *tare.Result) { p.AddResultFrom(p.start, res) }

// AddResultFrom records res in the part it was scheduled in counted from
// start, the start of the generator that sent it, rather than from the
// run's: pooling the records of several generators (the shards of a run),
// each of which ran the parts by its own clock from its own start, and
// none before the run's.
func (p *Parts) AddResultFrom(start time.Time, res *tare.Result) {
	if i := p.partAt(res.Scheduled.Sub(start)); i >= 0 {
		p.recs[i].AddResult(res)
	}
	if res.Dropped {
		return
	}
	// A request cancelled before an answer completes, as the Recorder
	// counts it, when it was scheduled.
	done := res.Done
	if done.IsZero() {
		done = res.Scheduled
	}
	if i := p.partAt(done.Sub(start)); i >= 0 {
		p.completed[i]++
	}
}

// AddHost records h in the part holding its midpoint, if any.
func (p *Parts) AddHost(h tare.HostSample) {
	if i := p.part(h.Mid()); i >= 0 {
		p.recs[i].AddHost(h)
	}
}

// AddDepth records a queue depth sample in the part holding at, if any.
func (p *Parts) AddDepth(at time.Time, depth float64) {
	if i := p.part(at); i >= 0 {
		p.recs[i].AddDepth(at, depth)
	}
}

// Len is the number of parts.
func (p *Parts) Len() int { return len(p.spans) }

// Summary is part i's figures, of the arrivals scheduled in it, and its
// timeline. Its rates are over the part's own length:
//
//	offered  = arrivals scheduled in the part / length
//	achieved = completions (ok + errors) in the part's seconds / length
//
// so achieved is what the target served per second of the part's wall
// time, of arrivals scheduled in it or before it (after the warm-up): a
// part offered more than the target serves achieves less than offered,
// and the part after it may achieve more, as the backlog is served.
// Completions after the last part (the drain) are in no part's rate.
func (p *Parts) Summary(i int) (tare.Summary, []tare.Tick) {
	sp := p.spans[i]
	length := sp.To - sp.From
	s := p.recs[i].Summary(p.start.Add(sp.To), length)
	s.Rate.Achieved = round(float64(p.completed[i])/length.Seconds(), 3)
	return s, p.recs[i].Ticks()
}
