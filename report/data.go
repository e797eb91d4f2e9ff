package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/tare-dev/tare"
)

// DataSchema names the version of the data part of an HTML report: the
// JSON object in its <script type="application/json" id="tare-data">,
// which holds every run's summary and every point every chart draws.
const DataSchema = "tare.report/v1"

// pageData is the data part of a report.
type pageData struct {
	Schema     string          `json:"schema"`
	Title      string          `json:"title"`
	Runs       []runData       `json:"runs"`
	Comparison *comparisonData `json:"comparison,omitempty"`
	Calendar   *calendarData   `json:"calendar,omitempty"`
	AB         *abData         `json:"ab,omitempty"`
}

type runData struct {
	Summary tare.Summary `json:"summary"`
	TickS   float64      `json:"tick_s,omitempty"`
	Ticks   int          `json:"ticks"`
	Records int          `json:"records"` // raw records read for the distribution and model charts
	Charts  []*chartData `json:"charts"`
}

type comparisonData struct {
	Headline     string       `json:"headline,omitempty"`
	Diverged     bool         `json:"diverged"`
	Inconclusive bool         `json:"inconclusive,omitempty"`
	Advice       []string     `json:"advice,omitempty"`
	Findings     []string     `json:"findings,omitempty"`
	Changes      []string     `json:"changes,omitempty"`
	Windows      []string     `json:"windows"`
	Threshold    float64      `json:"threshold_pct"`
	Divergence   []Divergence `json:"divergence,omitempty"`
	Capacity     *Capacity    `json:"capacity,omitempty"`
	Sweep        []SweepPoint `json:"sweep,omitempty"`
	Charts       []*chartData `json:"charts"`
}

// Colours of the series, the same in every chart of a page.
const (
	colStage        = "#6a3d9a"
	colP50          = "#6baed6"
	colP95          = "#2171b5"
	colP99          = "#08306b"
	colSteal        = "#d62728"
	colSUT          = "#2ca02c"
	colTare         = "#1f77b4"
	colOthers       = "#8c564b"
	colKernel       = "#bcbd22"
	colUnattributed = "#c7c7c7"
	colThrottled    = "#ff7f0e"
	colRunDelay     = "#9467bd"
	colPSI          = "#17becf"
	colNeighbours   = "#e377c2"
	colThreshold    = "#7f7f7f"
	colSLO          = "#e6550d"
	colArrivals     = "#969696"
	colDone         = "#2ca02c"
	colErrors       = "#d62728"
	colDropped      = "#8c564b"
	colInFlight     = "#1f77b4"
	colDepth        = "#ff7f0e"
	colTokens       = "#2ca02c"
	colClean        = "#2ca02c"
)

// sutShades colour the nodes of the system under test's graph in the
// whose-CPU chart: greens, from colSUT down, so they read as one owner.
var sutShades = []string{colSUT, "#74c476", "#006d2c", "#a1d99b", "#31a354", "#00441b"}

