package calendar

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// Defaults of Config.
const (
	DefaultDays      = 28   // the span a history reads: four of each weekday
	DefaultResamples = 2000 // of the days, for the intervals
	// MinDays is how many days of samples an hour needs before the hours
	// are ranked (see the package documentation for why 5).
	MinDays = 5
	// minWeekdayDates is how many dates of every weekday the weekday
	// split needs.
	minWeekdayDates = 2
	// alsoPct is the share of resamples from which another hour that came
	// out quietest (busiest) is named beside the chosen one.
	alsoPct = 5
)

// Config is what a calendar is built for; the zero value of each field
// means its default.
type Config struct {
	Host string
	// Loc is the zone the hours of the day are counted in; time.Local
	// when nil.
	Loc *time.Location
	// Now ends the span read; samples from Now − Days to Now count.
	Now time.Time
	// Days is the span read, in days; DefaultDays when 0.
	Days int
	// Seed seeds the bootstrap; Resamples is its number of draws
	// (DefaultResamples when 0).
	Seed      uint64
	Resamples int
}

func (c Config) loc() *time.Location { return cmp.Or(c.Loc, time.Local) }
func (c Config) days() int           { return cmp.Or(c.Days, DefaultDays) }
func (c Config) resamples() int      { return cmp.Or(c.Resamples, DefaultResamples) }

// From is the start of the span read.
func (c Config) From() time.Time { return c.Now.AddDate(0, 0, -c.days()) }

// Sample is the calendar sample of a host-only window (tare check): its
// figures, verdict and busiest neighbours, and cost, the CPU time tare
// spent on it (nil when not measured).
func Sample(host string, s *tare.Summary, cost *time.Duration) tare.CalendarSample {
	h := &s.Host
	c := tare.CalendarSample{
		Host:             host,
		Start:            s.Run.StartedAt,
		End:              s.Run.EndedAt,
		Level:            s.Verdict.Level,
		InterferencePct:  h.Interference(),
		StealPct:         h.Steal.Mean,
		BusyPct:          h.CPUBusyPct,
		PSISomePct:       h.PSISomePct,
		ThrottledPct:     h.ThrottledPct,
		RunDelayPct:      h.RunDelayPct,
		PollutedTicksPct: h.PollutedTicksPct,
		Ticks:            h.Ticks,
	}
	if h.CPUBy != nil {
		c.NeighboursPct = tare.Float(h.CPUBy.Neighbours())
		c.TopOthers = h.CPUBy.TopOthers
	}
	if cost != nil {
		c.CostCPUMS = tare.Float(float64(*cost) / float64(time.Millisecond))
	}
	return c
}

// days is the samples' interference laid out by date and hour of the day:
// the unit the rankings resample.
type days struct {
	dates []time.Time   // midnight of each date with a sample, in order
	mean  [][24]float64 // each date's mean interference per hour; NaN where none
	n     [][24]int     // samples with an interference, per date and hour
	all   [][24]int     // samples, per date and hour
	hours [24][]tare.CalendarSample
}

// layout sorts the samples in [cfg.From(), cfg.Now) into dates and hours.
func layout(samples []tare.CalendarSample, cfg Config) *days {
	loc, from := cfg.loc(), cfg.From()
	dateOf := func(t time.Time) time.Time {
		y, m, dd := t.In(loc).Date()
		return time.Date(y, m, dd, 0, 0, 0, 0, loc)
	}
	var in []tare.CalendarSample
	d := &days{}
	for _, s := range samples {
		if !s.Start.Before(from) && s.Start.Before(cfg.Now) {
			in = append(in, s)
			d.dates = append(d.dates, dateOf(s.Start))
		}
	}
	slices.SortFunc(d.dates, time.Time.Compare)
	d.dates = slices.CompactFunc(d.dates, time.Time.Equal)
	d.mean = make([][24]float64, len(d.dates))
	d.n = make([][24]int, len(d.dates))
	d.all = make([][24]int, len(d.dates))
	for _, s := range in {
		i, _ := slices.BinarySearchFunc(d.dates, dateOf(s.Start), time.Time.Compare)
		h := s.Start.In(loc).Hour()
		d.hours[h] = append(d.hours[h], s)
		d.all[i][h]++
		if s.InterferencePct != nil {
			d.mean[i][h] += *s.InterferencePct
			d.n[i][h]++
		}
	}
	for i := range d.dates {
		for h := range 24 {
			if d.n[i][h] > 0 {
				d.mean[i][h] /= float64(d.n[i][h])
			} else {
				d.mean[i][h] = math.NaN()
			}
		}
	}
	return d
}

