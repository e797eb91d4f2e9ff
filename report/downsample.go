package report

import (
	"encoding/json"
	"math"
	"strconv"
)

// point is one (x, y) of a chart series. A NaN y is a gap: a tick with no
// figure (no completions, no host sample) breaks the line instead of
// dropping it to zero, since an unmeasured figure is never 0.
type point struct{ X, Y float64 }

// MarshalJSON writes the point as [x, y], y null for a gap, with six
// significant figures: enough for any axis, and stable in golden files.
func (p point) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	b = strconv.AppendFloat(b, p.X, 'g', 6, 64)
	b = append(b, ',')
	if math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendFloat(b, p.Y, 'g', 6, 64)
	}
	return append(b, ']'), nil
}

var _ json.Marshaler = point{}

// maxBuckets is how many buckets a long series is folded into: a chart's
// data area is about 650 pt wide, so 500 buckets (up to 1,000 points)
// leave less than a point per bucket and nothing a reader could resolve.
const maxBuckets = 500

// envelope folds pts (x ascending) into at most 2×buckets points when
// there are more: each bucket of consecutive points keeps its minimum and
// its maximum, in their original order. A one-tick spike is the maximum of
// its bucket, so it survives any length of run; a plain average or every
// n-th point would drop it. A bucket with no value at all keeps one gap.
func envelope(pts []point, buckets int) []point {
	if len(pts) <= 2*buckets {
		return pts
	}
	size := (len(pts) + buckets - 1) / buckets
	out := make([]point, 0, 2*buckets)
	for lo := 0; lo < len(pts); lo += size {
		hi := min(lo+size, len(pts))
		lowest, highest := -1, -1
		for i := lo; i < hi; i++ {
			y := pts[i].Y
			if math.IsNaN(y) {
				continue
			}
			if lowest < 0 || y < pts[lowest].Y {
				lowest = i
			}
			if highest < 0 || y > pts[highest].Y {
				highest = i
			}
		}
		switch {
		case lowest < 0:
			out = append(out, point{pts[lo].X, math.NaN()})
		case lowest == highest:
			out = append(out, pts[lowest])
		case lowest < highest:
			out = append(out, pts[lowest], pts[highest])
		default:
			out = append(out, pts[highest], pts[lowest])
		}
	}
	return out
}

// upper folds pts into at most 2×buckets points when there are more, as a
// step at each bucket's maximum from its first x to its last: the top of a
// shaded area, where a single polluted tick must still show.
func upper(pts []point, buckets int) []point {
	if len(pts) <= 2*buckets {
		return pts
	}
	size := (len(pts) + buckets - 1) / buckets
	out := make([]point, 0, 2*buckets)
	for lo := 0; lo < len(pts); lo += size {
		hi := min(lo+size, len(pts))
		top := math.NaN()
		for i := lo; i < hi; i++ {
			if y := pts[i].Y; !math.IsNaN(y) && (math.IsNaN(top) || y > top) {
				top = y
			}
		}
		out = append(out, point{pts[lo].X, top}, point{pts[hi-1].X, top})
	}
	return out
}

// segments splits pts at its gaps into runs of points that can be drawn
// as one line.
func segments(pts []point) [][]point {
	var out [][]point
	start := -1
	for i, p := range pts {
		gap := math.IsNaN(p.Y)
		switch {
		case !gap && start < 0:
			start = i
		case gap && start >= 0:
			out = append(out, pts[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, pts[start:])
	}
	return out
}
