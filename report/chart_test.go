package report

import (
	"image/color"
	"strings"
	"testing"
)

func TestClock(t *testing.T) {
	tests := []struct {
		s     float64
		hours bool
		want  string
	}{
		{0, false, "0:00"},
		{59.6, false, "1:00"},
		{605, false, "10:05"},
		{0, true, "0:00:00"},
		{5400, true, "1:30:00"},
		{90061, true, "25:01:01"},
	}
	for _, tt := range tests {
		if got := clock(tt.s, tt.hours); got != tt.want {
			t.Errorf("clock(%g, %v) = %q, want %q", tt.s, tt.hours, got, tt.want)
		}
	}
}

func TestTimeTicks(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		want   string // the labelled ticks
	}{
		{"ten seconds", 0, 10, "0:00 0:02 0:04 0:06 0:08 0:10"},
		{"two minutes", 0, 121, "0:00 0:30 1:00 1:30 2:00"},
		{"three hours", 0, 10_000, "0:00:00 0:30:00 1:00:00 1:30:00 2:00:00 2:30:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var labels []string
			for _, tk := range (timeTicks{}).Ticks(tt.lo, tt.hi) {
				if tk.Label != "" {
					labels = append(labels, tk.Label)
				}
			}
			if got := strings.Join(labels, " "); got != tt.want {
				t.Errorf("ticks %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10_000: "10,000", 1_234_567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHexColor(t *testing.T) {
	if got := hexColor("#d62728", 0xff); got != (color.NRGBA{0xd6, 0x27, 0x28, 0xff}) {
		t.Errorf("hexColor(#d62728) = %v", got)
	}
	for _, bad := range []string{"", "red", "#12345", "#zzzzzz"} {
		if got := hexColor(bad, 0x80); got != (color.NRGBA{0x80, 0x80, 0x80, 0x80}) {
			t.Errorf("hexColor(%q) = %v, want grey", bad, got)
		}
	}
}

// TestClipOutliers: one request a hundred times slower than the rest caps
// the axis; a steady climb does not.
func TestClipOutliers(t *testing.T) {
	flat := make([]float64, 100)
	for i := range flat {
		flat[i] = 10 + float64(i%7)
	}
	spiky := append([]float64{}, flat...)
	spiky[50] = 1500
	climb := make([]float64, 100)
	for i := range climb {
		climb[i] = float64(i + 1)
	}
	tests := []struct {
		name    string
		ys      []float64
		slo     float64
		capped  bool
		showSLO bool
	}{
		{"flat", flat, 0, false, true},
		{"one spike", spiky, 0, true, true},
		{"one spike, slo in view", spiky, 20, true, true},
		{"one spike, slo far above", spiky, 1000, true, false},
		{"climb", climb, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &chartData{Kind: kindTime, Series: []seriesData{{Points: pts(tt.ys...)}}}
			if tt.slo > 0 {
				c.Marks = []markData{{Name: "slo", Value: tt.slo}}
			}
			c.clipOutliers()
			if capped := c.YMax > 0; capped != tt.capped {
				t.Errorf("capped at %g, want capped %v", c.YMax, tt.capped)
			}
			if tt.slo > 0 && c.markShown(c.Marks[0]) != tt.showSLO {
				t.Errorf("slo %g shown %v under a cap of %g, want %v", tt.slo, !tt.showSLO, c.YMax, tt.showSLO)
			}
		})
	}
}
