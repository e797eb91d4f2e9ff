package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/report"
)

// TestReportRunExposure: a run whose ticks carry the probe's waits is
// handed to the report with each request's exposure, so the report draws
// every request by what it overlapped; one without them (no probe, or
// recorded before tare kept the waits: no tail in its summary) is not.
func TestReportRunExposure(t *testing.T) {
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	ticks := make([]tare.Tick, 4)
	for i := range ticks {
		from := start.Add(time.Duration(i) * time.Second)
		h := &tare.HostSample{Start: from, End: from.Add(time.Second), CPU: tare.CPUShares{CPU: -1, User: 20, Idle: 80},
			Blame: &tare.Blame{Source: tare.BlameMeasured}}
		if i == 2 {
			w := from.Add(100 * time.Millisecond)
			h.Blame.Waits = []tare.Wait{{Start: w, End: w.Add(40 * time.Millisecond), Group: tare.OwnerSUT, Owner: tare.OwnerOther,
				Name: "nightly-batch", PID: 812, Waited: 40 * time.Millisecond}}
		}
		ticks[i] = tare.Tick{Start: from, End: from.Add(time.Second), Host: h}
	}
	var results []tare.Result
	for i := range 40 {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		lat := 3 * time.Millisecond
		if i == 21 { // sent as the neighbour held the CPU
			lat = 43 * time.Millisecond
		}
		results = append(results, tare.Result{Seq: uint64(i), Scheduled: at, Sent: at, Done: at.Add(lat), Status: 200})
	}
	charts := func(sum tare.Summary, ticks []tare.Tick) string {
		t.Helper()
		run, err := newReportRun(sum, ticks)
		if err != nil {
			t.Fatal(err)
		}
		for i := range results {
			run.AddResult(&results[i])
		}
		var buf bytes.Buffer
		if err := report.HTML(&buf, report.Page{Runs: []*report.Run{run}}); err != nil {
			t.Fatal(err)
		}
		_, data, _ := strings.Cut(buf.String(), `id="tare-data">`)
		data, _, _ = strings.Cut(data, "</script>")
		var page struct {
			Runs []struct {
				Charts []struct{ Kind, Title string }
			}
		}
		if err := json.Unmarshal([]byte(data), &page); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, c := range page.Runs[0].Charts {
			kinds = append(kinds, c.Kind)
		}
		if !strings.Contains(buf.String(), "behind `nightly-batch`") && strings.Contains(strings.Join(kinds, " "), "scatter") {
			t.Errorf("scatter drawn, but nobody named behind `nightly-batch`")
		}
		return strings.Join(kinds, " ")
	}
	recorded := tare.Summary{Tail: &tare.Tail{}} // per-request blame, so the waits were kept
	if got := charts(recorded, ticks); !strings.Contains(got, "scatter") {
		t.Errorf("charts %q of a run the probe measured: want the scatter of every request", got)
	}
	if got := charts(tare.Summary{}, ticks); strings.Contains(got, "scatter") {
		t.Errorf("charts %q of a run recorded before tare kept the waits: want no scatter", got)
	}
	for i := range ticks {
		ticks[i].Host.Blame = nil // estimated: no probe
	}
	if got := charts(recorded, ticks); strings.Contains(got, "scatter") {
		t.Errorf("charts %q of a run without the probe: want no scatter", got)
	}
}
