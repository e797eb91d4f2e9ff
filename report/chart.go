package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The kinds of chart.
const (
	kindTime       = "time"       // x: seconds since the run started
	kindPercentile = "percentile" // x: the nines of a latency distribution
	kindBars       = "bars"       // one horizontal bar per category
	kindRange      = "range"      // capacity bars with the gap between best and worst marked
	kindXY         = "xy"         // x and y both data, points joined by lines
	kindHeat       = "heatmap"    // a value per row and column, as colour (Heat)
	kindScatter    = "scatter"    // x: seconds since the run started; y: latency, log; a dot per point, no line
	kindPairs      = "pairs"      // x: an A/B run's pair; y: B/A, the axis around the data and 1, not from 0
)

// chartData is one chart: what the page draws and what its data part
// carries for machines. Everything a chart shows is in here, so a golden
// file of it pins the picture.
type chartData struct {
	ID     string       `json:"id"`
	Title  string       `json:"title"`
	Kind   string       `json:"kind"`
	XLabel string       `json:"x_label,omitempty"`
	YLabel string       `json:"y_label,omitempty"`
	Series []seriesData `json:"series,omitempty"`
	// Bands are shares of each tick (%) drawn as shaded areas against a
	// right-hand 0–100 % axis, under the series, on the same time axis.
	Bands []seriesData `json:"bands,omitempty"`
	Marks []markData   `json:"marks,omitempty"`
	// Stages mark where each stage of a ramp starts on a time axis.
	Stages []stageMark `json:"stages,omitempty"`
	Bars   []barData   `json:"bars,omitempty"`
	Gap    *gapData    `json:"gap,omitempty"`
	Heat   *heatData   `json:"heat,omitempty"`
	// Points is how many points the longest series had before it was
	// folded into its envelope; 0 when nothing was folded.
	Points int     `json:"downsampled_from,omitempty"`
	XMax   float64 `json:"x_max,omitempty"` // right end of a time axis, s
	YMax   float64 `json:"y_max,omitempty"` // top of the y axis when outliers are cut; 0: the data's
	Note   string  `json:"note,omitempty"`
	Unit   string  `json:"unit,omitempty"` // of the bars' values
	height vg.Length
}

type seriesData struct {
	Name   string  `json:"name"`
	Color  string  `json:"color"`
	Dashed bool    `json:"dashed,omitempty"`
	Dots   bool    `json:"dots,omitempty"` // mark each point
	Fill   bool    `json:"fill,omitempty"` // filled down to zero: a layer of a stacked chart, drawn top layer first
	Points []point `json:"points"`
}

// markData is a horizontal reference line: a threshold or an SLO.
type markData struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Band  bool    `json:"on_band_axis,omitempty"` // against the right-hand % axis
	Color string  `json:"color"`
}

// stageMark is a vertical line where a ramp's stage starts.
type stageMark struct {
	At    float64 `json:"at_s"`
	Label string  `json:"label"`
}

// Plot draws the line and its label at the top of the data area.
func (m *stageMark) Plot(c draw.Canvas, p *plot.Plot) {
	xt, _ := p.Transforms(&c)
	x := xt(m.At)
	c.StrokeLine2(draw.LineStyle{Color: hexColor(colStage, 0xff), Width: 0.8, Dashes: []vg.Length{2, 2}}, x, c.Min.Y, x, c.Max.Y)
	t := textStyle(sans, 8, hexColor(colStage, 0xff))
	t.XAlign, t.YAlign = draw.XLeft, draw.YTop
	c.FillText(t, vg.Point{X: x + 2, Y: c.Max.Y - 2}, m.Label)
}

type barData struct {
	Label string   `json:"label"`
	Value *float64 `json:"value"`
	Color string   `json:"color"`
	Text  string   `json:"text,omitempty"` // printed after the bar
}

// gapData marks the span between two values of a range chart.
type gapData struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Label string  `json:"label"`
}

