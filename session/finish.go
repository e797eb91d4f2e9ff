package session

import (
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// closing is what finishes a window's summary besides its recorder: what
// differs between a live run, a watched run, a merged run and a stored run
// read back.
type closing struct {
	run  tare.Run      // started, ended, with its status
	span time.Duration // the arrival window the offered rate is counted over

	// sampler is the host sampled here, which gives the summary its
	// environment, the note on why blame was estimated, the system under
	// test (sut, found as foundBy says) and its warnings; nil when the host
	// was sampled elsewhere, and env and blameWhy say what it was.
	sampler  *host.Sampler
	sut      []int
	foundBy  string
	env      tare.Env
	blameWhy string

	thresholds judge.Thresholds
	slo        judge.SLO
	// before completes the summary before it is judged (the generator's
	// own figures, a merged run's shards); nil when there is nothing to add.
	before func(*tare.Summary)
	// verdict judges the summary; nil is judge.Judge on its ticks.
	verdict  func(*tare.Summary, []tare.Tick) tare.Verdict
	warnings []string // the caller's own, after the recorder's and the sampler's
}

// finish summarises what rec recorded and judges it: the one step every
// summary goes through, whether measured live, watched, merged from
// shards or read back from records.
func finish(rec *stats.Recorder, c closing) (tare.Summary, []tare.Tick) {
	s := rec.Summary(c.run.EndedAt, c.span)
	s.Schema = tare.SummarySchema
	s.Run = c.run
	s.Env = c.env
	if c.sampler != nil {
		s.Env, c.blameWhy = c.sampler.Env(), c.sampler.BlameWhy()
		s.SUT = sutSummary(s.SUT, c.sut, c.foundBy, c.sampler)
		var sampled []string
		for _, w := range c.sampler.Warnings() {
			sampled = append(sampled, w.Error())
		}
		c.warnings = append(sampled, c.warnings...)
	}
	explainBlame(&s, c.blameWhy)
	if c.before != nil {
		c.before(&s)
	}
	ticks := rec.Ticks()
	if c.verdict != nil {
		s.Verdict = c.verdict(&s, ticks)
	} else {
		s.Verdict = judge.Judge(&s, ticks, c.thresholds, c.slo)
	}
	s.Verdict.Warnings = append(s.Verdict.Warnings, rec.Warnings()...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, c.warnings...)
	if att := stats.Attribute(ticks); att.Ticks >= stats.MinAttributionTicks {
		s.Verdict.Attribution = att.Sentence
	}
	s.Thresholds = c.thresholds.Map()
	return s, ticks
}

// arrivalSpan is the window n arrivals spanned, the last at offset last
// from the window's start: one mean gap beyond the last arrival, gap when
// the schedule says it (1/rate), else the mean of the n−1 gaps seen. For n
// arrivals at a constant rate r it is exactly n/r.
func arrivalSpan(last time.Duration, n int, gap time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	if gap <= 0 && n > 1 {
		gap = last / time.Duration(n-1)
	}
	return last + gap
}

// arrivalsSeen is the arrival window of records measured elsewhere or
// earlier: from the first scheduled to the last.
type arrivalsSeen struct {
	first, last time.Time
	n           int
}

func (a *arrivalsSeen) add(scheduled time.Time) {
	if a.n == 0 || scheduled.Before(a.first) {
		a.first = scheduled
	}
	a.last = maxTime(a.last, scheduled)
	a.n++
}

// span is the arrival window, as for a live run (arrivalSpan).
func (a arrivalsSeen) span() time.Duration {
	return arrivalSpan(a.last.Sub(a.first), a.n, 0)
}
