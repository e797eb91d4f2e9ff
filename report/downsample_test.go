package report

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tare-dev/tare/stats"
)

var nan = math.NaN()

func pts(ys ...float64) []point {
	out := make([]point, len(ys))
	for i, y := range ys {
		out[i] = point{float64(i), y}
	}
	return out
}

// show formats points as x:y, "x:-" for a gap.
func show(ps []point) string {
	s := ""
	for _, p := range ps {
		if math.IsNaN(p.Y) {
			s += fmt.Sprintf("%g:- ", p.X)
		} else {
			s += fmt.Sprintf("%g:%g ", p.X, p.Y)
		}
	}
	return s
}

func TestEnvelope(t *testing.T) {
	tests := []struct {
		name    string
		in      []point
		buckets int
		want    string
	}{
		{"short series untouched", pts(1, 2, 3), 2, "0:1 1:2 2:3 "},
		{"min before max", pts(5, 1, 2, 9, 3, 3, 3, 3, 3), 2, "1:1 3:9 5:3 "},
		{"max before min", pts(9, 5, 5, 1, 2, 2, 2, 2, 2), 2, "0:9 3:1 5:2 "},
		{"one-tick spike kept", pts(1, 1, 1, 1, 1, 1, 100, 1, 1, 1, 1, 1), 2, "0:1 6:100 7:1 "},
		{"empty bucket is a gap", pts(nan, nan, nan, nan, nan, 1, 2, 3, 4), 2, "0:- 5:1 8:4 "},
		{"gaps inside a bucket skipped", pts(nan, 3, nan, 2, 2, 2, 2, 2, 2), 2, "1:3 3:2 5:2 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := envelope(tt.in, tt.buckets)
			if show(got) != tt.want {
				t.Errorf("envelope = %s, want %s", show(got), tt.want)
			}
			if len(got) > max(2*tt.buckets, len(tt.in)) {
				t.Errorf("%d points, want at most %d", len(got), 2*tt.buckets)
			}
		})
	}
}

func TestUpper(t *testing.T) {
	tests := []struct {
		name    string
		in      []point
		buckets int
		want    string
	}{
		{"short series untouched", pts(1, 2, 3), 2, "0:1 1:2 2:3 "},
		{"step at each bucket's highest", pts(1, 8, 2, 3, 0, 1, 5, 5, 5), 3, "0:8 2:8 3:3 5:3 6:5 8:5 "},
		{"gap bucket", pts(nan, nan, nan, nan, 1, 2, 3, 4, 5), 3, "0:- 2:- 3:2 5:2 6:5 8:5 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := upper(tt.in, tt.buckets); show(got) != tt.want {
				t.Errorf("upper = %s, want %s", show(got), tt.want)
			}
		})
	}
}

func TestSegments(t *testing.T) {
	tests := []struct {
		in   []point
		want string
	}{
		{pts(), "[]"},
		{pts(nan, nan), "[]"},
		{pts(1, 2, 3), "[0:1 1:2 2:3 ]"},
		{pts(nan, 1, nan, 2, 3, nan), "[1:1 ] [3:2 4:3 ]"},
	}
	for _, tt := range tests {
		got := ""
		for _, s := range segments(tt.in) {
			got += "[" + show(s) + "] "
		}
		if got == "" {
			got = "[] "
		}
		if got[:len(got)-1] != tt.want {
			t.Errorf("segments(%s) = %s, want %s", show(tt.in), got, tt.want)
		}
	}
}

func TestPointJSON(t *testing.T) {
	for _, tt := range []struct {
		p    point
		want string
	}{
		{point{0.5, 12.25}, "[0.5,12.25]"},
		{point{3, nan}, "[3,null]"},
		{point{1, math.Inf(1)}, "[1,null]"},
		{point{1234567, 1.0 / 3}, "[1.23457e+06,0.333333]"},
	} {
		b, _ := tt.p.MarshalJSON()
		if string(b) != tt.want {
			t.Errorf("%v marshals to %s, want %s", tt.p, b, tt.want)
		}
	}
}

func TestSparkline(t *testing.T) {
	tests := []struct {
		name   string
		vals   []float64
		width  int
		lo, hi float64
		want   string
	}{
		{"levels", []float64{0, 1, 2, 3, 4, 5, 6, 7}, 60, 0, 7, "▁▂▃▄▅▆▇█"},
		{"flat", []float64{3, 3, 3}, 60, 3, 3, "▁▁▁"},
		{"gap is a space", []float64{0, nan, 7}, 60, 0, 7, "▁ █"},
		{"clamped to the scale", []float64{-5, 50}, 60, 0, 10, "▁█"},
		{"folded at each bucket's highest", []float64{0, 0, 0, 7, 0, 0, 0, 0}, 4, 0, 7, "▁█▁▁"},
		{"folded gap", []float64{nan, nan, 1, 2}, 2, 0, 2, " █"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sparkline(tt.vals, tt.width, tt.lo, tt.hi); got != tt.want {
				t.Errorf("sparkline = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDistribution(t *testing.T) {
	var h stats.Distribution
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Millisecond)
	}
	d := distribution(&h)
	last := d[len(d)-1]
	if last.X != 3 || math.Abs(last.Y-1000) > 1 {
		t.Errorf("last point %v, want the maximum (1000 ms) at 3 nines (1 in 1000)", last)
	}
	for i, p := range d {
		if i > 0 && (p.X <= d[i-1].X || p.Y < d[i-1].Y) {
			t.Fatalf("point %d %v does not follow %v", i, p, d[i-1])
		}
		if p.X == 1 && math.Abs(p.Y-900) > 1 {
			t.Errorf("p90 at %v ms, want 900", p.Y)
		}
	}
	if distribution(&stats.Distribution{}) != nil {
		t.Error("an empty histogram has a distribution")
	}
}
