package report

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Page is one HTML report: one run, several, or a comparison of windows.
type Page struct {
	Title string // the page's title; by default made from the runs
	Runs  []*Run // each drawn in its own section, in this order
	// Comparison is drawn above the runs when set. Several runs without a
	// comparison still get their latency distributions overlaid.
	Comparison *Comparison
	// Calendar is a host's calendar (tare check history), drawn first
	// when set: its heatmap, day by hour, and its hours.
	Calendar *tare.Calendar
	// AB is an A/B run, drawn first when set: its paired trials, B/A
	// pair by pair, and the interference of each trial.
	AB        *tare.AB
	Generated time.Time // printed in the footer; zero leaves it out
	Version   string    // tare's version, printed in the footer
}

//go:embed html.tmpl
var htmlTemplate string

var pageTemplate = template.Must(template.New("report").Parse(htmlTemplate))

// HTML writes the report as one self-contained HTML file: the charts are
// inline SVG drawn here, the style is inline, there is no script, and a
// Content-Security-Policy forbids the page any request, so it opens
// offline and nothing leaves it. Every string from a run (labels, targets,
// error texts) goes through html/template and shows as text.
//
// The page also carries its data part: a JSON object (schema
// tare.report/v1) with every run's summary and every point every chart
// draws, in <script type="application/json" id="tare-data">.
func HTML(w io.Writer, p Page) error {
	data, view, err := build(p)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode report data: %w", err)
	}
	// json escapes <, > and & inside strings, so the data cannot close
	// its script element.
	view.Data = template.JS(raw)
	if err := pageTemplate.Execute(w, view); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// PNG writes the main chart of each run (latency per tick with the host
// interference band), one under the other, as a PNG image for tickets and
// chat.
func PNG(w io.Writer, runs ...*Run) error {
	var charts []*chartData
	for i, r := range runs {
		if len(r.Ticks) == 0 {
			continue
		}
		c := r.latencyChart(fmt.Sprintf("run%d", i+1))
		// An image travels alone: its title says which run it is.
		c.Title += " · " + runName(r)
		if t := r.Summary.Run.StartedAt; !t.IsZero() {
			c.Title += " · " + t.Format("2006-01-02 15:04 MST")
		}
		charts = append(charts, c)
	}
	if len(charts) == 0 {
		return tare.Errorf(tare.EINVALID, "no timeline to draw: a chart needs the run's ticks (a stored run or exported records, not a summary file)")
	}
	return writePNG(w, charts)
}

// pageView is what the template fills the page with.
type pageView struct {
	Title      string
	Data       template.JS
	Overview   []overviewRow
	Comparison *compareView
	Calendar   *calendarView
	AB         *abView
	Runs       []runView
	Footer     string
}

type overviewRow struct {
	Anchor, Name, Window, Level, Requests, P95, CleanP95, Steal, Polluted string
}

type compareView struct {
	Headline string
	Class    string
	Advice   []string
	Findings []string
	Changes  []string
	Calendar []string
	Charts   []chartView
	Header   []string   // the windows, for the divergence table
	Rows     [][]string // metric, value per window, divergence
}

type chartView struct {
	ID   string
	SVG  template.HTML
	Note string
}

type runView struct {
	Anchor   string
	Heading  string
	Sub      string
	Meta     []kv
	Verdict  verdictView
	Charts   []chartView
	Latency  [][]string
	Figures  []kv
	Targets  [][]string // a row per request of a targets file
	Stages   [][]string // a row per stage of a ramp
	Timeline bool
}

type kv struct{ Key, Value string }

type verdictView struct {
	Level       string
	Class       string
	Lead        string
	Fired       []signalView
	Quiet       []signalView
	SLO         []sloView
	Attribution string
	Advice      []string
	Warnings    []string
}

type signalView struct{ Mark, Name, Value, Threshold, Detail string }

type sloView struct {
	Met               bool
	Objective, Result string
}

