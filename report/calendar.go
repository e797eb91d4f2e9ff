package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tare-dev/tare"
)

// CalendarJSON writes the calendar as one indented tare.calendar/v1
// object.
func CalendarJSON(w io.Writer, c *tare.Calendar) error {
	return writeJSON(w, c, "calendar")
}

// CalendarLine is one calendar sample as `tare check --every` prints it:
// when, which host, its verdict and figures, its busiest neighbours, and
// what it cost tare.
func CalendarLine(s *tare.CalendarSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %-8s  interference %s  steal %s  psi %s  run delay %s",
		s.Start.Local().Format("2006-01-02 15:04:05"), s.Host, s.Level, pct(s.InterferencePct), pct(s.StealPct),
		pct(s.PSISomePct), pct(s.RunDelayPct))
	if names := topNames(s.TopOthers, 3); names != "" {
		b.WriteString("  busiest: " + names)
	}
	if s.CostCPUMS != nil {
		fmt.Fprintf(&b, "  · %.0f ms of tare's CPU", *s.CostCPUMS)
	}
	return b.String()
}

// topNames names the busiest processes with their share of the host's CPU
// time, those above 0.5 % only, n at most.
func topNames(ps []tare.ProcessShare, n int) string {
	var parts []string
	for _, p := range ps {
		if p.CPUPct < 0.5 || len(parts) == n {
			break
		}
		name := p.Name
		if p.Container != nil {
			name = p.Container.String()
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", name, p.CPUPct))
	}
	return strings.Join(parts, ", ")
}

// CalendarText writes a host's calendar for a person: the span read, the
// hours of the day with their figures, spread and busiest neighbours, the
// days drawn hour by hour, the findings (the quietest and busiest hours
// and how sure, or too few days to tell), the weekdays, and the cost.
func CalendarText(w io.Writer, c *tare.Calendar) error {
	p := &printer{w: w}
	p.line("calendar of host %s  ·  the last %s in %s (%s → %s)", c.Host, plural(c.DaysAsked, "day", "days"), c.TZ,
		c.From.Format("2006-01-02 15:04"), c.To.Format("2006-01-02 15:04"))
	p.line("  %s with samples, %s", plural(c.Days, "day", "days"), plural(c.Samples, "sample", "samples"))
	p.line("")
	p.line("by hour  interference = steal + other processes' CPU, %% of the host's CPU time: mean (10th–90th percentile of the samples)")
	if p.err == nil {
		p.err = table(w, func(tw io.Writer) { hourTable(tw, c) })
	}
	p.line("")
	p.line("by day   each column an hour from 00:00; · no sample, ░ under 5%%, ▒ under 10%%, ▓ under 50%%, █ 50%% or more")
	dayRows(p, c)
	p.line("")
	p.line("findings")
	for _, f := range c.Findings {
		p.line("  · %s", f)
	}
	for _, warn := range c.Warnings {
		p.line("  ! %s", warn)
	}
	if len(c.Weekdays) > 0 {
		p.line("")
		p.line("by weekday  mean interference, and its quietest and busiest hour")
		for _, wd := range c.Weekdays {
			lo, hi := extremeHours(wd.Hours)
			p.line("  %-10s %6s%%  quietest %s, busiest %s  (%s, %s)", wd.Weekday, num(wd.InterferencePct), lo, hi,
				plural(wd.Days, "day", "days"), plural(wd.Samples, "sample", "samples"))
		}
	} else if c.Days > 0 {
		p.line("  · Not split by weekday yet: that needs every weekday seen on 2 dates.")
	}
	if c.Cost != nil {
		p.line("")
		p.line("cost     %s", costText(c.Cost))
	}
	if len(c.OtherHosts) > 0 {
		var names []string
		for _, h := range c.OtherHosts {
			names = append(names, fmt.Sprintf("%s (%d samples)", h.Host, h.Samples))
		}
		p.line("")
		p.line("other hosts in this store (--host): %s", strings.Join(names, ", "))
	}
	return p.err
}

// extremeHours are the hours of the lowest and the highest mean, "-"
// when none has one.
func extremeHours(hours []*float64) (lo, hi string) {
	l, h := -1, -1
	for i, v := range hours {
		if v == nil {
			continue
		}
		if l < 0 || *v < *hours[l] {
			l = i
		}
		if h < 0 || *v > *hours[h] {
			h = i
		}
	}
	if l < 0 {
		return "-", "-"
	}
	return fmt.Sprintf("%02d:00", l), fmt.Sprintf("%02d:00", h)
}

func costText(c *tare.CalendarCost) string {
	return fmt.Sprintf("%.0f ms of tare's CPU a sample, %.0f samples a day: %.1f s of CPU a day (%.3f%% of one CPU)",
		c.CPUMSPerSample, c.SamplesPerDay, c.CPUSPerDay, c.CPUPct)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// hourRows are the calendar's hours as table cells.
func hourRows(c *tare.Calendar) [][]string {
	var rows [][]string
	for _, h := range c.Hours {
		row := []string{fmt.Sprintf("%02d:00", h.Hour), fmt.Sprint(h.Samples), fmt.Sprint(h.Days)}
		if h.Samples == 0 {
			rows = append(rows, append(row, "-", "-", "-", "-", "-", "-", "", ""))
			continue
		}
		sp := h.InterferencePct
		inter := num(sp.Mean)
		if sp.P10 != nil {
			inter += fmt.Sprintf(" (%s–%s)", num(sp.P10), num(sp.P90))
		}
		var levels []string
		for _, l := range []tare.Level{tare.Polluted, tare.Suspect, tare.Clean} {
			if n := h.Levels[l]; n > 0 {
				levels = append(levels, fmt.Sprintf("%d %s", n, l))
			}
		}
		var names []string
		for _, n := range h.Neighbours {
			names = append(names, fmt.Sprintf("%s %.1f%%", n.Name, n.CPUPct))
		}
		rows = append(rows, append(row, inter, num(h.StealPct.Mean), num(h.NeighboursPct.Mean), num(h.PSISomePct.Mean),
			num(h.RunDelayPct.Mean), num(h.BusyPct.Mean), strings.Join(levels, ", "), strings.Join(names, ", ")))
	}
	return rows
}

var hourHeader = []string{"hour", "samples", "days", "interference", "steal", "neighbours", "psi some", "run delay", "busy", "verdicts", "busiest neighbours"}

func hourTable(tw io.Writer, c *tare.Calendar) {
	fmt.Fprintln(tw, "  "+strings.Join(hourHeader, "\t"))
	for _, r := range hourRows(c) {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
}

// shade is a cell's interference as a block: darker is busier, at the
// thresholds of the verdict (10 % suspect, 50 % polluted).
func shade(v *float64) string {
	switch {
	case v == nil:
		return "·"
	case *v < 5:
		return "░"
	case *v < 10:
		return "▒"
	case *v < 50:
		return "▓"
	}
	return "█"
}

// dayRows draws each day with samples as a row of 24 hours.
func dayRows(p *printer, c *tare.Calendar) {
	p.line("              000000000011111111112222")
	p.line("              012345678901234567890123")
	for _, day := range heatDays(c) {
		var b strings.Builder
		for h := range 24 {
			b.WriteString(shade(day.hours[h]))
		}
		p.line("  %s  %s", day.date, b.String())
	}
}

type heatDay struct {
	date  string
	hours [24]*float64
}

// heatDays are the calendar's cells by date, every date from the first
// sample to the last (a day without one is a row of gaps).
func heatDays(c *tare.Calendar) []heatDay {
	if len(c.Cells) == 0 {
		return nil
	}
	byDate := map[string]*heatDay{}
	for _, cell := range c.Cells {
		d := byDate[cell.Date]
		if d == nil {
			d = &heatDay{date: cell.Date}
			byDate[cell.Date] = d
		}
		d.hours[cell.Hour] = cell.InterferencePct
	}
	first, err1 := time.Parse(time.DateOnly, c.Cells[0].Date)
	last, err2 := time.Parse(time.DateOnly, c.Cells[len(c.Cells)-1].Date)
	if err1 != nil || err2 != nil {
		return nil
	}
	var out []heatDay
	for t := first; !t.After(last); t = t.AddDate(0, 0, 1) {
		date := t.Format(time.DateOnly)
		if d := byDate[date]; d != nil {
			out = append(out, *d)
		} else {
			out = append(out, heatDay{date: date})
		}
	}
	return out
}

// calendarCharts are the calendar's charts: the heatmap, day by hour,
// and the hours' profile with its spread.
func calendarCharts(c *tare.Calendar) []*chartData {
	var out []*chartData
	if hm := heatmapChart(c); hm != nil {
		out = append(out, hm)
	}
	prof := &chartData{ID: "calendar-hours", Title: "Interference by hour of the day, over every day read", Kind: kindXY,
		XLabel: "hour of the day (" + c.TZ + ")", YLabel: "% of the host's CPU", height: smallHeight + 40}
	mean, p10, p90 := seriesData{Name: "mean", Color: colNeighbours, Dots: true}, seriesData{Name: "10th percentile", Color: colThreshold, Dashed: true},
		seriesData{Name: "90th percentile", Color: colSteal, Dashed: true}
	for _, h := range c.Hours {
		x := float64(h.Hour)
		mean.Points = append(mean.Points, point{x, orNaN(h.InterferencePct.Mean)})
		p10.Points = append(p10.Points, point{x, orNaN(h.InterferencePct.P10)})
		p90.Points = append(p90.Points, point{x, orNaN(h.InterferencePct.P90)})
	}
	prof.Series = []seriesData{mean, p10, p90}
	return append(out, prof)
}

func orNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// heatData is a heatmap: a value per row and column, nil where there is
// none, coloured on a fixed scale.
type heatData struct {
	Rows   []string     `json:"rows"` // dates
	Cols   []string     `json:"cols"` // hours
	Values [][]*float64 `json:"values"`
	Scale  []heatStop   `json:"scale"`
}

// heatStop is a point of the colour scale; between stops the colour is
// interpolated, above the last it stays.
type heatStop struct {
	At    float64 `json:"at"`
	Color string  `json:"color"`
}

// heatScale colours interference at the verdict's thresholds: pale below
// 5 %, orange at 10 % (a tick polluted above it), dark red from 50 % (a
// check polluted above it). colNoSample is a cell without a sample.
var heatScale = []heatStop{{0, "#ffffcc"}, {5, "#fed976"}, {10, "#fd8d3c"}, {25, "#e31a1c"}, {50, "#800026"}}

const colNoSample = "#eeeeee"

func heatmapChart(c *tare.Calendar) *chartData {
	days := heatDays(c)
	if len(days) == 0 {
		return nil
	}
	h := &heatData{Scale: heatScale}
	for hr := range 24 {
		h.Cols = append(h.Cols, fmt.Sprintf("%02d", hr))
	}
	for _, d := range days {
		h.Rows = append(h.Rows, d.date)
		h.Values = append(h.Values, d.hours[:])
	}
	ch := &chartData{ID: "calendar-heatmap", Title: "Interference by day and hour (steal + other processes' CPU, % of the host's CPU)",
		Kind: kindHeat, XLabel: "hour of the day (" + c.TZ + ")", Heat: h}
	ch.height = ch.header() + vg.Length(len(days))*heatCell(len(days)) + 42
	return ch
}

// heatCell is the height of a heatmap row: smaller as the days grow, so
// that a year still fits a page.
func heatCell(rows int) vg.Length {
	return vg.Length(min(max(320/float64(rows), 3), 14))
}

// heatColor is v's colour on the scale.
func heatColor(v *float64) color.Color {
	if v == nil {
		return hexColor(colNoSample, 0xff)
	}
	s := heatScale
	if *v <= s[0].At {
		return hexColor(s[0].Color, 0xff)
	}
	for i := 1; i < len(s); i++ {
		if *v <= s[i].At {
			f := (*v - s[i-1].At) / (s[i].At - s[i-1].At)
			a, b := hexColor(s[i-1].Color, 0xff).(color.NRGBA), hexColor(s[i].Color, 0xff).(color.NRGBA)
			mix := func(x, y uint8) uint8 { return uint8(float64(x) + f*(float64(y)-float64(x)) + 0.5) }
			return color.NRGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xff}
		}
	}
	return hexColor(s[len(s)-1].Color, 0xff)
}

// drawHeat draws the heatmap into the chart's body: a row per date, a
// column per hour, dates on the left (as many as fit), hours below.
func (c *chartData) drawHeat(body draw.Canvas) {
	h := c.Heat
	const labelW, bottom = vg.Length(70), vg.Length(34)
	cellH := heatCell(len(h.Rows))
	gridW := body.Max.X - body.Min.X - labelW - 10
	cellW := gridW / vg.Length(len(h.Cols))
	x0, top := body.Min.X+labelW, body.Max.Y
	lbl := textStyle(sans, 8, softColor)
	lbl.XAlign, lbl.YAlign = draw.XRight, draw.YCenter
	every := max(int(math.Ceil(10/float64(cellH))), 1) // a date label every this many rows
	for r, date := range h.Rows {
		y := top - vg.Length(r+1)*cellH
		for col, v := range h.Values[r] {
			x := x0 + vg.Length(col)*cellW
			body.FillPolygon(heatColor(v), []vg.Point{{X: x, Y: y}, {X: x + cellW - 0.6, Y: y}, {X: x + cellW - 0.6, Y: y + cellH - 0.6}, {X: x, Y: y + cellH - 0.6}})
		}
		if r%every == 0 {
			body.FillText(lbl, vg.Point{X: x0 - 4, Y: y + cellH/2}, date)
		}
	}
	bottomY := top - vg.Length(len(h.Rows))*cellH
	hl := textStyle(sans, 8, softColor)
	hl.XAlign, hl.YAlign = draw.XCenter, draw.YTop
	for col, name := range h.Cols {
		body.FillText(hl, vg.Point{X: x0 + (vg.Length(col)+0.5)*cellW, Y: bottomY - 3}, name)
	}
	xl := textStyle(sans, 8.5, inkColor)
	xl.XAlign, xl.YAlign = draw.XCenter, draw.YTop
	body.FillText(xl, vg.Point{X: x0 + gridW/2, Y: bottomY - bottom/2}, c.XLabel)
}

// heatLegend is the heatmap's legend: the scale's stops and the gap.
func (c *chartData) heatLegend() []legendEntry {
	var out []legendEntry
	swatch := func(col color.Color) func(dc draw.Canvas, x, y vg.Length) {
		return func(dc draw.Canvas, x, y vg.Length) {
			dc.FillPolygon(col, []vg.Point{{X: x, Y: y - 4}, {X: x + 13, Y: y - 4}, {X: x + 13, Y: y + 4}, {X: x, Y: y + 4}})
		}
	}
	for i, s := range c.Heat.Scale {
		name := fmt.Sprintf("%g%%", s.At)
		if i == len(c.Heat.Scale)-1 {
			name = fmt.Sprintf("%g%% or more", s.At)
		}
		out = append(out, legendEntry{name, swatch(hexColor(s.Color, 0xff))})
	}
	return append(out, legendEntry{"no sample", swatch(hexColor(colNoSample, 0xff))})
}

// calendarView is the calendar's section of the page.
type calendarView struct {
	Heading  string
	Sub      string
	Findings []string
	Warnings []string
	Charts   []chartView
	Header   []string
	Hours    [][]string
	Weekdays [][]string
	Cost     string
	Others   string
}

type calendarData struct {
	Calendar *tare.Calendar `json:"calendar"`
	Charts   []*chartData   `json:"charts"`
}

func calendarSection(c *tare.Calendar, d *calendarData) (*calendarView, error) {
	v := &calendarView{
		Heading:  "Calendar of host " + c.Host,
		Sub:      fmt.Sprintf("the last %s in %s: %s with samples, %s", plural(c.DaysAsked, "day", "days"), c.TZ, plural(c.Days, "day", "days"), plural(c.Samples, "sample", "samples")),
		Findings: c.Findings, Warnings: c.Warnings, Header: hourHeader, Hours: hourRows(c),
	}
	for _, wd := range c.Weekdays {
		lo, hi := extremeHours(wd.Hours)
		v.Weekdays = append(v.Weekdays, []string{wd.Weekday, num(wd.InterferencePct), lo, hi, fmt.Sprint(wd.Days), fmt.Sprint(wd.Samples)})
	}
	if c.Cost != nil {
		v.Cost = "What keeping the calendar costs: " + costText(c.Cost) + "."
	}
	if len(c.OtherHosts) > 0 {
		var names []string
		for _, h := range c.OtherHosts {
			names = append(names, fmt.Sprintf("%s (%d samples)", h.Host, h.Samples))
		}
		v.Others = "Other hosts with a calendar in this store: " + strings.Join(names, ", ") + "."
	}
	var err error
	v.Charts, err = charts(d.Charts)
	return v, err
}

// calendarChecksText prints, of each window chosen from the host's
// calendar, whether it measured as the calendar predicted.
func calendarChecksText(p *printer, checks []tare.WindowCheck) {
	if len(checks) == 0 {
		return
	}
	p.line("")
	p.line("calendar  the windows chosen from host %s's calendar, as measured", checks[0].Host)
	for _, wc := range checks {
		mark := "?"
		if wc.AsPredicted != nil {
			mark = map[bool]string{true: "✓", false: "✗"}[*wc.AsPredicted]
		}
		p.line("  %s %s", mark, wc.Verdict)
	}
}