// Chart geometry, in points. The left and right margins are fixed so the
// data areas of every time chart of a run line up, one under the other.
const (
	chartWidth  vg.Length = 720
	mainHeight  vg.Length = 290
	smallHeight vg.Length = 190
	leftMargin  vg.Length = 58
	rightMargin vg.Length = 46
)

var (
	sans      = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBold  = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}
	inkColor  = color.RGBA{0x33, 0x33, 0x33, 0xff}
	softColor = color.RGBA{0x77, 0x77, 0x77, 0xff}
	gridColor = color.RGBA{0xe6, 0xe6, 0xe6, 0xff}
)

func textStyle(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// hexColor parses "#rrggbb"; anything else is grey.
func hexColor(s string, alpha uint8) color.Color {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		return color.NRGBA{0x80, 0x80, 0x80, alpha}
	}
	return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), alpha}
}

// svgHead matches the prolog and the sized root element vgsvg writes, so
// the chart can sit inline in the page and scale with it.
var svgHead = regexp.MustCompile(`(?s)^<\?xml[^>]*>\s*(<!--.*?-->\s*)?<svg width="[^"]*" height="[^"]*"`)

// svg renders the chart as an inline SVG element.
func (c *chartData) svg() (string, error) {
	canvas := vgsvg.New(chartWidth, c.height)
	c.draw(draw.New(canvas))
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("render chart %s as svg: %w", c.ID, err)
	}
	out := buf.Bytes()
	loc := svgHead.FindIndex(out)
	if loc == nil {
		return "", fmt.Errorf("render chart %s as svg: unexpected svg prolog %.60q", c.ID, out)
	}
	// The id and the title are ours; the title is escaped all the same.
	head := fmt.Sprintf(`<svg class="plot" id="svg-%s" role="img" aria-label="%s"`, c.ID, htmlAttr(c.Title))
	return head + string(out[loc[1]:]), nil
}

func htmlAttr(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&quot;", `'`, "&#39;").Replace(s)
}

// writePNG renders charts one under the other as one PNG image, at twice
// the resolution of a screen so it stays sharp in a ticket.
func writePNG(w io.Writer, charts []*chartData) error {
	var total vg.Length
	for _, c := range charts {
		total += c.height
	}
	canvas := vgimg.NewWith(vgimg.UseWH(chartWidth, total), vgimg.UseDPI(144), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(canvas)
	top := total
	for _, c := range charts {
		sub := dc
		sub.Max.Y, sub.Min.Y = top, top-c.height
		c.draw(sub)
		top -= c.height
	}
	if _, err := (vgimg.PngCanvas{Canvas: canvas}).WriteTo(w); err != nil {
		return fmt.Errorf("write png: %w", err)
	}
	return nil
}

// draw renders the chart into dc: title and legend on top, the plot under.
func (c *chartData) draw(dc draw.Canvas) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	c.drawHeader(dc)
	body := draw.Crop(dc, 4, -6, 2, -c.header())
	if c.Heat != nil {
		c.drawHeat(body)
		return
	}

	p := plot.New()
	p.BackgroundColor = nil
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Padding = 0
		ax.Color = softColor
		ax.Tick.Color = softColor
		ax.Tick.Label = textStyle(sans, 8, softColor)
		ax.Label.TextStyle = textStyle(sans, 8.5, inkColor)
		ax.Label.Padding = 3
	}
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XCenter, draw.YTop
	p.Y.Tick.Marker = plainTicks{}
	p.Y.Tick.Label.XAlign = draw.XRight
	p.Y.Tick.Label.YAlign = draw.YCenter
	// The y label is drawn here rather than by gonum, which centres it on
	// the linear midpoint of the range even on a log axis.
	p.X.Label.Text = c.XLabel

	p.X.Tick.Marker = plainTicks{}
	bars := c.Kind == kindBars || c.Kind == kindRange
	if bars {
		c.plotBars(p)
	} else {
		c.plotLines(p)
	}
	right := vg.Length(8)
	switch {
	case bars:
		right = 70 // room for the value printed after the longest bar
	case len(c.Bands) > 0, c.Kind == kindTime, c.Kind == kindScatter:
		right = rightMargin // every time chart: their data areas line up
	}
	body = draw.Crop(body, 0, -right, 0, 0)
	left := body.Min.X
	// Pad the left so the y axis takes leftMargin whatever its labels.
	if used := p.DataCanvas(body).Min.X - body.Min.X; !bars && used < leftMargin {
		body = draw.Crop(body, leftMargin-used, 0, 0, 0)
	}
	p.Draw(body)
	if c.YLabel != "" {
		da := p.DataCanvas(body)
		sty := textStyle(sans, 8.5, inkColor)
		sty.Rotation = math.Pi / 2
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		dc.FillText(sty, vg.Point{X: left + 6, Y: (da.Min.Y + da.Max.Y) / 2}, c.YLabel)
	}
	if len(c.Bands) > 0 {
		c.drawBandAxis(p.DataCanvas(body))
	}
}

