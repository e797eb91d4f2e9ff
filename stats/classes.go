package stats

import (
	"cmp"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// classTotals are the figures of one class of model call (Result.Class).
type classTotals struct {
	requests, ok, errs int
	ttft, latency      dist
	inputTokens, input int // prompt tokens the server counted, over input requests
}

// convTotals are one conversation's turns seen so far.
type convTotals struct {
	turns       int
	failed      bool
	first, last time.Time // the first turn's Scheduled, the last Done
}

// addClass counts res against its class and its conversation.
func (r *Recorder) addClass(res *tare.Result) {
	if res.Class != "" {
		if r.classes == nil {
			r.classes = map[string]*classTotals{}
		}
		c := r.classes[res.Class]
		if c == nil {
			c = &classTotals{}
			r.classes[res.Class] = c
		}
		c.requests++
		switch {
		case res.Dropped:
		case res.Err != "":
			c.errs++
		default:
			c.ok++
			if d := res.TTFT(); d > 0 {
				c.ttft.add(d)
			}
			if res.PromptTokenSource != "" {
				c.inputTokens += res.PromptTokens
				c.input++
			}
		}
		if !res.Done.IsZero() {
			c.latency.add(res.Latency())
		}
	}
	if res.Conversation != 0 {
		if r.convs == nil {
			r.convs = map[uint64]*convTotals{}
		}
		c := r.convs[res.Conversation]
		if c == nil {
			c = &convTotals{first: res.Scheduled}
			r.convs[res.Conversation] = c
		}
		c.turns++
		c.failed = c.failed || res.Dropped || res.Err != ""
		if res.Scheduled.Before(c.first) {
			c.first = res.Scheduled
		}
		if res.Done.After(c.last) {
			c.last = res.Done
		}
	}
}

// classSummaries are the per-class figures, the names in natural order
// ("turn 2" before "turn 10").
func (r *Recorder) classSummaries() []tare.ClassSummary {
	names := make([]string, 0, len(r.classes))
	for name := range r.classes {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	var out []tare.ClassSummary
	for _, name := range names {
		c := r.classes[name]
		s := tare.ClassSummary{Name: name, Requests: c.requests, OK: c.ok, Errors: c.errs, TTFT: percentilesMS(&c.ttft),
			Latency: tare.QuantilesMS{P50: c.latency.ms(50), P95: c.latency.ms(95), P99: c.latency.ms(99)}}
		if c.input > 0 {
			s.InputTokens = round(float64(c.inputTokens)/float64(c.input), 1)
		}
		out = append(out, s)
	}
	return out
}

// conversationSummary is the per-conversation figures; nil without
// conversations.
func (r *Recorder) conversationSummary() *tare.ConversationSummary {
	if len(r.convs) == 0 {
		return nil
	}
	var d dist
	s := &tare.ConversationSummary{Count: len(r.convs)}
	turns := 0
	for _, c := range r.convs {
		turns += c.turns
		if !c.failed {
			s.Complete++
		}
		if !c.last.IsZero() {
			d.add(c.last.Sub(c.first))
		}
	}
	s.Turns = float64(turns) / float64(len(r.convs))
	if t := round(s.Turns, 2); t != nil {
		s.Turns = *t
	}
	s.Duration = tare.QuantilesMS{P50: d.ms(50), P95: d.ms(95), P99: d.ms(99)}
	return s
}
