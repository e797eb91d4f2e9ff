package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/metrics"
)

// TestMetricsDocs checks docs/metrics.md against the registry: every series
// has a row of the table and every row a series; and that the Grafana
// dashboard beside it is JSON that queries only series that exist.
func TestMetricsDocs(t *testing.T) {
	m := metrics.New(run)
	m.AddResult(&tare.Result{})
	m.AddHost(tare.HostSample{PSISome: tare.Float(1), Throttled: tare.Float(1), RunDelay: tare.Float(1), CPUBy: &tare.CPUBy{}})
	m.SetQueueDepth(1)
	m.SetVerdict(tare.Verdict{Level: tare.Clean})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		series = append(series, mf.GetName())
	}

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range regexp.MustCompile("(?m)^\\| `(tare_[a-z_]+)` \\|").FindAllSubmatch(doc, -1) {
		rows = append(rows, string(r[1]))
	}
	slices.Sort(series)
	slices.Sort(rows)
	if !slices.Equal(series, rows) {
		t.Errorf("docs/metrics.md lists %v,\nthe registry has %v", rows, series)
	}

	raw, err := os.ReadFile("../docs/grafana-tare.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-tare.json: %v", err)
	}
	name := regexp.MustCompile(`tare_[a-z_]+`)
	var drawn []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(n, "_bucket")
				if !slices.Contains(series, base) {
					t.Errorf("panel %q queries %s, which is no series", p.Title, n)
				}
				drawn = append(drawn, base)
			}
		}
	}
	for _, want := range []string{"tare_request_latency_seconds", "tare_cpu_share_ratio"} {
		if !slices.Contains(drawn, want) {
			t.Errorf("the dashboard does not draw %s", want)
		}
	}
}