// legendEntry is one item of a chart's legend.
type legendEntry struct {
	name   string
	swatch func(dc draw.Canvas, x, y vg.Length)
}

func (c *chartData) legend() []legendEntry {
	if c.Heat != nil {
		return c.heatLegend()
	}
	var out []legendEntry
	for _, s := range c.Series {
		sty := lineStyle(s)
		if c.Kind == kindScatter {
			fill := sty.Color
			out = append(out, legendEntry{s.Name, func(dc draw.Canvas, x, y vg.Length) {
				dc.FillPolygon(fill, []vg.Point{{X: x + 4, Y: y - 2.5}, {X: x + 9, Y: y - 2.5}, {X: x + 9, Y: y + 2.5}, {X: x + 4, Y: y + 2.5}})
			}})
			continue
		}
		out = append(out, legendEntry{s.Name, func(dc draw.Canvas, x, y vg.Length) { dc.StrokeLine2(sty, x, y, x+13, y) }})
	}
	for _, b := range c.Bands {
		fill := hexColor(b.Color, 0x55)
		out = append(out, legendEntry{b.Name + " %", func(dc draw.Canvas, x, y vg.Length) {
			dc.FillPolygon(fill, []vg.Point{{X: x, Y: y - 4}, {X: x + 13, Y: y - 4}, {X: x + 13, Y: y + 4}, {X: x, Y: y + 4}})
		}})
	}
	for _, m := range c.Marks {
		sty := draw.LineStyle{Color: hexColor(m.Color, 0xff), Width: 1, Dashes: []vg.Length{3, 2}}
		name := m.Name
		if !c.markShown(m) {
			name += " (above the scale)"
		}
		out = append(out, legendEntry{name, func(dc draw.Canvas, x, y vg.Length) { dc.StrokeLine2(sty, x, y, x+13, y) }})
	}
	return out
}

var legendStyle = func() text.Style {
	s := textStyle(sans, 8.5, inkColor)
	s.YAlign = draw.YCenter
	return s
}()

// legendRows lays the legend out in rows that fit the chart's width.
func (c *chartData) legendRows() [][]legendEntry {
	var rows [][]legendEntry
	x, limit := vg.Length(8), chartWidth-16
	for _, e := range c.legend() {
		w := 17 + legendStyle.Width(e.name) + 14
		if len(rows) == 0 || x+w > limit {
			rows = append(rows, nil)
			x = 8
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], e)
		x += w
	}
	return rows
}

// header is the height of the title and the legend rows.
func (c *chartData) header() vg.Length {
	return 24 + 13*vg.Length(max(len(c.legendRows()), 1))
}

