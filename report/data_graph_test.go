package report

import (
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestWhoseCPUChartSplitsGraph: a system under test of several nodes is
// drawn as a layer per node, named after it, stacked under tare's.
func TestWhoseCPUChartSplitsGraph(t *testing.T) {
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	var ticks []tare.Tick
	for i := range 3 {
		at := start.Add(time.Duration(i) * time.Second)
		ticks = append(ticks, tare.Tick{Start: at, End: at.Add(time.Second), Host: &tare.HostSample{Start: at, End: at.Add(time.Second),
			CPUBy: &tare.CPUBy{SystemUnderTest: 30, Tare: 5, Idle: 65, SUTNodes: []tare.NodeShare{{Node: 0, CPUPct: 10}, {Node: 1, CPUPct: 20}}}}})
	}
	s := tare.Summary{SUT: &tare.SUTSummary{Graph: []tare.SUTNode{{Name: "nginx"}, {Name: "gunicorn", From: tare.Int(0)}}}}
	c := NewRun(s, ticks).whoseCPUChart("r")
	var names []string
	top := map[string]float64{}
	for _, sr := range c.Series {
		names = append(names, sr.Name)
		top[sr.Name] = sr.Points[0].Y
	}
	if !slices.Contains(names, "under test: nginx") || !slices.Contains(names, "under test: gunicorn") || slices.Contains(names, "system under test") {
		t.Fatalf("layers %v; want one per node of the graph instead of one for the system under test", names)
	}
	if top["under test: nginx"] != 10 || top["under test: gunicorn"] != 30 || top["tare"] != 35 {
		t.Errorf("stacked tops %v; want nginx 10, gunicorn 10+20, tare 30+5", top)
	}
}
