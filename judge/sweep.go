package judge

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tare-dev/tare"
)

// SweepRules say when one step of a capacity sweep saturated the system.
type SweepRules struct {
	// Growth: the backlog (queue depth, or requests in flight) growing by
	// more than this share of the offered rate per second saturates (10).
	Growth float64
	// MinGrowth: and growing by at least this many requests over the
	// step, so that a handful at a low rate is not taken for a trend (3).
	MinGrowth float64
	// Shortfall: completions falling short of arrivals over the arrival
	// window, warm-up left out, by more than this share saturates (20).
	Shortfall float64
	// ErrorPct: more than this share of requests failing saturates: the
	// system shed load (1).
	ErrorPct float64
}

// DefaultSweepRules returns the rules the sweep uses unless told otherwise.
func DefaultSweepRules() SweepRules {
	return SweepRules{Growth: 10, MinGrowth: 3, Shortfall: 20, ErrorPct: 1}
}

// Step judges one step of a sweep from its summary and timeline: saturated
// (the system did not keep up: it dropped or failed requests, its backlog
// grew without bound, or completions fell short of arrivals), else slo (the
// SLO failed), else ok. Every reason that applies is given in words.
//
// The backlog test reads the second half of the arrival window: in a stable
// system the backlog levels off after one latency (Little's law: λ·W), in a
// saturated one it keeps growing at λ − μ, the offered rate less the
// system's capacity.
func Step(s *tare.Summary, ticks []tare.Tick, slo SLO, rules SweepRules) tare.SweepStep {
	st := tare.SweepStep{
		RunID:        s.Run.ID,
		AchievedPerS: s.Rate.Achieved,
		P95MS:        s.Latency.P95,
		Status:       tare.StepOK,
		Reasons:      []string{},
		Verdict:      s.Verdict.Level,
		Fired:        []string{},
	}
	for _, sig := range Fired(s.Verdict) {
		st.Fired = append(st.Fired, sig.Name)
	}
	if s.Rate.Offered != nil {
		st.OfferedPerS = *s.Rate.Offered
	}
	saturated := false
	fail := func(sat bool, format string, args ...any) {
		st.Reasons = append(st.Reasons, fmt.Sprintf(format, args...))
		saturated = saturated || sat
	}
	q := s.Requests
	if q.Dropped > 0 {
		fail(true, "%d of %d arrivals dropped at the in-flight cap", q.Dropped, q.Total)
	}
	if sent := q.OK + q.Errors; sent > 0 {
		switch pct := 100 * float64(q.Errors) / float64(sent); {
		case q.OK == 0:
			// Not load shed: nothing served any of it, whatever the rate.
			fail(true, "%s", failures(s).Detail)
		case pct > rules.ErrorPct:
			fail(true, "%.1f%% of requests failed (threshold %g%%): the system shed load", pct, rules.ErrorPct)
		}
	}
	window := arrivalWindow(ticks)
	if len(window) >= 2 {
		tick := window[0].End.Sub(window[0].Start).Seconds()
		offered := st.OfferedPerS
		if growth, ok := backlogGrowth(window, tick, outstanding(s)); ok && offered > 0 {
			span := tick * float64(len(window))
			if 100*growth/offered > rules.Growth && growth*span/2 >= rules.MinGrowth {
				fail(true, "%s grew by %.1f a second over the second half of the step (%.0f%% of the offered rate; threshold %g%%)",
					backlogName(s, ticks), growth, 100*growth/offered, rules.Growth)
			}
		}
		if short, ok := shortfall(window, s.Latency.P50, tick); ok && short > rules.Shortfall {
			fail(true, "completions fell %.0f%% short of arrivals while they arrived (threshold %g%%)", short, rules.Shortfall)
		}
	}
	checks := slo.Check(s)
	for _, c := range checks {
		if !c.Met {
			fail(false, "SLO %s", describe(c))
		}
	}
	switch {
	case saturated:
		st.Status = tare.StepSaturated
	case !Met(checks):
		st.Status = tare.StepSLOFailed
	}
	return st
}