// drawHeader writes the title and, under it, the legend.
func (c *chartData) drawHeader(dc draw.Canvas) {
	title := textStyle(sansBold, 10.5, inkColor)
	title.YAlign = draw.YTop
	dc.FillText(title, vg.Point{X: dc.Min.X + 8, Y: dc.Max.Y - 5}, c.Title)
	y := dc.Max.Y - 27
	for _, row := range c.legendRows() {
		x := dc.Min.X + 8
		for _, e := range row {
			e.swatch(dc, x, y)
			x += 17
			dc.FillText(legendStyle, vg.Point{X: x, Y: y}, e.name)
			x += legendStyle.Width(e.name) + 14
		}
		y -= 13
	}
}

// dataTop is the highest value of the series.
func (c *chartData) dataTop() float64 {
	top := 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !math.IsNaN(p.Y) {
				top = max(top, p.Y)
			}
		}
	}
	return top
}

// markShown reports whether a reference line is drawn: one far above the
// data (an SLO of 2 s over latencies of 2 ms) would squash the data into
// the bottom of the chart, so the legend says it is above the scale
// instead.
func (c *chartData) markShown(m markData) bool {
	if m.Band || c.Kind == kindBars || c.Kind == kindRange || c.Kind == kindPairs {
		return true
	}
	if c.YMax > 0 {
		return m.Value <= c.YMax
	}
	return m.Value <= 1.5*c.dataTop() || c.dataTop() == 0
}

func lineStyle(s seriesData) draw.LineStyle {
	sty := draw.LineStyle{Color: hexColor(s.Color, 0xff), Width: 1.3}
	if s.Dashed {
		sty.Dashes = []vg.Length{4, 2}
	}
	return sty
}

// plotLines sets up a chart of series against x: time, nines or data.
func (c *chartData) plotLines(p *plot.Plot) {
	p.Add(&plotter.Grid{Horizontal: draw.LineStyle{Color: gridColor, Width: 0.5}})
	ymax, ymin := 0.0, math.Inf(1)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, pt := range s.Points {
			if !math.IsNaN(pt.Y) {
				ymax = max(ymax, pt.Y)
				if pt.Y > 0 {
					ymin = min(ymin, pt.Y)
				}
			}
			xmin, xmax = min(xmin, pt.X), max(xmax, pt.X)
		}
	}
	for _, m := range c.Marks {
		if !m.Band && c.markShown(m) {
			ymax = max(ymax, m.Value)
			if m.Value > 0 {
				ymin = min(ymin, m.Value)
			}
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	top := ymax * 1.08
	if c.YMax > 0 {
		top = c.YMax
	}
	var x0, x1 float64
	switch c.Kind {
	case kindTime, kindScatter:
		x0, x1 = 0, max(c.XMax, 1)
		p.X.Tick.Marker = timeTicks{}
	case kindPercentile:
		x0, x1 = 0, max(xmax, 1)
		p.X.Tick.Marker = ninesTicks{}
	default:
		if math.IsInf(xmin, 0) {
			xmin, xmax = 0, 1
		}
		pad := max((xmax-xmin)*0.05, 0.5)
		x0, x1 = max(xmin-pad, 0), xmax+pad
	}
	for _, b := range c.Bands {
		p.Add(&bandArea{points: b.Points, fill: hexColor(b.Color, 0x48)})
	}
	for _, m := range c.Marks {
		if c.markShown(m) {
			p.Add(&hline{mark: m})
		}
	}
	for i := range c.Stages {
		if c.Kind == kindTime || c.Kind == kindScatter {
			p.Add(&c.Stages[i])
		}
	}
	for _, s := range c.Series {
		sty := lineStyle(s)
		if c.Kind == kindScatter {
			p.Add(&dotsPlot{points: s.Points, colour: hexColor(s.Color, 0xc0)})
			continue
		}
		for _, seg := range segments(s.Points) {
			xys := make(plotter.XYs, len(seg))
			for i, pt := range seg {
				xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				continue // cannot happen: segments holds finite points only
			}
			l.LineStyle = sty
			if s.Fill {
				l.FillColor = hexColor(s.Color, 0xd0)
			}
			p.Add(l)
			if s.Dots || len(seg) == 1 {
				sc, err := plotter.NewScatter(xys)
				if err == nil {
					sc.GlyphStyle = draw.GlyphStyle{Color: sty.Color, Radius: 2.2, Shape: draw.CircleGlyph{}}
					p.Add(sc)
				}
			}
		}
	}
	if c.YMax > 0 {
		p.Add(&cutLabels{chart: c})
	}
	// The axes keep these ranges, whatever the plotters' data ranges say.
	p.X.Min, p.X.Max = x0, x1
	p.Y.Min, p.Y.Max = 0, top
	if c.Kind == kindPairs {
		// Ratios near 1: drawn from 0 they would all sit on one line.
		lo, hi := c.yExtent()
		pad := max((hi-lo)*0.1, 0.01)
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
	}
	if (c.Kind == kindPercentile || c.Kind == kindScatter) && !math.IsInf(ymin, 0) {
		// A distribution spans decades from the median to the maximum: on
		// a log axis the median and the tail both stay readable.
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		p.Y.Min, p.Y.Max = ymin/1.3, ymax*1.3
	}
}

// yExtent is the lowest and highest y of the series and the marks.
func (c *chartData) yExtent() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, pt := range s.Points {
			if !math.IsNaN(pt.Y) {
				lo, hi = min(lo, pt.Y), max(hi, pt.Y)
			}
		}
	}
	for _, m := range c.Marks {
		lo, hi = min(lo, m.Value), max(hi, m.Value)
	}
	if math.IsInf(lo, 0) {
		return 0, 1
	}
	return lo, hi
}