// daysOf is how many dates have an interference at hour h.
func (d *days) daysOf(h int) int {
	k := 0
	for i := range d.dates {
		if d.n[i][h] > 0 {
			k++
		}
	}
	return k
}

// Build is the host's calendar over the span cfg reads, from its samples
// (any order; those outside the span are left out).
func Build(samples []tare.CalendarSample, cfg Config) *tare.Calendar {
	d := layout(samples, cfg)
	c := &tare.Calendar{
		Schema: tare.CalendarSchema, Host: cfg.Host, TZ: cfg.loc().String(),
		From: cfg.From(), To: cfg.Now, DaysAsked: cfg.days(), Days: len(d.dates), MinDays: MinDays,
		Cells: []tare.CalendarCell{}, Findings: []string{},
	}
	for h := range 24 {
		c.Samples += len(d.hours[h])
		c.Hours = append(c.Hours, hour(h, d))
	}
	for i, date := range d.dates {
		for h := range 24 {
			if k := d.all[i][h]; k > 0 {
				cell := tare.CalendarCell{Date: date.Format(time.DateOnly), Hour: h, Samples: k}
				if !math.IsNaN(d.mean[i][h]) {
					cell.InterferencePct = tare.Float(d.mean[i][h])
				}
				c.Cells = append(c.Cells, cell)
			}
		}
	}
	c.Cost = cost(d)
	c.Weekdays = weekdays(d)
	rank(c, d, cfg)
	return c
}

// hour is one hour of the day over every date.
func hour(h int, d *days) tare.CalendarHour {
	ss := d.hours[h]
	out := tare.CalendarHour{Hour: h, Samples: len(ss), Days: d.daysOf(h), Levels: map[tare.Level]int{}}
	figure := func(f func(s *tare.CalendarSample) *float64) tare.Spread {
		var vs []float64
		for i := range ss {
			if v := f(&ss[i]); v != nil {
				vs = append(vs, *v)
			}
		}
		return spread(vs)
	}
	out.InterferencePct = figure(func(s *tare.CalendarSample) *float64 { return s.InterferencePct })
	out.StealPct = figure(func(s *tare.CalendarSample) *float64 { return s.StealPct })
	out.NeighboursPct = figure(func(s *tare.CalendarSample) *float64 { return s.NeighboursPct })
	out.BusyPct = figure(func(s *tare.CalendarSample) *float64 { return s.BusyPct })
	out.PSISomePct = figure(func(s *tare.CalendarSample) *float64 { return s.PSISomePct })
	out.ThrottledPct = figure(func(s *tare.CalendarSample) *float64 { return s.ThrottledPct })
	out.RunDelayPct = figure(func(s *tare.CalendarSample) *float64 { return s.RunDelayPct })
	out.PollutedTicksPct = figure(func(s *tare.CalendarSample) *float64 { return s.PollutedTicksPct })
	if m, ok := dailyMean(d, h, nil); ok {
		out.DailyPct = tare.Float(m)
	}
	for _, s := range ss {
		if s.Level != "" {
			out.Levels[s.Level]++
		}
	}
	out.Neighbours = neighbours(ss)
	return out
}

// neighboursKept is how many neighbours an hour names.
const neighboursKept = 3

// neighbours are the busiest other processes of an hour's samples, by
// name: their mean share of the host's CPU time over all the hour's
// samples (a sample that did not list one counts 0 for it; each sample
// lists its busiest few only, so a name's share is a floor).
func neighbours(ss []tare.CalendarSample) []tare.NamedCPU {
	byName := map[string]*tare.NamedCPU{}
	for _, s := range ss {
		seen := map[string]bool{}
		for _, p := range s.TopOthers {
			name := p.Name
			if p.Container != nil {
				name = p.Container.String()
			}
			n := byName[name]
			if n == nil {
				n = &tare.NamedCPU{Name: name}
				byName[name] = n
			}
			n.CPUPct += p.CPUPct
			if !seen[name] {
				seen[name] = true
				n.Samples++
			}
		}
	}
	out := make([]tare.NamedCPU, 0, len(byName))
	for _, n := range byName {
		n.CPUPct /= float64(len(ss))
		if n.CPUPct >= 0.05 {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b tare.NamedCPU) int {
		return cmp.Or(cmp.Compare(b.CPUPct, a.CPUPct), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), neighboursKept)]
}