// build turns the page into its data part and its view.
func build(p Page) (*pageData, *pageView, error) {
	data := &pageData{Schema: DataSchema, Title: p.Title, Runs: []runData{}}
	if data.Title == "" {
		data.Title = defaultTitle(p)
	}
	view := &pageView{Title: data.Title}
	for i, r := range p.Runs {
		id := fmt.Sprintf("run%d", i+1)
		d := r.data(id)
		data.Runs = append(data.Runs, d)
		rv, err := runSection(id, r, d)
		if err != nil {
			return nil, nil, err
		}
		view.Runs = append(view.Runs, rv)
	}
	cmp := p.Comparison
	if cmp == nil && len(p.Runs) > 1 {
		cmp = &Comparison{}
		for _, r := range p.Runs {
			cmp.Windows = append(cmp.Windows, Window{Name: runName(r), Run: r})
		}
	}
	if len(p.Runs) > 1 {
		for i, r := range p.Runs {
			view.Overview = append(view.Overview, overview(fmt.Sprintf("run%d", i+1), r))
		}
	}
	if cmp != nil {
		data.Comparison = cmp.data()
		cv, err := compareSection(cmp, data.Comparison)
		if err != nil {
			return nil, nil, err
		}
		view.Comparison = cv
	}
	if p.Calendar != nil {
		data.Calendar = &calendarData{Calendar: p.Calendar, Charts: calendarCharts(p.Calendar)}
		cv, err := calendarSection(p.Calendar, data.Calendar)
		if err != nil {
			return nil, nil, err
		}
		view.Calendar = cv
	}
	if p.AB != nil {
		data.AB = &abData{AB: p.AB, Charts: abCharts(p.AB)}
		av, err := abSection(p.AB, data.AB)
		if err != nil {
			return nil, nil, err
		}
		view.AB = av
	}
	var foot []string
	if p.Version != "" {
		foot = append(foot, "tare "+p.Version)
	}
	if !p.Generated.IsZero() {
		foot = append(foot, "generated "+p.Generated.Format("2006-01-02 15:04:05 MST"))
	}
	foot = append(foot, "self-contained: this page makes no network request; its data (schema "+DataSchema+") is in the script element tare-data")
	view.Footer = strings.Join(foot, " · ")
	return data, view, nil
}

func defaultTitle(p Page) string {
	switch {
	case p.AB != nil && len(p.Runs) == 0:
		return "tare report · A/B run " + cmp.Or(p.AB.Label, shortID(p.AB.ID))
	case p.Calendar != nil && len(p.Runs) == 0:
		return "tare calendar · host " + p.Calendar.Host
	case p.Comparison != nil:
		return fmt.Sprintf("tare report · comparison of %d windows", len(p.Comparison.Windows))
	case len(p.Runs) == 1:
		return "tare report · " + runName(p.Runs[0])
	}
	return fmt.Sprintf("tare report · %d runs", len(p.Runs))
}

// runName is how a run is called on the page: its label, its window, its
// target or its id, the first that is set.
func runName(r *Run) string {
	run := r.Summary.Run
	for _, s := range []string{run.Label, run.Window, run.Target, shortID(run.ID)} {
		if s != "" {
			return s
		}
	}
	return "run"
}

func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func charts(cs []*chartData) ([]chartView, error) {
	var out []chartView
	for _, c := range cs {
		svg, err := c.svg()
		if err != nil {
			return nil, err
		}
		// The SVG is ours: vgsvg escapes every text it draws.
		out = append(out, chartView{ID: c.ID, SVG: template.HTML(svg), Note: c.Note})
	}
	return out, nil
}