// dotsPlot draws each point as a small filled square: a request of the
// scatter. All of a series' squares are one path, filled once: about 45
// bytes a dot in the SVG, against 110 for a path each.
type dotsPlot struct {
	points []point
	colour color.Color
}

// Plot implements plot.Plotter.
func (d *dotsPlot) Plot(c draw.Canvas, p *plot.Plot) {
	xt, yt := p.Transforms(&c)
	const r = 1.1
	var path vg.Path
	for _, pt := range d.points {
		if math.IsNaN(pt.Y) || pt.Y <= 0 {
			continue
		}
		x, y := xt(pt.X), yt(pt.Y)
		path.Move(vg.Point{X: x - r, Y: y - r})
		path.Line(vg.Point{X: x + r, Y: y - r})
		path.Line(vg.Point{X: x + r, Y: y + r})
		path.Line(vg.Point{X: x - r, Y: y + r})
		path.Close()
	}
	if len(path) > 0 {
		c.SetColor(d.colour)
		c.Fill(path)
	}
}

// drawBandAxis draws the right-hand 0–100 % axis of the shaded bands.
func (c *chartData) drawBandAxis(da draw.Canvas) {
	sty := draw.LineStyle{Color: softColor, Width: 0.5}
	da.StrokeLine2(sty, da.Max.X, da.Min.Y, da.Max.X, da.Max.Y)
	lbl := textStyle(sans, 8, softColor)
	lbl.YAlign = draw.YCenter
	for _, v := range []float64{0, 25, 50, 75, 100} {
		y := da.Min.Y + vg.Length(v/100)*(da.Max.Y-da.Min.Y)
		da.StrokeLine2(sty, da.Max.X, y, da.Max.X+3, y)
		da.FillText(lbl, vg.Point{X: da.Max.X + 5, Y: y}, fmt.Sprintf("%.0f%%", v))
	}
	name := textStyle(sans, 8.5, inkColor)
	name.Rotation = -math.Pi / 2
	name.XAlign, name.YAlign = draw.XCenter, draw.YBottom
	da.FillText(name, vg.Point{X: da.Max.X + 40, Y: (da.Min.Y + da.Max.Y) / 2}, "host interference (% of tick)")
}

// bandArea shades a share (%) of each tick, measured against the band
// axis (0 at the bottom of the data area, 100 % at the top) rather than
// the y axis, so latency and interference read on one time axis.
type bandArea struct {
	points []point
	fill   color.Color
}