// dailyMean is the mean over the dates of hour h's daily means; with
// draw, over the drawn dates (indices into d.dates, with repeats). False
// when no date drawn has the hour.
func dailyMean(d *days, h int, draw []int) (float64, bool) {
	sum, k := 0.0, 0
	add := func(i int) {
		if v := d.mean[i][h]; !math.IsNaN(v) {
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
		return 0, false
	}
	return sum / float64(k), true
}

// spread is the mean and the 10th and 90th percentiles of vs.
func spread(vs []float64) tare.Spread {
	if len(vs) == 0 {
		return tare.Spread{}
	}
	slices.Sort(vs)
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return tare.Spread{Mean: tare.Float(sum / float64(len(vs))), P10: tare.Float(quantile(vs, 0.1)), P90: tare.Float(quantile(vs, 0.9))}
}

// quantile is the q-quantile of sorted, linearly interpolated between the
// closest ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// cost is what the samples cost tare: the mean CPU time of a sample times
// the samples a day, from their median spacing.
func cost(d *days) *tare.CalendarCost {
	var all []tare.CalendarSample
	for h := range 24 {
		all = append(all, d.hours[h]...)
	}
	var ms []float64
	for _, s := range all {
		if s.CostCPUMS != nil {
			ms = append(ms, *s.CostCPUMS)
		}
	}
	slices.SortFunc(all, func(a, b tare.CalendarSample) int { return a.Start.Compare(b.Start) })
	var gaps []float64
	for i := 1; i < len(all); i++ {
		if g := all[i].Start.Sub(all[i-1].Start).Seconds(); g > 0 {
			gaps = append(gaps, g)
		}
	}
	if len(ms) == 0 || len(gaps) == 0 {
		return nil
	}
	slices.Sort(gaps)
	mean := 0.0
	for _, v := range ms {
		mean += v
	}
	mean /= float64(len(ms))
	perDay := 86400 / quantile(gaps, 0.5)
	perDayS := mean * perDay / 1000
	return &tare.CalendarCost{CPUMSPerSample: mean, SamplesPerDay: perDay, CPUSPerDay: perDayS, CPUPct: perDayS / 86400 * 100}
}

// weekdays splits the hours by the day of the week, once every weekday
// has been seen on minWeekdayDates dates; nil before.
func weekdays(d *days) []tare.CalendarWeekday {
	var dates [7]int
	for _, date := range d.dates {
		dates[date.Weekday()]++
	}
	if slices.Min(dates[:]) < minWeekdayDates {
		return nil
	}
	out := make([]tare.CalendarWeekday, 7)
	for wd := range 7 {
		// Monday first, as a week is read at work.
		day := time.Weekday((wd + 1) % 7)
		w := tare.CalendarWeekday{Weekday: day.String(), Days: dates[day], Hours: make([]*float64, 24)}
		all, allN := 0.0, 0
		for h := range 24 {
			sum, k := 0.0, 0
			for i, date := range d.dates {
				if date.Weekday() == day && d.n[i][h] > 0 {
					sum += d.mean[i][h] * float64(d.n[i][h])
					k += d.n[i][h]
				}
			}
			w.Samples += k
			if k > 0 {
				w.Hours[h] = tare.Float(sum / float64(k))
				all, allN = all+sum, allN+k
			}
		}
		if allN > 0 {
			w.InterferencePct = tare.Float(all / float64(allN))
		}
		out[wd] = w
	}
	return out
}

// clock is an hour of the day as a person reads it: 03:00.
func clock(h int) string { return fmt.Sprintf("%02d:00", ((h%24)+24)%24) }

// plural is "1 day" or "3 days".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// resample draws len(d.dates) dates with replacement.
func resample(rng *rand.Rand, n int, draw []int) []int {
	draw = draw[:0]
	for range n {
		draw = append(draw, rng.IntN(n))
	}
	return draw
}

// seeded is the bootstrap's generator: the seed, and the data's size, so
// that one calendar's draws do not depend on another's.
func seeded(cfg Config, d *days) *rand.Rand {
	return rand.New(rand.NewPCG(cfg.Seed, uint64(len(d.dates))<<32|0x7461))
}
