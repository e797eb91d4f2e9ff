package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"github.com/tare-dev/tare/judge"
)

// dataPart returns the JSON of a report's data part, as HTML wrote it.
func dataPart(t *testing.T, html []byte) []byte {
	t.Helper()
	const open = `<script type="application/json" id="tare-data">`
	i := bytes.Index(html, []byte(open))
	if i < 0 {
		t.Fatalf("no data part in the report")
	}
	rest := html[i+len(open):]
	j := bytes.Index(rest, []byte("</script>"))
	if j < 0 {
		t.Fatalf("data part of the report is not closed")
	}
	return bytes.TrimSpace(rest[:j])
}

// pointRE matches an indented [x, y] point.
var pointRE = regexp.MustCompile(`\[\s*([-+.\deE]+),\s*([-+.\deE]+|null)\s*\]`)

// readable indents the compact data part for a golden file, one point
// per line.
func readable(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", " "); err != nil {
		t.Fatalf("data part is not JSON: %v", err)
	}
	return append(pointRE.ReplaceAll(buf.Bytes(), []byte("[$1, $2]")), '\n')
}

func render(t *testing.T, p Page) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := HTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// saveOut keeps a rendered artefact in testdata/out (ignored by git), for
// a person to open.
func saveOut(t *testing.T, name string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join("testdata", "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "out", name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// seeded is the run of the golden tests: a queue of model calls whose
// host is stolen from a third of the way in, with one very slow request
// in a clean tick.
var seeded = synth{seed: 7, ticks: 60, rate: 20, steal: [2]int{20, 38}, spike: 48, queue: true, model: true,
	label: "checkout", window: "peak", slo: "p95<=40ms"}

// TestHTMLDataGolden pins the data part of the report of a seeded run:
// the summary and every point of every chart.
func TestHTMLDataGolden(t *testing.T) {
	run, _ := seeded.build(t)
	html := render(t, Page{Runs: []*Run{run}})
	saveOut(t, "seeded.html", html)
	goldenfile.Check(t, "report.golden.json", readable(t, dataPart(t, html)))
}

// htmlComparison is three windows of the same load: a stolen peak, a quiet
// off-peak and a mid window in between.
func htmlComparison(t *testing.T) *Comparison {
	t.Helper()
	peak, _ := synth{seed: 11, ticks: 40, rate: 20, steal: [2]int{5, 35}, spike: -1, window: "peak"}.build(t)
	off, _ := synth{seed: 12, ticks: 40, rate: 20, steal: [2]int{0, 0}, spike: -1, window: "offpeak"}.build(t)
	mid, _ := synth{seed: 13, ticks: 40, rate: 20, steal: [2]int{15, 22}, spike: -1, window: "mid"}.build(t)
	c := &Comparison{
		Headline: "p95 diverges between the windows: the server is the variable, no scaling decision is valid",
		Diverged: true,
		Advice:   []string{"Plan on the typical (mid) window; quote capacity as a range."},
		Windows:  []Window{{"peak", peak}, {"offpeak", off}, {"mid", mid}},
		Capacity: &Capacity{Unit: "req/s at p95<=40ms", Best: CapacityPoint{"offpeak", tare.Float(120)},
			Typical: CapacityPoint{"mid", tare.Float(95)}, Worst: CapacityPoint{"peak", tare.Float(60)}},
		SLOMS:    tare.Float(40),
		Findings: []string{"Peak, the window expected to be the busiest, was not: p95 was 21.0ms in mid against 18.2ms in peak, beyond noise"},
		Changes:  []string{"peak: in peak, `backup` used 31% of a CPU (absent in offpeak)", "mid: nothing in the ledger differed from offpeak"},
	}
	for _, m := range []struct {
		name string
		get  func(*tare.Summary) *float64
	}{
		{"p50_ms", func(s *tare.Summary) *float64 { return s.Latency.P50 }},
		{"p95_ms", func(s *tare.Summary) *float64 { return s.Latency.P95 }},
		{"p99_ms", func(s *tare.Summary) *float64 { return s.Latency.P99 }},
		{"achieved_per_s", func(s *tare.Summary) *float64 { return s.Rate.Achieved }},
	} {
		d := Divergence{Metric: m.name}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, w := range c.Windows {
			v := m.get(&w.Run.Summary)
			d.Values = append(d.Values, v)
			lo, hi = min(lo, *v), max(hi, *v)
		}
		d.Percent = tare.Float(math.Round(1000*(hi-lo)/lo) / 10)
		d.Diverged = *d.Percent > 30
		d.Status = map[bool]string{true: tare.MetricDiverged, false: tare.MetricWithin}[d.Diverged]
		c.Divergence = append(c.Divergence, d)
	}
	for _, w := range []string{"peak", "offpeak", "mid"} {
		for i, rate := range []float64{20, 40, 60, 80, 100, 120} {
			base := map[string]float64{"peak": 18, "offpeak": 9, "mid": 12}[w]
			p95 := base * (1 + math.Pow(float64(i)/3, 2))
			c.Sweep = append(c.Sweep, SweepPoint{Window: w, RatePerS: rate, P95MS: tare.Float(math.Round(p95*10) / 10), MetSLO: p95 <= 40})
		}
	}
	return c
}

func TestHTMLComparisonGolden(t *testing.T) {
	c := htmlComparison(t)
	html := render(t, Page{Comparison: c})
	goldenfile.Check(t, "html-compare.golden.json", readable(t, dataPart(t, html)))
	var runs []*Run
	for _, w := range c.Windows {
		runs = append(runs, w.Run)
	}
	saveOut(t, "compare.html", render(t, Page{Comparison: c, Runs: runs}))
}

// TestHTMLEscapes: every string that comes from a run is text on the page,
// never markup: labels, targets, error kinds, advice, window names.
func TestHTMLEscapes(t *testing.T) {
	const evil = `<script>alert(1)</script>`
	run, _ := seeded.build(t)
	s := &run.Summary
	s.Run.Label = evil
	s.Run.Target = `GET http://127.0.0.1/"><img src=x onerror=alert(2)>`
	s.Run.Window = `'><svg onload=alert(3)>`
	s.Env.Hostname = "</style><script>alert(4)</script>"
	s.ErrorKinds = map[string]int{"<b>bold</b>": 1}
	s.Verdict.Advice = append(s.Verdict.Advice, `</script><script>alert(5)</script>`)
	s.Verdict.Warnings = []string{`<iframe src="http://example.com/">`}
	c := &Comparison{Headline: evil, Windows: []Window{{Name: evil, Run: run}, {Name: "&amp;", Run: run}}}
	html := string(render(t, Page{Runs: []*Run{run}, Comparison: c, Title: evil}))
	saveOut(t, "escapes.html", []byte(html))

	if n := strings.Count(html, "<script"); n != 1 {
		t.Errorf("%d <script elements, want only the data part", n)
	}
	for _, bad := range []string{"<img", "<iframe", "<b>bold", "<svg onload", "</style><"} {
		if strings.Contains(html, bad) {
			t.Errorf("the page contains %q: a run's string became markup", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;bold&lt;/b&gt;", "&amp;amp;"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q, the escaped text", want)
		}
	}
	// The data part is JSON with <, > and & escaped, and still parses.
	var data pageData
	raw := dataPart(t, []byte(html))
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatalf("data part does not parse: %v", err)
	}
	if data.Runs[0].Summary.Run.Label != evil {
		t.Errorf("data part label = %q, want %q", data.Runs[0].Summary.Run.Label, evil)
	}
}

// TestHTMLOffline: nothing on the page can make a request: a policy that
// forbids them, and no URL outside it but the data: icon.
func TestHTMLOffline(t *testing.T) {
	run, _ := seeded.build(t)
	html := string(render(t, Page{Runs: []*Run{run}}))
	if !strings.Contains(html, `content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`) {
		t.Error("the page has no Content-Security-Policy forbidding requests")
	}
	// The only URLs are the target's, as text, and the SVG namespaces.
	html = strings.ReplaceAll(html, "http://127.0.0.1:8080/checkout", "")
	html = strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, "")
	html = strings.ReplaceAll(html, `xmlns:xlink="http://www.w3.org/1999/xlink"`, "")
	for _, bad := range []string{"http://", "https://", "//cdn", "@import", "url(", "src="} {
		if strings.Contains(html, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
}

// TestHTMLSummaryOnly: a run from a summary file has no timeline; the page
// says so and draws what the summary holds.
func TestHTMLSummaryOnly(t *testing.T) {
	full, _ := seeded.build(t)
	run := NewRun(full.Summary, nil)
	html := render(t, Page{Runs: []*Run{run}})
	var data pageData
	if err := json.Unmarshal(dataPart(t, html), &data); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range data.Runs[0].Charts {
		ids = append(ids, c.ID)
	}
	if fmt.Sprint(ids) != "[run1-distribution]" {
		t.Errorf("charts %v, want the distribution from the summary only", ids)
	}
	if !bytes.Contains(html, []byte("No timeline")) {
		t.Error("the page does not say the run has no timeline")
	}
	if err := PNG(&bytes.Buffer{}, run); tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("PNG of a run without ticks: %v, want an EINVALID error", err)
	}
}

// TestHTMLModelClasses: a conversation load's figures per turn and per
// conversation are in the page's figures, as in the text report.
func TestHTMLModelClasses(t *testing.T) {
	full, _ := seeded.build(t)
	s := full.Summary
	s.Model = &tare.ModelSummary{
		Classes: []tare.ClassSummary{
			{Name: "turn 1", Requests: 4, OK: 4, TTFT: tare.PercentilesMS{P50: tare.Float(161), P95: tare.Float(190)}, Latency: tare.QuantilesMS{P50: tare.Float(400), P95: tare.Float(450)}, InputTokens: tare.Float(120)},
			{Name: "turn 2", Requests: 4, OK: 3, Errors: 1, TTFT: tare.PercentilesMS{P50: tare.Float(682), P95: tare.Float(700)}, Latency: tare.QuantilesMS{P50: tare.Float(900), P95: tare.Float(950)}},
		},
		Conversations: &tare.ConversationSummary{Count: 4, Complete: 3, Turns: 2, Duration: tare.QuantilesMS{P50: tare.Float(1500), P95: tare.Float(1700)}},
	}
	html := string(render(t, Page{Runs: []*Run{NewRun(s, full.Ticks)}}))
	for _, want := range []string{
		"turn 1", "4 sent · 4 ok · 0 errors · ttft p50 161ms · p95 190ms · latency p50 400ms · p95 450ms · 120.0 input tokens",
		"turn 2", "4 sent · 3 ok · 1 errors · ttft p50 682ms",
		"4 · 3 with every turn ok · 2.00 turns each · took p50 1.5s · p95 1.7s",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}

// TestHTMLNothingSucceeded: a run in which every request was refused says
// so in the page's verdict: its lead is to check the target, and the
// failures signal comes before every other.
func TestHTMLNothingSucceeded(t *testing.T) {
	s, ticks := fixture(make([]float64, 10), tare.Float(0.2))
	refused(s, ticks)
	s.Verdict = judge.Judge(s, ticks, judge.DefaultThresholds(), nil)
	html := string(render(t, Page{Runs: []*Run{NewRun(*s, ticks)}}))
	lead := strings.Index(html, "Check the target before reading any figure")
	detail := strings.Index(html, "no request succeeded: 1000 of 1000 failed (1000 refused)")
	steal := strings.Index(html, "steal averaged")
	if lead < 0 || detail < 0 || steal < 0 || !(lead < detail && detail < steal) {
		t.Errorf("lead at %d, failures at %d, steal at %d: want the check-the-target lead, then the failures signal, before the other signals", lead, detail, steal)
	}
	if !strings.Contains(html, "SUSPECT") {
		t.Error("the page does not say SUSPECT")
	}
}

func TestPNG(t *testing.T) {
	run, _ := seeded.build(t)
	var buf bytes.Buffer
	if err := PNG(&buf, run, run); err != nil {
		t.Fatal(err)
	}
	saveOut(t, "main-chart.png", buf.Bytes())
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// Two charts one under the other, at 144 dpi: 2 px per point.
	if got, want := img.Bounds().Dx(), int(2*chartWidth); got != want {
		t.Errorf("width %d px, want %d", got, want)
	}
	if got, want := img.Bounds().Dy(), int(2*2*mainHeight); got != want {
		t.Errorf("height %d px, want %d", got, want)
	}
}

// TestLatencyChartNeighbourWait: the latency chart draws, beside PSI and
// run delay, each tick's wait behind neighbours: the figure the verdict
// judges.
func TestLatencyChartNeighbourWait(t *testing.T) {
	run, _ := seeded.build(t)
	c := run.latencyChart("run1-latency")
	i := slices.IndexFunc(c.Bands, func(b seriesData) bool { return b.Name == "behind neighbours" })
	if i < 0 {
		t.Fatalf("bands %v: no wait behind neighbours", bandNames(c))
	}
	var want []float64
	for _, tk := range run.Ticks {
		if tk.Host == nil {
			continue
		}
		if w := tk.Host.NeighbourWait(); w != nil {
			want = append(want, *w)
		}
	}
	var got []float64
	for _, p := range c.Bands[i].Points {
		if !math.IsNaN(p.Y) {
			got = append(got, p.Y)
		}
	}
	if !slices.Equal(got, want) || len(want) == 0 || slices.Max(want) == 0 {
		t.Errorf("band behind neighbours %v, want each tick's NeighbourWait %v", got, want)
	}
}

func bandNames(c *chartData) []string {
	var names []string
	for _, b := range c.Bands {
		names = append(names, b.Name)
	}
	return names
}

// TestHTMLLongRun: a run of 10,000 ticks stays light, and the one slow
// tick in it still shows after folding.
func TestHTMLLongRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 10,000-tick run takes a few seconds")
	}
	run, results := synth{seed: 3, ticks: 10_000, rate: 4, steal: [2]int{4000, 4600}, spike: 7321, label: "long"}.build(t)
	begin := time.Now()
	html := render(t, Page{Runs: []*Run{run}})
	elapsed := time.Since(begin)
	saveOut(t, "long.html", html)
	t.Logf("10,000 ticks, %d records: %d bytes of HTML, rendered in %s", len(results), len(html), elapsed.Round(time.Millisecond))
	if len(html) > 1<<20 {
		t.Errorf("the report of 10,000 ticks is %d bytes, want under 1 MiB", len(html))
	}
	var data pageData
	if err := json.Unmarshal(dataPart(t, html), &data); err != nil {
		t.Fatal(err)
	}
	var latency *chartData
	for _, c := range data.Runs[0].Charts {
		for _, s := range append(c.Series, c.Bands...) {
			if len(s.Points) > 2*maxBuckets {
				t.Errorf("%s %s has %d points, want at most %d", c.ID, s.Name, len(s.Points), 2*maxBuckets)
			}
		}
		if c.ID == "run1-latency" {
			latency = c
		}
	}
	if latency == nil || latency.Points != 10_001 && latency.Points != 10_000 {
		t.Fatalf("latency chart folded from %v points, want the 10,000 ticks", latency)
	}
	top := 0.0
	for _, p := range latency.Series[2].Points { // p99
		if !math.IsNaN(p.Y) {
			top = max(top, p.Y)
		}
	}
	if top < 1400 {
		t.Errorf("the 1.5 s request of tick 7321 is lost: the highest p99 drawn is %.0f ms", top)
	}
}