// windowColor gives the protocol windows fixed colours (peak red, off-peak
// green, mid blue) and anything else the next of a palette.
func windowColor(name string, i int) string {
	switch strings.ToLower(name) {
	case tare.WindowPeak:
		return "#d62728"
	case tare.WindowOffpeak, "off-peak":
		return "#2ca02c"
	case tare.WindowMid:
		return "#1f77b4"
	}
	palette := []string{"#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}
	return palette[i%len(palette)]
}

// data builds the run's part of the page: its summary and its charts.
func (r *Run) data(id string) runData {
	d := runData{Summary: r.Summary, Ticks: len(r.Ticks), Records: r.records}
	if len(r.Ticks) > 0 {
		d.TickS = r.tickSeconds()
		d.Charts = append(d.Charts, r.latencyChart(id))
		if c := r.scatterChart(id); c != nil {
			d.Charts = append(d.Charts, c)
		}
		if c := r.whoseCPUChart(id); c != nil {
			d.Charts = append(d.Charts, c)
		}
		if c := r.blameChart(id); c != nil {
			d.Charts = append(d.Charts, c)
		}
		d.Charts = append(d.Charts, r.loadChart(id), r.outstandingChart(id))
		if r.Summary.Model != nil && r.ttft != nil {
			d.Charts = append(d.Charts, r.modelCharts(id)...)
		}
	}
	if c := r.distributionChart(id); c != nil {
		d.Charts = append(d.Charts, c)
	}
	return d
}

// series returns one point per tick at the tick's midpoint; f returns
// NaN where the tick has no figure.
func (r *Run) series(f func(i int, t *tare.Tick) float64) []point {
	step := r.tickSeconds()
	pts := make([]point, len(r.Ticks))
	for i := range r.Ticks {
		pts[i] = point{(float64(i) + 0.5) * step, f(i, &r.Ticks[i])}
	}
	return pts
}

// timeChart starts a chart over the run's time axis.
func (r *Run) timeChart(id, name, title, ylabel string) *chartData {
	return &chartData{ID: id + "-" + name, Title: title, Kind: kindTime, XLabel: "time since the run started",
		YLabel: ylabel, XMax: float64(len(r.Ticks)) * r.tickSeconds(), height: smallHeight, Stages: stageMarks(&r.Summary)}
}

// stageMarks are the starts of a ramp's stages on the time axis, which
// starts after the warm-up.
func stageMarks(s *tare.Summary) []stageMark {
	warmup := 0.0
	if s.Warmup != nil {
		warmup = s.Warmup.DurationS
	}
	var out []stageMark
	for i, st := range s.Stages {
		out = append(out, stageMark{At: st.StartS - warmup, Label: fmt.Sprintf("%d → %s", i+1, rate(&st.TargetPerS))})
	}
	return out
}

// addLine adds a series folded into its envelope, unless it has no value
// at all.
func (c *chartData) addLine(name, colour string, pts []point) {
	if !slices.ContainsFunc(pts, func(p point) bool { return !math.IsNaN(p.Y) }) {
		return
	}
	if len(pts) > 2*maxBuckets {
		c.Points = max(c.Points, len(pts))
	}
	c.Series = append(c.Series, seriesData{Name: name, Color: colour, Points: envelope(pts, maxBuckets)})
}

func (c *chartData) addBand(name, colour string, pts []point) {
	if !slices.ContainsFunc(pts, func(p point) bool { return !math.IsNaN(p.Y) }) {
		return
	}
	if len(pts) > 2*maxBuckets {
		c.Points = max(c.Points, len(pts))
	}
	c.Bands = append(c.Bands, seriesData{Name: name, Color: colour, Points: upper(pts, maxBuckets)})
}

// clipOutliers caps the y axis when the top 1 % of the values tower over
// the rest, as one 1.5 s request does over ticks of 20 ms: drawn to scale,
// it would flatten the climb with steal that the chart is there to show.
// The values cut are labelled at the top of the chart, so none is hidden.
func (c *chartData) clipOutliers() {
	var ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !math.IsNaN(p.Y) {
				ys = append(ys, p.Y)
			}
		}
	}
	if len(ys) < 20 {
		return
	}
	slices.Sort(ys)
	ceiling := 1.5 * ys[int(0.99*float64(len(ys)-1))]
	for _, m := range c.Marks {
		// A reference line near the data stays in view; one far above
		// it is named in the legend instead.
		if !m.Band && m.Value <= 1.5*ceiling {
			ceiling = max(ceiling, 1.1*m.Value)
		}
	}
	if ys[len(ys)-1] > 1.2*ceiling {
		c.YMax = ceiling
		c.Note = strings.TrimSpace(c.Note + " The scale leaves out the highest 1 % of values; those above it are cut at the top and labelled.")
	}
}

// foldedNote says how a long series was drawn.
func (c *chartData) foldedNote() {
	if c.Points > 0 {
		c.Note = strings.TrimSpace(fmt.Sprintf("%s %s ticks folded into %d buckets, each drawn at its lowest and highest value (the bands at their highest), so no spike is lost.",
			c.Note, thousands(c.Points), maxBuckets))
	}
}

