package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// calendarFixture is the calendar package's golden calendar: two weeks of
// a host busy at 03:00 (a backup) and quiet at 11:00.
func calendarFixture(t *testing.T) *tare.Calendar {
	t.Helper()
	b, err := os.ReadFile("../calendar/testdata/busy-at-3.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var c tare.Calendar
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestCalendarText pins the text of tare check history: the hours with
// their spread and neighbours, the days drawn hour by hour, the findings,
// the weekdays and the cost.
func TestCalendarText(t *testing.T) {
	var buf bytes.Buffer
	if err := CalendarText(&buf, calendarFixture(t)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"calendar of host vm-1", "03:00", "backup", "The busiest hour is 03:00–04:00", "The quietest hour is 11:00–12:00",
		"by weekday", "Monday", "samples a day", "other hosts in this store (--host): vm-2 (96 samples)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	goldenfile.Check(t, "calendar.golden.txt", buf.Bytes())
}

// TestCalendarLine: a sample as tare check --every prints it.
func TestCalendarLine(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 5, 0, 0, time.Local)
	line := CalendarLine(&tare.CalendarSample{Host: "vm-1", Start: at, Level: tare.Polluted, InterferencePct: tare.Float(61.25),
		StealPct: tare.Float(0), PSISomePct: tare.Float(40), CostCPUMS: tare.Float(9.4),
		TopOthers: []tare.ProcessShare{{Name: "backup", CPUPct: 58}, {Name: "sshd", CPUPct: 0.1}}})
	want := "2026-12-02 03:05:00  vm-1  polluted  interference 61.2%  steal 0.0%  psi 40.0%  run delay n/a  busiest: backup 58.0%  · 9 ms of tare's CPU"
	if line != want {
		t.Errorf("line\n%q\nwant\n%q", line, want)
	}
}

// TestCalendarHTML: the calendar's page draws the heatmap, a cell for
// every hour of every day coloured on the scale, and carries the
// calendar in its data part.
func TestCalendarHTML(t *testing.T) {
	c := calendarFixture(t)
	page := render(t, Page{Calendar: c})
	html := string(page)
	for _, want := range []string{`id="calendar"`, `id="svg-calendar-heatmap"`, `id="svg-calendar-hours"`, "Calendar of host vm-1", "By weekday",
		"The busiest hour is 03:00–04:00", "<title>tare calendar · host vm-1</title>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	start := strings.Index(html, `id="svg-calendar-heatmap"`)
	svg := html[start : start+strings.Index(html[start:], "</svg>")]
	// The cells are the only filled paths without a stroke; count them by
	// their colours: every scale colour mixes into some, none is grey.
	if n := strings.Count(svg, "<path"); n < 14*24 {
		t.Errorf("%d paths in the heatmap, want a cell for each of the 14×24 hours at least", n)
	}
	data := html[strings.Index(html, `id="tare-data">`)+len(`id="tare-data">`):]
	data = data[:strings.Index(data, "</script>")]
	var parsed struct {
		Calendar struct {
			Calendar tare.Calendar `json:"calendar"`
			Charts   []struct {
				ID   string    `json:"id"`
				Heat *heatData `json:"heat"`
			} `json:"charts"`
		} `json:"calendar"`
	}
	if err := json.Unmarshal([]byte(data), &parsed); err != nil {
		t.Fatal(err)
	}
	pc := parsed.Calendar
	if pc.Calendar.Host != "vm-1" || len(pc.Charts) != 2 || pc.Charts[0].Heat == nil || len(pc.Charts[0].Heat.Rows) != 14 || len(pc.Charts[0].Heat.Values[0]) != 24 {
		t.Fatalf("data part: host %q, %d charts", pc.Calendar.Host, len(pc.Charts))
	}
	h := pc.Charts[0].Heat
	for r, row := range h.Values {
		if v := row[3]; v == nil || *v < 40 {
			t.Errorf("%s 03:00: %v, want the backup's hour above 40%%", h.Rows[r], v)
		}
	}
	saveOut(t, "calendar.html", page)
}

// TestHeatColor: the scale runs from pale to dark red at the verdict's
// thresholds, grey where there is no sample.
func TestHeatColor(t *testing.T) {
	for _, tt := range []struct {
		v    *float64
		want string
	}{{nil, colNoSample}, {tare.Float(0), "#ffffcc"}, {tare.Float(10), "#fd8d3c"}, {tare.Float(50), "#800026"}, {tare.Float(400), "#800026"}} {
		if got, want := heatColor(tt.v), hexColor(tt.want, 0xff); got != want {
			t.Errorf("%v: %v, want %v", tt.v, got, want)
		}
	}
	a, b := heatColor(tare.Float(6)), heatColor(tare.Float(9))
	if a == b {
		t.Error("6% and 9% have one colour: the scale does not interpolate")
	}
}

// TestComparisonSaysWhetherAsPredicted: the comparison of windows chosen
// from the calendar says of each, as text and on the page, whether it
// measured as predicted.
func TestComparisonSaysWhetherAsPredicted(t *testing.T) {
	no, yes := false, true
	checks := []tare.WindowCheck{
		{WindowChoice: tare.WindowChoice{Window: "peak", Host: "vm-1"}, Measured: tare.Float(3), AsPredicted: &no,
			Verdict: "peak (03:00-04:00, the calendar's busiest): measured 3.0% interference, quieter than predicted"},
		{WindowChoice: tare.WindowChoice{Window: "offpeak", Host: "vm-1"}, Measured: tare.Float(1), AsPredicted: &yes,
			Verdict: "offpeak (11:00-12:00, the calendar's quietest): measured 1.0% interference, as quiet as predicted"},
	}
	var buf bytes.Buffer
	if err := CompareText(&buf, &tare.Comparison{Calendar: checks}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"calendar  the windows chosen from host vm-1's calendar, as measured", "  ✗ peak (03:00-04:00", "  ✓ offpeak (11:00-12:00"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
	c := htmlComparison(t)
	cmp := ComparisonOf(&tare.Comparison{Calendar: checks}, nil)
	c.Calendar = cmp.Calendar
	html := string(render(t, Page{Comparison: c}))
	if !strings.Contains(html, "Windows from the host's calendar") || !strings.Contains(html, "quieter than predicted") {
		t.Error("the page does not say whether the windows were as predicted")
	}
}