func runSection(id string, r *Run, d runData) (runView, error) {
	s := &r.Summary
	run := s.Run
	v := runView{Anchor: id, Heading: runName(r), Timeline: len(r.Ticks) > 0}
	var sub []string
	for _, part := range []string{run.Target, run.Arrival, prefixed("window ", run.Window), string(run.Status)} {
		if part != "" && part != v.Heading {
			sub = append(sub, part)
		}
	}
	v.Sub = strings.Join(sub, " · ")
	if !run.StartedAt.IsZero() {
		span := run.StartedAt.Format("2006-01-02 15:04:05 MST")
		if !run.EndedAt.IsZero() {
			span += " → " + run.EndedAt.Format("15:04:05") + " (" + run.EndedAt.Sub(run.StartedAt).Round(100*time.Millisecond).String() + ")"
		}
		v.Meta = append(v.Meta, kv{"when", span})
	}
	if run.ID != "" {
		v.Meta = append(v.Meta, kv{"run", run.ID})
	}
	if run.Protocol != "" {
		v.Meta = append(v.Meta, kv{"protocol", run.Protocol})
	}
	if e := s.Env; e.Hostname != "" || e.VCPUs > 0 {
		env := fmt.Sprintf("%s · %d vCPUs · kernel %s · cgroup %s · PSI %s", orNA(e.Hostname), e.VCPUs, orNA(e.Kernel), orNA(e.Cgroup), yesNo(e.PSI))
		if e.Hypervisor != nil {
			env += " · hypervisor " + yesNo(*e.Hypervisor)
		}
		if e.HostProcesses != nil && !*e.HostProcesses {
			env += " · own PID namespace (other processes unnamed)"
		}
		v.Meta = append(v.Meta, kv{"host", env})
	}
	if p := s.Env.Pod; p != nil {
		pod := orNA(p.Namespace) + "/" + orNA(p.Name) + " on node " + orNA(p.Node)
		if p.QoS != "" {
			pod += " · QoS " + p.QoS
		}
		v.Meta = append(v.Meta, kv{"pod", pod})
	}
	if c := s.Env.Container; c != nil {
		v.Meta = append(v.Meta, kv{"tare ran in", c.String()})
	}
	v.Verdict = verdict(s.Verdict)
	var err error
	if v.Charts, err = charts(d.Charts); err != nil {
		return v, err
	}
	v.Latency = latencyTable(s)
	v.Figures = figures(s)
	v.Targets, v.Stages = mixTables(s)
	return v, nil
}

// mixTables are the rows of the per-request and per-stage tables.
func mixTables(s *tare.Summary) (targets, stages [][]string) {
	for _, t := range s.Targets {
		targets = append(targets, []string{t.Name, strconv.Itoa(t.Requests), strconv.Itoa(t.OK), strconv.Itoa(t.Errors), strconv.Itoa(t.Dropped),
			ms(t.Latency.P50), ms(t.Latency.P95), ms(t.Latency.P99)})
	}
	for i, st := range s.Stages {
		stages = append(stages, []string{strconv.Itoa(i + 1), fmtSeconds(st.StartS) + "–" + fmtSeconds(st.StartS+st.DurationS),
			rate(&st.FromPerS) + " → " + rate(&st.TargetPerS), rate(st.OfferedPerS), rate(st.AchievedPerS),
			ms(st.Latency.P50), ms(st.Latency.P95), ms(st.Latency.P99), strings.ToUpper(string(st.Verdict))})
	}
	return targets, stages
}

func verdict(vd tare.Verdict) verdictView {
	v := verdictView{Level: strings.ToUpper(string(vd.Level)), Class: string(vd.Level), Attribution: vd.Attribution, Warnings: vd.Warnings}
	if v.Level == "" {
		v.Level, v.Class = "NOT JUDGED", "unknown"
	}
	advice := vd.Advice
	if len(advice) > 0 {
		v.Lead, advice = advice[0], advice[1:]
	}
	v.Advice = advice
	for _, sig := range vd.Signals {
		sv := signalView{Mark: "✗", Name: sig.Name, Value: "unavailable", Threshold: fmtFigure(sig.Threshold), Detail: sig.Detail}
		if sig.Finding {
			sv.Mark = "▲" // about the code, not against the measurement
		}
		if sig.Value != nil {
			sv.Value = fmtFigure(*sig.Value)
		}
		if sig.Fired {
			v.Fired = append(v.Fired, sv)
		} else {
			v.Quiet = append(v.Quiet, sv)
		}
	}
	for _, c := range vd.SLO {
		v.SLO = append(v.SLO, sloView{Met: c.Met, Objective: c.Objective, Result: "measured " + ms(c.Value)})
	}
	return v
}

// latencyTable is the summary table: latency from the scheduled time over
// every request and over the clean ticks only, and service time from the
// actual send. A cell that does not apply is "–"; one not measured "n/a".
func latencyTable(s *tare.Summary) [][]string {
	l, sv, c := s.Latency, s.Service, s.CleanLatency
	clean := func(v func(*tare.CleanLatency) *float64) string {
		if c == nil {
			return "n/a"
		}
		return ms(v(c))
	}
	rows := [][]string{
		{"avg", ms(l.Avg), "–", "–"},
		{"p50", ms(l.P50), clean(func(c *tare.CleanLatency) *float64 { return c.P50 }), ms(sv.P50)},
		{"p90", ms(l.P90), "–", "–"},
		{"p95", ms(l.P95), clean(func(c *tare.CleanLatency) *float64 { return c.P95 }), ms(sv.P95)},
		{"p99", ms(l.P99), clean(func(c *tare.CleanLatency) *float64 { return c.P99 }), ms(sv.P99)},
		{"max", ms(l.Max), "–", ms(sv.Max)},
	}
	requests := []string{"requests", fmt.Sprint(s.Requests.OK + s.Requests.Errors), "n/a", fmt.Sprint(s.Requests.OK + s.Requests.Errors)}
	if c != nil {
		requests[2] = fmt.Sprint(c.Requests)
	}
	return append(rows, requests)
}