func (r *Run) latencyChart(id string) *chartData {
	c := r.timeChart(id, "latency", "Latency per tick, with host interference", "latency (ms)")
	c.height = mainHeight
	perc := func(get func(*tare.Tick) float64) []point {
		return r.series(func(_ int, t *tare.Tick) float64 {
			if t.Completions == 0 {
				return math.NaN()
			}
			return get(t)
		})
	}
	c.addLine("p50", colP50, perc(func(t *tare.Tick) float64 { return millis(t.P50) }))
	c.addLine("p95", colP95, perc(func(t *tare.Tick) float64 { return millis(t.P95) }))
	c.addLine("p99", colP99, perc(func(t *tare.Tick) float64 { return millis(t.P99) }))
	host := func(get func(*tare.HostSample) *float64) []point {
		return r.series(func(_ int, t *tare.Tick) float64 {
			if t.Host == nil {
				return math.NaN()
			}
			if v := get(t.Host); v != nil {
				return *v
			}
			return math.NaN()
		})
	}
	c.addBand("cpu pressure (psi some)", colPSI, host(func(h *tare.HostSample) *float64 { return h.PSISome }))
	c.addBand("steal", colSteal, host(func(h *tare.HostSample) *float64 { return &h.CPU.Steal }))
	c.addBand("throttled", colThrottled, host(func(h *tare.HostSample) *float64 { return h.Throttled }))
	c.addBand("run delay", colRunDelay, host(func(h *tare.HostSample) *float64 { return h.RunDelay }))
	// The part of the wait the verdict counts against the host: behind
	// other processes, not the system under test's own threads or tare.
	c.addBand("behind neighbours", colNeighbours, host((*tare.HostSample).NeighbourWait))
	if len(c.Bands) > 0 {
		threshold := r.Summary.PollutedThreshold()
		c.Marks = append(c.Marks, markData{Name: fmt.Sprintf("polluted above %g%%", threshold), Value: threshold, Band: true, Color: colThreshold})
	} else {
		c.Note = "The host was not sampled during this run, so no interference is drawn."
	}
	c.Marks = append(c.Marks, r.sloMarks()...)
	c.clipOutliers()
	c.foldedNote()
	return c
}

// sloMarks are the run's latency objectives as reference lines.
func (r *Run) sloMarks() []markData {
	var marks []markData
	for _, s := range r.Summary.Verdict.SLO {
		marks = append(marks, markData{Name: "slo " + s.Objective, Value: s.LimitMS, Color: colSLO})
	}
	return marks
}

// whoseCPUChart stacks each tick's whose-CPU ledger: the system under test
// at the bottom, then tare, other processes, the kernel, unattributed time
// and steal; what is left up to 100 % is idle. Nil when no tick has one.
func (r *Run) whoseCPUChart(id string) *chartData {
	if !slices.ContainsFunc(r.Ticks, func(t tare.Tick) bool { return t.Host != nil && t.Host.CPUBy != nil }) {
		return nil
	}
	c := r.timeChart(id, "whose-cpu", "Whose CPU per tick", "% of the host's CPU")
	type layer struct {
		name, colour string
		get          func(*tare.CPUBy) float64
	}
	layers := []layer{{"system under test", colSUT, func(b *tare.CPUBy) float64 { return b.SystemUnderTest }}}
	// A graph of several nodes (a proxy, its app server, a database) is
	// split into a layer each, in shades of the system under test's colour.
	if u := r.Summary.SUT; u != nil && len(u.Graph) > 1 {
		layers = layers[:0]
		for i, n := range u.Graph {
			layers = append(layers, layer{"under test: " + n.Name, sutShades[i%len(sutShades)], func(b *tare.CPUBy) float64 {
				for _, s := range b.SUTNodes {
					if s.Node == i {
						return s.CPUPct
					}
				}
				return 0
			}})
		}
	}
	layers = append(layers, []layer{
		{"tare", colTare, func(b *tare.CPUBy) float64 { return b.Tare }},
		{"other processes", colOthers, func(b *tare.CPUBy) float64 { return b.Others }},
		{"kernel", colKernel, func(b *tare.CPUBy) float64 { return b.Kernel }},
		{"unattributed", colUnattributed, func(b *tare.CPUBy) float64 { return b.Unattributed }},
		{"steal", colSteal, func(b *tare.CPUBy) float64 { return b.Steal }},
	}...)
	// Each layer is drawn as its top edge, the sum of it and those below,
	// filled down to zero: the highest first, so the lower ones paint over.
	for i := len(layers) - 1; i >= 0; i-- {
		c.addLine(layers[i].name, layers[i].colour, r.series(func(_ int, t *tare.Tick) float64 {
			if t.Host == nil || t.Host.CPUBy == nil {
				return math.NaN()
			}
			sum := 0.0
			for _, l := range layers[:i+1] {
				sum += l.get(t.Host.CPUBy)
			}
			return sum
		}))
		if n := len(c.Series); n > 0 && c.Series[n-1].Name == layers[i].name {
			c.Series[n-1].Fill = true
		}
	}
	c.Note = "The rest, up to 100 %, is idle. The system under test's own load is never interference; other processes and steal, while it waited, are."
	c.foldedNote()
	return c
}