// FuzzHTMLStrings: whatever a run's label, target and error kinds say,
// the page has the very elements it has with plain words in their place,
// and the data part gives the label back unchanged.
func FuzzHTMLStrings(f *testing.F) {
	for _, seed := range []string{"checkout", `<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`,
		"</script><script>x()</script>", "\u2028\u2029", "&amp;&lt;", "<!--", "]]>", "\x00\xff", "<"} {
		f.Add(seed, seed)
	}
	base := NewRun(tare.Summary{Schema: tare.SummarySchema, Latency: tare.LatencyMS{P50: tare.Float(5), P95: tare.Float(9)}}, nil)
	page := func(t *testing.T, label, other string) []byte {
		run := *base
		run.Summary.Run.Label, run.Summary.Run.Target = label, other
		run.Summary.ErrorKinds = map[string]int{other: 1}
		run.Summary.Verdict.Advice = []string{other}
		var buf bytes.Buffer
		if err := HTML(&buf, Page{Runs: []*Run{&run}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// plain stands for s with a word, keeping what the page depends on:
	// whether it is empty, and whether the two strings are equal.
	plain := func(s, other string) (string, string) {
		p, q := "", ""
		if s != "" {
			p = "plain"
		}
		switch {
		case other == s:
			q = p
		case other != "":
			q = "other"
		}
		return p, q
	}
	tag := regexp.MustCompile(`<[a-zA-Z/!?]`)
	f.Fuzz(func(t *testing.T, label, other string) {
		html := page(t, label, other)
		pl, po := plain(label, other)
		want := page(t, pl, po)
		if got, want := tag.FindAll(html, -1), tag.FindAll(want, -1); len(got) != len(want) {
			t.Fatalf("label %q, target %q: %d tags on the page, %d with plain words", label, other, len(got), len(want))
		}
		var data pageData
		if err := json.Unmarshal(dataPart(t, html), &data); err != nil {
			t.Fatalf("data part: %v", err)
		}
		if !utf8.ValidString(label) {
			return // JSON replaces invalid UTF-8
		}
		if got := data.Runs[0].Summary.Run.Label; got != label {
			t.Fatalf("label %q came back as %q", label, got)
		}
	})
}

// TestHTMLMix: a run that mixed requests and ramped shows a table of each,
// and the stages on its time axis.
func TestHTMLMix(t *testing.T) {
	run, _ := seeded.build(t)
	s := &run.Summary
	s.Warmup = &tare.Warmup{DurationS: 5, Requests: 40}
	s.Targets = []tare.TargetSummary{{Name: "home", Requests: 700, OK: 700, Latency: tare.QuantilesMS{P50: tare.Float(3)}}, {Name: "POST http://h/orders", Requests: 300, OK: 299, Errors: 1}}
	s.Stages = []tare.StageSummary{
		{StartS: 5, DurationS: 25, TargetPerS: 20, OfferedPerS: tare.Float(12), AchievedPerS: tare.Float(12), Verdict: tare.Clean},
		{StartS: 30, DurationS: 35, FromPerS: 20, TargetPerS: 20, OfferedPerS: tare.Float(20), AchievedPerS: tare.Float(19.9), Verdict: tare.Polluted},
	}
	html := render(t, Page{Runs: []*Run{run}})
	saveOut(t, "mix.html", html)
	for _, want := range []string{"<h3>Targets</h3>", "<td>POST http://h/orders</td><td>300</td><td>299</td><td>1</td>", "<h3>Stages</h3>", "<td>2</td><td>30s–1m5s</td>", "<td>POLLUTED</td>", "2 → 20.0/s"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the page has no %q", want)
		}
	}
	var data pageData
	if err := json.Unmarshal(dataPart(t, html), &data); err != nil {
		t.Fatal(err)
	}
	for _, c := range data.Runs[0].Charts {
		if c.Kind == kindTime && (len(c.Stages) != 2 || c.Stages[1].At != 25) {
			t.Errorf("chart %s marks stages %+v, want two, the second at 25 s (30 s less the warm-up)", c.ID, c.Stages)
		}
	}
}