// redirectsFollowed says how many redirects were followed and so how many
// requests the target really served: a server that redirects every request
// serves twice what the arrivals count.
func redirectsFollowed(q tare.Requests) string {
	return fmt.Sprintf("%d followed: %d requests sent in all, one per arrival and one per redirect", q.Redirects, q.Total-q.Dropped+q.Redirects)
}

func figures(s *tare.Summary) []kv {
	q := s.Requests
	out := []kv{{"requests", fmt.Sprintf("%d total · %d ok · %d errors · %d dropped", q.Total, q.OK, q.Errors, q.Dropped)}}
	if len(s.ErrorKinds) > 0 {
		out = append(out, kv{"error kinds", tally(s.ErrorKinds, " · ")})
	}
	if len(s.StatusCodes) > 0 {
		out = append(out, kv{"status codes", tally(s.StatusCodes, " · ") + failedAfterStatus(s, " · ", " · ")})
	}
	for _, kind := range tare.ByCount(s.ErrorKinds) {
		if msg := s.ErrorMessages[kind]; msg != "" {
			out = append(out, kv{kind, msg})
		}
	}
	if s.Model != nil {
		if c := promptCountText(s.Model.PromptCount); c != "" {
			out = append(out, kv{"prompt tokens", c})
		}
	}
	if s.Model != nil && s.Model.Server != nil {
		out = append(out, kv{"model server", serverText(s.Model.Server, " · ")})
	}
	if q.Redirects > 0 {
		out = append(out, kv{"redirects", redirectsFollowed(q)})
	}
	out = append(out,
		kv{"rate", fmt.Sprintf("offered %s · achieved %s", rate(s.Rate.Offered), rate(s.Rate.Achieved))},
		kv{"send lag", fmt.Sprintf("p50 %s · p99 %s · max %s", ms(s.SendLag.P50), ms(s.SendLag.P99), ms(s.SendLag.Max))})
	if qs := s.Queue; qs != nil {
		out = append(out,
			kv{"queue wait", fmt.Sprintf("avg %s · p50 %s · p95 %s · p99 %s", ms(qs.Wait.Avg), ms(qs.Wait.P50), ms(qs.Wait.P95), ms(qs.Wait.P99))},
			kv{"queue depth", fmt.Sprintf("mean %s · max %s", num(qs.Depth.Mean), num(qs.Depth.Max))})
	}
	if b := s.TTFB; b != nil {
		out = append(out, kv{"time to first byte", fmt.Sprintf("p50 %s · p95 %s · p99 %s · max %s", ms(b.P50), ms(b.P95), ms(b.P99), ms(b.Max))})
	}
	if m := s.Model; m != nil {
		out = append(out,
			kv{"time to first token", fmt.Sprintf("p50 %s · p95 %s · p99 %s · max %s", ms(m.TTFT.P50), ms(m.TTFT.P95), ms(m.TTFT.P99), ms(m.TTFT.Max))},
			kv{"time per output token", fmt.Sprintf("p50 %s · p95 %s · p99 %s · max %s", ms(m.TPOT.P50), ms(m.TPOT.P95), ms(m.TPOT.P99), ms(m.TPOT.Max))},
			kv{"tokens", fmt.Sprintf("%d output · %s tokens/s", m.OutputTokens, num(m.TokensPerS))})
		out = append(out, classFigures(m)...)
	}
	if len(s.Shards) == 0 {
		return append(out, hostFigures("", s.Generator, s.Host, s.SUT, s.Env.VCPUs)...)
	}
	// A merged run's host figures are each shard's own: its host's.
	for _, sh := range s.Shards {
		fired := ""
		if len(sh.Fired) > 0 {
			fired = " (" + strings.Join(sh.Fired, ", ") + ")"
		}
		name := "shard " + sh.Shard
		out = append(out, kv{name, fmt.Sprintf("on %s · %d requests · %s · verdict %s%s", orQuestion(sh.Hostname), sh.Requests, sh.Arrival, sh.Level, fired)})
		out = append(out, hostFigures(name+" ", sh.Generator, sh.Host, sh.SUT, sh.VCPUs)...)
	}
	return out
}