func (r *Run) loadChart(id string) *chartData {
	c := r.timeChart(id, "load", "Arrivals and completions", "per second")
	step := r.tickSeconds()
	perSecond := func(get func(*tare.Tick) int) []point {
		return r.series(func(_ int, t *tare.Tick) float64 { return float64(get(t)) / step })
	}
	c.addLine("arrivals", colArrivals, perSecond(func(t *tare.Tick) int { return t.Arrivals }))
	c.addLine("completions", colDone, perSecond(func(t *tare.Tick) int { return t.Completions }))
	some := func(get func(*tare.Tick) int) bool {
		return slices.ContainsFunc(r.Ticks, func(t tare.Tick) bool { return get(&t) > 0 })
	}
	if some(func(t *tare.Tick) int { return t.Errors }) {
		c.addLine("errors", colErrors, perSecond(func(t *tare.Tick) int { return t.Errors }))
	}
	if some(func(t *tare.Tick) int { return t.Dropped }) {
		c.addLine("dropped", colDropped, perSecond(func(t *tare.Tick) int { return t.Dropped }))
	}
	c.foldedNote()
	return c
}

func (r *Run) outstandingChart(id string) *chartData {
	c := r.timeChart(id, "outstanding", "Work outstanding", "requests or jobs")
	c.addLine("in flight (end of tick)", colInFlight, r.series(func(_ int, t *tare.Tick) float64 { return float64(t.InFlight) }))
	c.addLine("queue depth (mean)", colDepth, r.series(func(_ int, t *tare.Tick) float64 {
		if t.QueueDepth == nil {
			return math.NaN()
		}
		return *t.QueueDepth
	}))
	c.Note = "Latency that climbs while this stays flat points at the host, not at more work to do."
	c.foldedNote()
	return c
}

func (r *Run) modelCharts(id string) []*chartData {
	ttft := r.timeChart(id, "ttft", "Time to first token", "TTFT (ms)")
	ttft.addLine("TTFT p50", colP50, r.series(func(i int, _ *tare.Tick) float64 { return r.ttftTick(i, 50) }))
	ttft.addLine("TTFT p95", colP95, r.series(func(i int, _ *tare.Tick) float64 { return r.ttftTick(i, 95) }))
	ttft.clipOutliers()
	ttft.foldedNote()
	step := r.tickSeconds()
	tps := r.timeChart(id, "tokens", "Token throughput", "output tokens per second")
	tps.addLine("tokens/s", colTokens, r.series(func(i int, _ *tare.Tick) float64 { return float64(r.tokens[i]) / step }))
	tps.foldedNote()
	return []*chartData{ttft, tps}
}

// distributionChart draws the latency distribution over every request
// and over those that lived entirely in clean ticks, or the summary's
// percentiles when the raw records are not at hand.
func (r *Run) distributionChart(id string) *chartData {
	c := &chartData{ID: id + "-distribution", Title: "Latency distribution", Kind: kindPercentile,
		XLabel: "percentile", YLabel: "latency (ms)", height: smallHeight}
	switch {
	case r.latencies() != nil:
		c.Series = append(c.Series, seriesData{Name: "every request", Color: colP95, Points: distribution(r.latencies())})
		if n := r.latency.CleanOnly.Count(); n > 0 && n < r.latency.All.Count() {
			c.Series = append(c.Series, seriesData{Name: "requests that lived in clean ticks only", Color: colClean, Points: distribution(&r.latency.CleanOnly)})
		}
		c.Note = "Read the tail to the right: p99 is one request in a hundred."
	case r.Summary.Latency.P50 != nil:
		c.Series = append(c.Series, seriesData{Name: "summary percentiles", Color: colP95, Dots: true, Points: summaryDistribution(r.Summary.Latency)})
		c.Note = "Drawn from the summary's percentiles: the raw records were not at hand."
	default:
		return nil
	}
	c.Marks = r.sloMarks()
	return c
}