// arrivalWindow is the ticks from the first to the last that had
// arrivals.
func arrivalWindow(ticks []tare.Tick) []tare.Tick {
	first, last := -1, -1
	for i, t := range ticks {
		if t.Arrivals > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	return ticks[first : last+1]
}

func backlogName(s *tare.Summary, ticks []tare.Tick) string {
	if modelTarget(s) {
		return "in-flight"
	}
	for _, t := range ticks {
		if t.QueueDepth != nil {
			return "queue depth"
		}
	}
	return "in-flight"
}

// backlogGrowth is the least-squares slope of the backlog over the second
// half of the arrival window (at least three ticks), per second.
func backlogGrowth(window []tare.Tick, tick float64, backlog func(tare.Tick) float64) (float64, bool) {
	half := window[len(window)/2:]
	if len(half) < 3 {
		half = window[max(len(window)-3, 0):]
	}
	n := float64(len(half))
	if n < 2 || !(tick > 0) {
		return 0, false
	}
	var sx, sy, sxx, sxy float64
	for i, t := range half {
		x, y := float64(i), backlog(t)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	return (n*sxy - sx*sy) / den / tick, true
}

// shortfall is how far completions fell short of arrivals over the arrival
// window, in percent, leaving out the warm-up: the first tick, or as many
// as the median latency spans, since completions trail arrivals by about
// one latency.
func shortfall(window []tare.Tick, p50 *float64, tick float64) (float64, bool) {
	warm := 1
	if p50 != nil && tick > 0 {
		warm = max(warm, int(math.Ceil(*p50/1000/tick)))
	}
	if warm >= len(window) {
		return 0, false
	}
	arrivals, completions := 0, 0
	for _, t := range window[warm:] {
		arrivals += t.Arrivals
		completions += t.Completions
	}
	if arrivals == 0 {
		return 0, false
	}
	return 100 * (1 - float64(completions)/float64(arrivals)), true
}

// SweepPlan is the shape of a capacity search, in requests per second.
type SweepPlan struct {
	From, To float64
	Step     float64 // added at each step while raising; 0 doubles the rate instead
	Narrow   int     // bisection steps between the last rate that held and the first that failed
}

// DefaultNarrow is how many bisection steps follow the first failure.
const DefaultNarrow = 2

// Validate reports the first field that is out of range, as a *tare.Error
// with code EINVALID naming the flag.
func (p SweepPlan) Validate() error {
	switch {
	case !(p.From > 0):
		return tare.SettingErrorf(tare.EINVALID, "from", "must be a positive rate, like 1/s; got %g/s", p.From)
	case !(p.To >= p.From):
		return tare.SettingErrorf(tare.EINVALID, "to", "must be at least %s (%s); got %s", tare.Setting("from"), FormatRate(p.From), FormatRate(p.To))
	case p.Step < 0:
		return tare.SettingErrorf(tare.EINVALID, "step", "must be a positive rate, or 0 to double the rate at each step; got %g/s", p.Step)
	case p.Narrow < 0:
		return tare.SettingErrorf(tare.EINVALID, "narrow", "must be 0 or more steps; got %d", p.Narrow)
	case p.Step > 0 && (p.To-p.From)/p.Step > 1000:
		return tare.SettingErrorf(tare.EINVALID, "step", "%s from %s to %s makes more than 1000 steps: use a larger step", FormatRate(p.Step), FormatRate(p.From), FormatRate(p.To))
	}
	return nil
}

// raising is the sequence of rates of the raising phase: From, then each
// step up, then To itself when the steps overshoot it.
func (p SweepPlan) raising() []float64 {
	var out []float64
	for r := p.From; r <= p.To*(1+1e-9); {
		out = append(out, r)
		if p.Step > 0 {
			r = p.From + float64(len(out))*p.Step
		} else {
			r *= 2
		}
	}
	if last := out[len(out)-1]; last < p.To*(1-1e-9) {
		out = append(out, p.To)
	}
	return out
}

// MaxSteps is the most steps the search can take: every raising step, then
// the narrowing ones.
func (p SweepPlan) MaxSteps() int { return len(p.raising()) + p.Narrow }

// Search is the capacity search as a state machine: Next says which rate to
// run, Record says whether it held. It raises the rate along the plan until
// a step fails (the SLO, or saturation: there is no point going higher),
// then bisects between the last rate that held and the first that failed.
// It is pure: the caller runs the steps.
type Search struct {
	plan    SweepPlan
	rates   []float64 // the raising phase
	i       int       // next raising step
	lo, hi  float64   // highest rate that held, lowest that failed (0: none yet)
	narrows int       // narrowing steps taken
	pending float64   // the rate handed out by Next, awaiting Record
	done    bool
	why     string
}

// NewSearch returns a search for plan, or a *tare.Error when the plan is
// out of range.
func NewSearch(plan SweepPlan) (*Search, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	return &Search{plan: plan, rates: plan.raising()}, nil
}

// Next returns the rate of the next step, or false when the search is over.
func (s *Search) Next() (float64, bool) {
	if s.done {
		return 0, false
	}
	if s.hi == 0 {
		if s.i >= len(s.rates) {
			s.done = true
			s.why = fmt.Sprintf("every step up to --to %s held: the capacity is at least that; raise --to to find it", FormatRate(s.plan.To))
			return 0, false
		}
		s.pending = s.rates[s.i]
		return s.pending, true
	}
	if s.lo == 0 {
		s.done = true
		s.why = fmt.Sprintf("the first step, %s, already failed: lower --from", FormatRate(s.hi))
		return 0, false
	}
	mid := roundRate((s.lo + s.hi) / 2)
	if s.narrows >= s.plan.Narrow || mid <= s.lo || mid >= s.hi {
		s.done = true
		s.why = fmt.Sprintf("narrowed to between %s (held) and %s (failed)", FormatRate(s.lo), FormatRate(s.hi))
		return 0, false
	}
	s.pending = mid
	return mid, true
}

// Record says whether the step at rate, the one Next returned, held.
func (s *Search) Record(rate float64, held bool) {
	if s.hi == 0 {
		s.i++
	} else {
		s.narrows++
	}
	switch {
	case held && rate > s.lo && (s.hi == 0 || rate < s.hi):
		s.lo = rate
	case !held && (s.hi == 0 || rate < s.hi):
		s.hi = rate
	}
}

// Result is the capacity found: the highest rate that held below the
// lowest that failed (ok false when none held), whether it is only a lower
// bound (nothing failed), and why the search ended.
func (s *Search) Result() (capacity float64, ok, atLeast bool, why string) {
	return s.lo, s.lo > 0, s.hi == 0 && s.lo > 0, s.why
}

// roundRate keeps three significant figures: a narrowed rate of
// 26.171875/s is run as 26.2/s.
func roundRate(r float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(r, 'g', 3, 64), 64)
	return v
}

// FormatRate prints a rate per second the way the flags take it: 26.2/s.
func FormatRate(r float64) string {
	return strconv.FormatFloat(r, 'g', 6, 64) + "/s"
}