// hostFigures are one host's rows, their names prefixed: tare's generator
// there, the host's interference, whose CPU it was, and the system under
// test tare found on it.
func hostFigures(prefix string, g tare.Generator, h tare.HostSummary, sut *tare.SUTSummary, vcpus int) []kv {
	out := []kv{
		{prefix + "generator", fmt.Sprintf("cpu %s of a core · run delay %s%s", pct(g.CPUPct), pct(g.RunDelayPct), engineText(g, " · "))},
		{prefix + "host cpu", fmt.Sprintf("busy %s · steal mean %s, worst tick %s, worst cpu %s", pct(h.CPUBusyPct), pct(h.Steal.Mean), pct(h.Steal.Max), pct(h.Steal.MaxCPU))},
		{prefix + "interference", fmt.Sprintf("polluted ticks %s of %d · psi some %s · throttled %s · run delay %s",
			pct(h.PollutedTicksPct), h.Ticks, pct(h.PSISomePct), pct(h.ThrottledPct), pct(h.RunDelayPct))},
	}
	if c := connectionsText(g, " · "); c != "" {
		out = slices.Insert(out, 1, kv{prefix + "connections", c})
	}
	if by := h.CPUBy; by != nil {
		out = append(out, kv{prefix + "whose cpu", WhoseCPU(by, vcpus)})
	}
	if u := sut; u != nil {
		out = append(out, kv{prefix + "under test", fmt.Sprintf("pid %s (%s) · cpu %s of a core · run delay %s", joinInts(u.PIDs), u.FoundBy, pct(u.CPUPct), pct(u.RunDelayPct))})
	}
	return out
}

// tally formats counts as "a 3" joined by sep, largest first.
func tally(m map[string]int, sep string) string {
	keys := tare.ByCount(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, sep)
}

func overview(id string, r *Run) overviewRow {
	s := &r.Summary
	o := overviewRow{Anchor: id, Name: runName(r), Window: orDash(s.Run.Window), Level: orDash(string(s.Verdict.Level)),
		Requests: fmt.Sprint(s.Requests.Total), P95: ms(s.Latency.P95), CleanP95: "n/a",
		Steal: pct(s.Host.Steal.Mean), Polluted: pct(s.Host.PollutedTicksPct)}
	if s.CleanLatency != nil {
		o.CleanP95 = ms(s.CleanLatency.P95)
	}
	return o
}

func compareSection(c *Comparison, d *comparisonData) (*compareView, error) {
	v := &compareView{Headline: c.Headline, Advice: c.Advice, Findings: c.Findings, Changes: c.Changes, Calendar: c.Calendar, Class: "clean"}
	switch {
	case c.Diverged:
		v.Class = "polluted"
	case c.Inconclusive:
		v.Class = "suspect"
	}
	if c.Headline == "" {
		v.Class = "unknown"
	}
	var err error
	if v.Charts, err = charts(d.Charts); err != nil {
		return nil, err
	}
	if len(c.Divergence) > 0 {
		v.Header = append([]string{"metric"}, d.Windows...)
		v.Header = append(v.Header, "divergence")
		for _, m := range c.Divergence {
			row := []string{m.Metric}
			for i := range d.Windows {
				cell := "n/a"
				if i < len(m.Values) && m.Values[i] != nil {
					cell = fmtFigure(*m.Values[i])
				}
				row = append(row, cell)
			}
			div := "n/a"
			if m.Percent != nil {
				div = fmt.Sprintf("%.0f%%", *m.Percent)
				switch {
				case m.Diverged:
					div += " ✗"
				case m.Status == tare.MetricTooLittleData:
					div += " ? too little data"
				case m.Status == tare.MetricBelowFloor:
					div += " · within the latency floor"
				}
			}
			v.Rows = append(v.Rows, append(row, div))
		}
	}
	return v, nil
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
