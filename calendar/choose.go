package calendar

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// Want is a protocol window to choose from the calendar.
type Want struct {
	Window string // peak, offpeak or mid
	Choice string // tare.ChoiceQuietest, ChoiceBusiest or ChoiceTypical
}

// span is length whole hours of the day from start, through midnight.
type span struct{ start, length int }

func (s span) hours() []int {
	hs := make([]int, s.length)
	for i := range hs {
		hs[i] = (s.start + i) % 24
	}
	return hs
}

func (s span) overlaps(blocked [24]bool) bool {
	for _, h := range s.hours() {
		if blocked[h] {
			return true
		}
	}
	return false
}

// daily is the span's interference on date i: the mean of its hours that
// day; NaN when none was sampled.
func (s span) daily(d *days, i int) float64 {
	sum, k := 0.0, 0
	for _, h := range s.hours() {
		if v := d.mean[i][h]; !math.IsNaN(v) {
			sum += v
			k++
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return sum / float64(k)
}

// mean is the mean of the span's daily values over the drawn dates (all
// when draw is nil); NaN when none has it.
func (s span) mean(d *days, draw []int) float64 {
	sum, k := 0.0, 0
	add := func(i int) {
		if v := s.daily(d, i); !math.IsNaN(v) {
			sum += v
			k++
		}
	}
	if draw == nil {
		for i := range d.dates {
			add(i)
		}
	} else {
		for _, i := range draw {
			add(i)
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return sum / float64(k)
}

// hoursOf marks the hours of the day a window touches.
func hoursOf(w tare.Window, blocked *[24]bool) {
	from := int(w.From / time.Hour)
	to := int((w.To + time.Hour - 1) / time.Hour) // an end at 16:30 touches 16:00
	if to <= from {
		to += 24
	}
	for h := from; h < to; h++ {
		blocked[h%24] = true
	}
}

// Choose picks each wanted window from the host's calendar, length long
// (in whole hours, at least one): the quietest span of the day, the
// busiest, or the typical one (nearest the median), in that order, none
// overlapping another or the fixed windows. Each choice carries the
// evidence: the interference it predicts with its interval, the range of
// one day's, and how sure the resamples of the days make it. Warnings
// say where the calendar cannot tell the windows apart.
//
// With too few days to tell (MinDays), or no span left to choose, it
// returns an *tare.Error with code EINVALID saying so.
func Choose(samples []tare.CalendarSample, cfg Config, wants []Want, fixed []tare.Window, length time.Duration) ([]tare.WindowChoice, []string, error) {
	d := layout(samples, cfg)
	if ok, why := d.enough(cfg); !ok {
		return nil, nil, tare.Errorf(tare.EINVALID, "windows from the calendar: too few days to tell: %s. Keep `tare check --every 5m --for 10s` running on it, or give the windows as times (peak: 14:00-16:00)", why)
	}
	hours := max(int((length+time.Hour-1)/time.Hour), 1)
	if hours > 12 {
		return nil, nil, tare.Errorf(tare.EINVALID, "windows from the calendar: the load takes %s, and a window chosen from the calendar spans at most 12 hours", length.Round(time.Minute))
	}
	var blocked [24]bool
	for _, w := range fixed {
		hoursOf(w, &blocked)
	}
	eligible := d.eligible()
	var spans []span
	for start := range 24 {
		s := span{start, hours}
		if !slices.ContainsFunc(s.hours(), func(h int) bool { return !slices.Contains(eligible, h) }) {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		return nil, nil, tare.Errorf(tare.EINVALID, "windows from the calendar: no %s of host %s's day was sampled on %d days or more", spanWords(hours), cfg.Host, MinDays)
	}
	var medians []float64
	for _, s := range spans {
		medians = append(medians, s.mean(d, nil))
	}
	slices.Sort(medians)
	median := quantile(medians, 0.5)

	var out []tare.WindowChoice
	var warnings []string
	for _, choice := range []string{tare.ChoiceQuietest, tare.ChoiceBusiest, tare.ChoiceTypical} {
		for _, w := range wants {
			if w.Choice != choice {
				continue
			}
			score := scorer(choice, median)
			best, ok := pick(spans, blocked, func(s span) float64 { return score(s.mean(d, nil)) })
			if !ok {
				return nil, nil, tare.Errorf(tare.EINVALID, "windows from the calendar: no %d-hour span of host %s's day is left for the %s window once the other windows are placed", hours, cfg.Host, w.Window)
			}
			c := evidence(d, cfg, spans, blocked, best, score)
			c.Window, c.Choice = w.Window, choice
			c.Detail = fmt.Sprintf("%s %s-%s: the %s %s of host %s's day over %s (%d samples): interference %.1f%% (95%% interval %.1f–%.1f%%; on 8 days in 10 from %.1f%% to %.1f%%), the %s in %.0f%% of %d resamples of the days",
				c.Window, c.From, c.To, choiceWords(choice), spanWords(hours), cfg.Host, plural(c.Days, "day", "days"), c.Samples,
				c.Predicted, c.Low, c.High, c.DayLow, c.DayHigh, choiceWords(choice), c.Sure, cfg.resamples())
			out = append(out, c)
			for _, h := range best.hours() {
				blocked[h] = true
			}
		}
	}
	if len(out) > 1 {
		if p := hourEffect(d, cfg); p >= alpha {
			warnings = append(warnings, fmt.Sprintf("the calendar of host %s cannot tell its hours apart (p = %.2f over %s): the windows differ by the hour only, not by what the host does then",
				cfg.Host, p, plural(len(d.dates), "day", "days")))
		}
	}
	// In the order the plan gave them.
	slices.SortStableFunc(out, func(a, b tare.WindowChoice) int {
		return slices.IndexFunc(wants, func(w Want) bool { return w.Window == a.Window }) -
			slices.IndexFunc(wants, func(w Want) bool { return w.Window == b.Window })
	})
	return out, warnings, nil
}

// spanWords names a span of hours: "hour", "2 hours".
func spanWords(hours int) string {
	if hours == 1 {
		return "hour"
	}
	return fmt.Sprintf("%d hours", hours)
}

func choiceWords(choice string) string {
	if choice == tare.ChoiceTypical {
		return "most typical"
	}
	return choice
}

// scorer turns a span's mean into a score to maximise.
func scorer(choice string, median float64) func(m float64) float64 {
	switch choice {
	case tare.ChoiceQuietest:
		return func(m float64) float64 { return -m }
	case tare.ChoiceBusiest:
		return func(m float64) float64 { return m }
	}
	return func(m float64) float64 { return -math.Abs(m - median) }
}

// pick is the span of the highest score not overlapping blocked hours (the
// earliest among equals).
func pick(spans []span, blocked [24]bool, score func(span) float64) (span, bool) {
	best, bestScore, found := span{}, math.Inf(-1), false
	for _, s := range spans {
		if s.overlaps(blocked) {
			continue
		}
		if v := score(s); !math.IsNaN(v) && v > bestScore {
			best, bestScore, found = s, v, true
		}
	}
	return best, found
}

// evidence is what the calendar says of the chosen span: its mean and
// interval, one day's range, and the share of resamples in which the
// span chosen from them overlaps it.
func evidence(d *days, cfg Config, spans []span, blocked [24]bool, chosen span, score func(float64) float64) tare.WindowChoice {
	c := tare.WindowChoice{
		From: clock(chosen.start), To: clock(chosen.start + chosen.length), Host: cfg.Host,
		Predicted: chosen.mean(d, nil), CalendarFrom: cfg.From(), CalendarTo: cfg.Now,
	}
	var daily []float64
	for i := range d.dates {
		if v := chosen.daily(d, i); !math.IsNaN(v) {
			daily = append(daily, v)
			c.Days++
			for _, h := range chosen.hours() {
				c.Samples += d.all[i][h]
			}
		}
	}
	slices.Sort(daily)
	c.DayLow, c.DayHigh = quantile(daily, 0.1), quantile(daily, 0.9)
	rng := seeded(cfg, d)
	var draw []int
	var means []float64
	same := 0
	var mine [24]bool
	for _, h := range chosen.hours() {
		mine[h] = true
	}
	for range cfg.resamples() {
		draw = resample(rng, len(d.dates), draw)
		if m := chosen.mean(d, draw); !math.IsNaN(m) {
			means = append(means, m)
		}
		if s, ok := pick(spans, blocked, func(s span) float64 { return score(s.mean(d, draw)) }); ok && s.overlaps(mine) {
			same++
		}
	}
	slices.Sort(means)
	tail := (1 - confidence) / 2
	if len(means) > 0 {
		c.Low, c.High = quantile(means, tail), quantile(means, 1-tail)
	}
	c.Sure = 100 * float64(same) / float64(cfg.resamples())
	return c
}

// slackPct is how far, in points of interference, a measured window may
// stray past one day's range of the calendar and still count as
// predicted: a quiet host's background wobbles by about that much.
const slackPct = 1

// Verify says of each chosen window whether the interference measured
// during its run (by window name; missing or nil: not measured) was as
// the calendar predicted: a quietest window no busier than its 90th
// percentile day, a busiest one no quieter than its 10th, a typical one
// between, each with slackPct of slack.
func Verify(choices []tare.WindowChoice, measured map[string]*float64) []tare.WindowCheck {
	var out []tare.WindowCheck
	for _, c := range choices {
		wc := tare.WindowCheck{WindowChoice: c, Measured: measured[c.Window]}
		head := fmt.Sprintf("%s (%s-%s, the calendar's %s)", c.Window, c.From, c.To, choiceWords(c.Choice))
		usual := fmt.Sprintf("the calendar predicted %.1f%%, and %.1f–%.1f%% on 8 days in 10", c.Predicted, c.DayLow, c.DayHigh)
		if wc.Measured == nil {
			wc.Verdict = head + ": its run did not measure whose CPU it was, so it cannot be set against the calendar (" + usual + ")"
			out = append(out, wc)
			continue
		}
		m := *wc.Measured
		quieter, busier := m < c.DayLow-slackPct, m > c.DayHigh+slackPct
		var ok bool
		var words string
		switch c.Choice {
		case tare.ChoiceQuietest:
			ok, words = !busier, "as quiet as predicted"
			if busier {
				words = "busier than predicted: something ran then that the calendar had not seen at that hour (the window's neighbours say who), or the calendar is out of date"
			}
		case tare.ChoiceBusiest:
			ok, words = !quieter, "as busy as predicted"
			if quieter {
				words = "quieter than predicted: the neighbour that usually keeps this hour busy did not run, so the window did not meet the host at its worst"
			}
		default:
			ok, words = !quieter && !busier, "as typical as predicted"
			if quieter {
				words = "quieter than predicted"
			} else if busier {
				words = "busier than predicted"
			}
		}
		wc.AsPredicted = &ok
		wc.Verdict = fmt.Sprintf("%s: measured %.1f%% interference, %s (%s)", head, m, words, usual)
		out = append(out, wc)
	}
	return out
}