// Plot implements plot.Plotter.
func (b *bandArea) Plot(c draw.Canvas, p *plot.Plot) {
	xt, _ := p.Transforms(&c)
	for _, seg := range segments(b.points) {
		poly := make([]vg.Point, 0, len(seg)+2)
		poly = append(poly, vg.Point{X: xt(seg[0].X), Y: c.Min.Y})
		for _, pt := range seg {
			poly = append(poly, vg.Point{X: xt(pt.X), Y: c.Min.Y + vg.Length(min(max(pt.Y, 0), 100)/100)*(c.Max.Y-c.Min.Y)})
		}
		poly = append(poly, vg.Point{X: xt(seg[len(seg)-1].X), Y: c.Min.Y})
		c.FillPolygon(b.fill, poly)
	}
}

// cutLabels marks the values above a capped y axis: a tick at the top
// edge and the value, for the highest few.
type cutLabels struct{ chart *chartData }

// Plot implements plot.Plotter.
func (l *cutLabels) Plot(c draw.Canvas, p *plot.Plot) {
	xt, _ := p.Transforms(&c)
	var cut []point
	for _, s := range l.chart.Series {
		for _, pt := range s.Points {
			if pt.Y > l.chart.YMax {
				cut = append(cut, pt)
			}
		}
	}
	// The highest first; one label per place, at most five.
	slices.SortStableFunc(cut, func(a, b point) int { return compareFloat(b.Y, a.Y) })
	sty := textStyle(sans, 7.5, inkColor)
	sty.YAlign = draw.YTop
	var done []vg.Length
	for _, pt := range cut {
		x := xt(pt.X)
		if len(done) == 5 || slices.ContainsFunc(done, func(d vg.Length) bool { return math.Abs(float64(d-x)) < 40 }) {
			continue
		}
		done = append(done, x)
		c.FillPolygon(inkColor, []vg.Point{{X: x - 3, Y: c.Max.Y}, {X: x + 3, Y: c.Max.Y}, {X: x, Y: c.Max.Y - 5}})
		c.FillText(sty, vg.Point{X: x + 4, Y: c.Max.Y - 1}, fmtFigure(pt.Y))
	}
}

// hline draws a reference line across the data area.
type hline struct{ mark markData }

// Plot implements plot.Plotter.
func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, yt := p.Transforms(&c)
	y := yt(h.mark.Value)
	if h.mark.Band {
		y = c.Min.Y + vg.Length(h.mark.Value/100)*(c.Max.Y-c.Min.Y)
	}
	c.StrokeLine2(draw.LineStyle{Color: hexColor(h.mark.Color, 0xff), Width: 1, Dashes: []vg.Length{3, 2}}, c.Min.X, y, c.Max.X, y)
}

// plotBars sets up horizontal bars, one per category, first on top.
func (c *chartData) plotBars(p *plot.Plot) {
	p.Add(&plotter.Grid{Vertical: draw.LineStyle{Color: gridColor, Width: 0.5}})
	n := len(c.Bars)
	names := make([]string, n)
	top := 0.0
	for i, b := range c.Bars {
		names[n-1-i] = b.Label
		if b.Value != nil {
			top = max(top, *b.Value)
		}
	}
	for _, m := range c.Marks {
		top = max(top, m.Value)
	}
	if c.Gap != nil {
		top = max(top, c.Gap.To, c.Gap.From)
	}
	if top == 0 {
		top = 1
	}
	p.NominalY(names...)
	p.Y.Tick.Label = textStyle(sans, 8.5, inkColor)
	p.Y.Tick.Label.XAlign, p.Y.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.Add(&hbars{chart: c})
	for _, m := range c.Marks {
		p.Add(&vline{mark: m})
	}
	p.X.Min, p.X.Max = 0, top*1.1
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	if c.Gap != nil {
		p.Y.Max = float64(n) + 0.4
	}
}

// hbars draws the bars of a bars or range chart.
type hbars struct{ chart *chartData }