// data builds the comparison's part of the page.
func (c *Comparison) data() *comparisonData {
	threshold := c.Threshold
	if threshold == 0 {
		threshold = 30
	}
	d := &comparisonData{Headline: c.Headline, Diverged: c.Diverged, Inconclusive: c.Inconclusive, Advice: c.Advice,
		Findings: c.Findings, Changes: c.Changes, Threshold: threshold, Divergence: c.Divergence, Capacity: c.Capacity, Sweep: c.Sweep}
	cdf := &chartData{ID: "compare-distribution", Title: "Latency distributions, overlaid", Kind: kindPercentile,
		XLabel: "percentile", YLabel: "latency (ms)", height: mainHeight}
	for i, w := range c.Windows {
		d.Windows = append(d.Windows, w.Name)
		if w.Run == nil {
			continue
		}
		s := seriesData{Name: w.Name, Color: windowColor(w.Name, i)}
		if all := w.Run.latencies(); all != nil {
			s.Points = distribution(all)
		} else {
			s.Points, s.Dots = summaryDistribution(w.Run.Summary.Latency), true
		}
		if len(s.Points) > 0 {
			cdf.Series = append(cdf.Series, s)
		}
	}
	if len(cdf.Series) > 0 {
		cdf.Note = "The same load in each window: curves that lie apart say the host, not the code, set the latency."
		d.Charts = append(d.Charts, cdf)
	}
	if len(c.Divergence) > 0 {
		div := &chartData{ID: "compare-divergence", Title: "Divergence between the windows", Kind: kindBars, Unit: "%",
			XLabel: "divergence |a − b| / min(a, b) (%)", height: barsHeight(len(c.Divergence))}
		for _, m := range c.Divergence {
			b := barData{Label: m.Metric, Value: m.Percent, Color: "#9ecae1"}
			switch {
			case m.Diverged:
				b.Color = "#d62728"
			case m.Status == tare.MetricTooLittleData:
				b.Color = "#e6a700"
			}
			if m.Percent != nil {
				b.Text = fmt.Sprintf("%.0f%%", *m.Percent)
			}
			div.Bars = append(div.Bars, b)
		}
		div.Marks = []markData{{Name: fmt.Sprintf("diverged above %g%%", threshold), Value: threshold, Color: colThreshold}}
		d.Charts = append(d.Charts, div)
	}
	if cp := c.Capacity; cp != nil {
		d.Charts = append(d.Charts, cp.chart())
	}
	if len(c.Sweep) > 0 {
		d.Charts = append(d.Charts, c.sweepChart())
	}
	return d
}

func barsHeight(n int) vg.Length { return 37 + 50 + vg.Length(n)*26 }

// chart draws the capacity range: one bar per end, the gap bracketed.
func (cp *Capacity) chart() *chartData {
	c := &chartData{ID: "compare-capacity", Title: "Capacity range", Kind: kindRange, Unit: cp.Unit, XLabel: cp.Unit, height: barsHeight(4)}
	for _, e := range []struct {
		role string
		p    CapacityPoint
	}{{"best", cp.Best}, {"typical", cp.Typical}, {"worst", cp.Worst}} {
		label := e.role
		if e.p.Window != "" {
			label = e.p.Window + " · " + e.role
		}
		b := barData{Label: label, Value: e.p.Value, Color: windowColor(e.p.Window, 0)}
		if e.p.Value != nil {
			b.Text = fmtFigure(*e.p.Value)
		}
		c.Bars = append(c.Bars, b)
	}
	if cp.Best.Value != nil && cp.Worst.Value != nil {
		best, worst := *cp.Best.Value, *cp.Worst.Value
		label := "gap " + fmtFigure(math.Abs(best-worst))
		if best != 0 {
			label += fmt.Sprintf(" (%.0f%% of best): the cost of shared infrastructure", 100*math.Abs(best-worst)/best)
		}
		c.Gap = &gapData{From: min(best, worst), To: max(best, worst), Label: label}
	}
	return c
}

// sweepChart draws p95 against the arrival rate, one curve per window.
func (c *Comparison) sweepChart() *chartData {
	ch := &chartData{ID: "compare-sweep", Title: "Capacity sweep: p95 against the arrival rate", Kind: kindXY,
		XLabel: "arrival rate (per second)", YLabel: "p95 latency (ms)", height: mainHeight}
	var names []string
	for _, p := range c.Sweep {
		if !slices.Contains(names, p.Window) {
			names = append(names, p.Window)
		}
	}
	for i, name := range names {
		var pts []point
		for _, p := range c.Sweep {
			if p.Window != name {
				continue
			}
			y := math.NaN()
			if p.P95MS != nil {
				y = *p.P95MS
			}
			pts = append(pts, point{p.RatePerS, y})
		}
		slices.SortStableFunc(pts, func(a, b point) int { return compareFloat(a.X, b.X) })
		label := name
		if label == "" {
			label = "sweep"
		}
		ch.Series = append(ch.Series, seriesData{Name: label, Color: windowColor(name, i), Dots: true, Points: pts})
	}
	if c.SLOMS != nil {
		ch.Marks = append(ch.Marks, markData{Name: "slo " + fmtFigure(*c.SLOMS) + " ms", Value: *c.SLOMS, Color: colSLO})
	}
	return ch
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fmtFigure formats a figure with three significant digits, without an
// exponent below a million.
func fmtFigure(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// thousands formats n with a comma between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
