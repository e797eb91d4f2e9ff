package calendar

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// confidence is the level of every interval here.
const confidence = 0.95

// eligible are the hours sampled on MinDays dates or more: those ranked.
func (d *days) eligible() []int {
	var hs []int
	for h := range 24 {
		if d.daysOf(h) >= MinDays {
			hs = append(hs, h)
		}
	}
	return hs
}

// enough reports whether the days can rank the hours, and if not, why in
// words.
func (d *days) enough(cfg Config) (bool, string) {
	span := ""
	if len(d.dates) > 0 {
		span = fmt.Sprintf(" (%s to %s)", d.dates[0].Format(time.DateOnly), d.dates[len(d.dates)-1].Format(time.DateOnly))
	}
	switch hs := d.eligible(); {
	case len(d.dates) < MinDays:
		return false, fmt.Sprintf("the calendar of host %s has samples on %s of the last %d%s; ranking its hours takes %d, and until then any hour named would be chance",
			cfg.Host, plural(len(d.dates), "day", "days"), cfg.days(), span, MinDays)
	case len(hs) < 2:
		return false, fmt.Sprintf("the calendar of host %s has %s of samples%s, but fewer than two hours of the day were sampled on %d of them",
			cfg.Host, plural(len(d.dates), "day", "days"), span, MinDays)
	}
	return true, ""
}

// hourDraws are the hours' means over each resample of the days: the
// bootstrap that ranks the hours.
type hourDraws struct {
	hours []int       // the eligible hours
	means [][]float64 // [resample][i]: hours[i]'s mean; NaN when no date drawn has it
}

func drawHours(d *days, cfg Config) hourDraws {
	hd := hourDraws{hours: d.eligible()}
	rng := seeded(cfg, d)
	var draw []int
	for range cfg.resamples() {
		draw = resample(rng, len(d.dates), draw)
		row := make([]float64, len(hd.hours))
		for i, h := range hd.hours {
			row[i] = math.NaN()
			if m, ok := dailyMean(d, h, draw); ok {
				row[i] = m
			}
		}
		hd.means = append(hd.means, row)
	}
	return hd
}

// rank fills the calendar's quietest and busiest hours and its findings.
func rank(c *tare.Calendar, d *days, cfg Config) {
	ok, why := d.enough(cfg)
	c.Enough = ok
	if !ok {
		c.Findings = append(c.Findings, "Too few days to tell: "+why+". Keep `tare check --every` running.")
		return
	}
	hd := drawHours(d, cfg)
	if len(hd.hours) < 24 {
		var left []string
		for h := range 24 {
			if !slices.Contains(hd.hours, h) {
				left = append(left, clock(h))
			}
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("not ranked, sampled on fewer than %d days: %s", MinDays, strings.Join(left, ", ")))
	}
	c.Quietest = hd.extreme(d, -1, len(d.dates))
	c.Busiest = hd.extreme(d, +1, len(d.dates))
	c.Findings = append(c.Findings, c.Quietest.Detail, c.Busiest.Detail)
	p := hourEffect(d, cfg)
	c.HourEffectP = &p
	c.Findings = append(c.Findings, differWords(p, len(d.dates), cfg.resamples()))
}

// alpha is the level below which the hours differ beyond chance.
const alpha = 0.05

// differWords says whether the hours differ, from the permutation test's
// p-value.
func differWords(p float64, ndays, perms int) string {
	test := fmt.Sprintf("permutation test: p = %.2g from %d shuffles of each day's hours among themselves, over %s", p, perms, plural(ndays, "day", "days"))
	if p < alpha {
		return "The hours differ beyond day-to-day chance (" + test + ")."
	}
	return "The calendar does not tell its hours apart (" + test + "): this host is about as quiet at one hour as at another."
}