// Plot implements plot.Plotter.
func (h *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	xt, yt := p.Transforms(&c)
	n := len(h.chart.Bars)
	thick := (yt(1) - yt(0)) * 0.32
	lbl := textStyle(sans, 8.5, inkColor)
	lbl.YAlign = draw.YCenter
	for i, b := range h.chart.Bars {
		y := yt(float64(n - 1 - i))
		if b.Value == nil {
			c.FillText(lbl, vg.Point{X: xt(0) + 4, Y: y}, "n/a")
			continue
		}
		x := xt(*b.Value)
		c.FillPolygon(hexColor(b.Color, 0xd0), []vg.Point{{X: xt(0), Y: y - thick}, {X: x, Y: y - thick}, {X: x, Y: y + thick}, {X: xt(0), Y: y + thick}})
		if b.Text != "" {
			c.FillText(lbl, vg.Point{X: x + 4, Y: y}, b.Text)
		}
	}
	if g := h.chart.Gap; g != nil {
		// A bracket over the bars from worst to best, labelled with the gap.
		y := yt(float64(n) - 0.35)
		sty := draw.LineStyle{Color: hexColor("#444444", 0xff), Width: 1}
		x0, x1 := xt(g.From), xt(g.To)
		c.StrokeLines(sty, []vg.Point{{X: x0, Y: y - 5}, {X: x0, Y: y}, {X: x1, Y: y}, {X: x1, Y: y - 5}})
		t := textStyle(sansBold, 8.5, inkColor)
		t.XAlign, t.YAlign = draw.XCenter, draw.YBottom
		c.FillText(t, vg.Point{X: (x0 + x1) / 2, Y: y + 2}, g.Label)
	}
}

// vline draws a vertical reference line: a threshold on a bars chart.
type vline struct{ mark markData }

// Plot implements plot.Plotter.
func (v *vline) Plot(c draw.Canvas, p *plot.Plot) {
	xt, _ := p.Transforms(&c)
	x := xt(v.mark.Value)
	c.StrokeLine2(draw.LineStyle{Color: hexColor(v.mark.Color, 0xff), Width: 1, Dashes: []vg.Length{3, 2}}, x, c.Min.Y, x, c.Max.Y)
}

// timeTicks marks elapsed time at a round step, labelled m:ss or h:mm:ss.
type timeTicks struct{}

// Ticks implements plot.Ticker.
func (timeTicks) Ticks(lo, hi float64) []plot.Tick {
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if (hi-lo)/s <= 8 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: clock(v, hi >= 3600)})
		if minor := v + step/2; minor < hi {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}

// clock formats seconds as m:ss, or h:mm:ss on an axis of an hour or more.
func clock(s float64, hours bool) string {
	t := int(math.Round(s))
	if hours {
		return fmt.Sprintf("%d:%02d:%02d", t/3600, t/60%60, t%60)
	}
	return fmt.Sprintf("%d:%02d", t/60, t%60)
}

// ninesTicks labels the nines axis of a latency distribution.
type ninesTicks struct{}

// Ticks implements plot.Ticker.
func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, t := range []plot.Tick{{Value: 0, Label: "p0"}, {Value: math.Log10(2), Label: "p50"}, {Value: 1, Label: "p90"},
		{Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}, {Value: 4, Label: "p99.99"}, {Value: 5, Label: "p99.999"}} {
		if t.Value >= lo && t.Value <= hi+1e-9 {
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// logTicks marks a log axis at 1, 2 and 5 of each decade, labelled only
// where there is room, in plain numbers rather than exponents.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for dec := math.Pow(10, math.Floor(math.Log10(lo))); dec <= hi; dec *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * dec
			if v < lo || v > hi {
				continue
			}
			label := strconv.FormatFloat(v, 'f', -1, 64)
			if hi/lo > 1e3 && m != 1 {
				label = "" // many decades: label the powers of ten only
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
}

// plainTicks are gonum's default ticks labelled without trailing zeros:
// 2.5 rather than 2.50.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(math.Round(ticks[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}