// hourEffect is the p-value of the hour of the day making no difference:
// under that null, the hours of one day are exchangeable, so each day's
// values are shuffled among its ranked hours, and the spread between the
// highest and the lowest hour mean is set against the observed one. The
// extremes of 24 hours are always apart by some chance amount; the test
// asks whether they are further apart than that.
func hourEffect(d *days, cfg Config) float64 {
	hours := d.eligible()
	spread := func(vals [][]float64) float64 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for j := range hours {
			sum, k := 0.0, 0
			for i := range vals {
				if v := vals[i][j]; !math.IsNaN(v) {
					sum += v
					k++
				}
			}
			if k > 0 {
				lo, hi = min(lo, sum/float64(k)), max(hi, sum/float64(k))
			}
		}
		return hi - lo
	}
	vals := make([][]float64, len(d.dates))
	for i := range d.dates {
		vals[i] = make([]float64, len(hours))
		for j, h := range hours {
			vals[i][j] = d.mean[i][h]
		}
	}
	observed := spread(vals)
	rng := seeded(cfg, d)
	shuffled := make([][]float64, len(vals))
	for i := range vals {
		shuffled[i] = slices.Clone(vals[i])
	}
	as := 0
	for range cfg.resamples() {
		for i := range shuffled {
			rng.Shuffle(len(shuffled[i]), func(a, b int) { shuffled[i][a], shuffled[i][b] = shuffled[i][b], shuffled[i][a] })
		}
		if spread(shuffled) >= observed-1e-9 {
			as++
		}
	}
	return float64(as+1) / float64(cfg.resamples()+1)
}

// extreme is the quietest hour (sign −1) or the busiest (+1), with how
// sure the resamples make it.
func (hd hourDraws) extreme(d *days, sign float64, ndays int) *tare.HourRank {
	best, bestMean := -1, 0.0
	for _, h := range hd.hours {
		m, _ := dailyMean(d, h, nil)
		if best < 0 || sign*m > sign*bestMean {
			best, bestMean = h, m
		}
	}
	idx := slices.Index(hd.hours, best)
	wins := map[int]int{}
	var means []float64
	var ranks []int
	for _, row := range hd.means {
		top, rankOf := -1, 1
		for i, m := range row {
			if math.IsNaN(m) {
				continue
			}
			if top < 0 || sign*m > sign*row[top] {
				top = i
			}
			if i != idx && !math.IsNaN(row[idx]) && sign*m > sign*row[idx] {
				rankOf++
			}
		}
		if top >= 0 {
			wins[hd.hours[top]]++
		}
		if !math.IsNaN(row[idx]) {
			means = append(means, row[idx])
			ranks = append(ranks, rankOf)
		}
	}
	slices.Sort(means)
	slices.Sort(ranks)
	n := float64(len(hd.means))
	r := &tare.HourRank{Hour: best, Mean: bestMean, Sure: 100 * float64(wins[best]) / n}
	tail := (1 - confidence) / 2
	if len(means) > 0 {
		r.Low, r.High = quantile(means, tail), quantile(means, 1-tail)
		r.Ranks = [2]int{ranks[int(tail*float64(len(ranks)-1))], ranks[int(math.Ceil((1-tail)*float64(len(ranks)-1)))]}
	}
	for h, w := range wins {
		if h != best && 100*float64(w)/n >= alsoPct {
			r.Also = append(r.Also, tare.HourShare{Hour: h, Pct: 100 * float64(w) / n})
		}
	}
	slices.SortFunc(r.Also, func(a, b tare.HourShare) int { return cmp.Or(cmp.Compare(b.Pct, a.Pct), cmp.Compare(a.Hour, b.Hour)) })
	word := "quietest"
	if sign > 0 {
		word = "busiest"
	}
	r.Detail = fmt.Sprintf("The %s hour is %s–%s: interference %.1f%% of the host's CPU (95%% interval %.1f–%.1f%%), the %s in %.0f%% of %d resamples of the %s",
		word, clock(best), clock(best+1), bestMean, r.Low, r.High, word, r.Sure, len(hd.means), plural(ndays, "day", "days"))
	switch {
	case r.Sure >= 95:
		r.Detail += "."
	case len(r.Also) > 0:
		var also []string
		for _, a := range r.Also {
			also = append(also, fmt.Sprintf("%s (%.0f%%)", clock(a.Hour), a.Pct))
		}
		r.Detail += fmt.Sprintf(": not sure; %s could be it too.", strings.Join(also, ", "))
	default:
		r.Detail += ": not sure; no other hour stands out either."
	}
	return r
}
