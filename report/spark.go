package report

import (
	"math"
	"strings"

	"github.com/tare-dev/tare"
)

// sparkWidth is the most characters a sparkline takes.
const sparkWidth = 60

var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vals as one line of ▁▂▃▄▅▆▇█ on the scale lo..hi. A
// series longer than width is folded into width buckets, each at its
// highest value, so a one-tick spike still shows; a NaN (no figure in
// that tick) is a space.
func sparkline(vals []float64, width int, lo, hi float64) string {
	if len(vals) > width {
		folded := make([]float64, width)
		for b := range folded {
			from, to := b*len(vals)/width, (b+1)*len(vals)/width
			top := math.NaN()
			for _, v := range vals[from:to] {
				if !math.IsNaN(v) && (math.IsNaN(top) || v > top) {
					top = v
				}
			}
			folded[b] = top
		}
		vals = folded
	}
	var sb strings.Builder
	for _, v := range vals {
		if math.IsNaN(v) {
			sb.WriteByte(' ')
			continue
		}
		level := 0
		if hi > lo {
			level = int(math.Round((v - lo) / (hi - lo) * float64(len(sparkLevels)-1)))
		}
		sb.WriteRune(sparkLevels[min(max(level, 0), len(sparkLevels)-1)])
	}
	return sb.String()
}

// sparkRows returns the text summary's sparklines of per-tick p95 and
// steal, with their scales; none for fewer than two ticks.
func sparkRows(s *tare.Summary, ticks []tare.Tick) (p95, steal string) {
	if len(ticks) < 2 {
		return "", ""
	}
	lat := make([]float64, len(ticks))
	st := make([]float64, len(ticks))
	lo, hi := math.Inf(1), math.Inf(-1)
	sampled, top := false, 0.0
	for i := range ticks {
		t := &ticks[i]
		lat[i], st[i] = math.NaN(), math.NaN()
		if t.Completions > 0 {
			lat[i] = millis(t.P95)
			lo, hi = min(lo, lat[i]), max(hi, lat[i])
		}
		if t.Host != nil {
			st[i] = t.Host.CPU.Steal
			sampled, top = true, max(top, st[i])
		}
	}
	switch {
	case math.IsInf(lo, 0):
	case lo == hi:
		p95 = sparkline(lat, sparkWidth, lo, hi) + "  flat at " + ms(&lo)
	default:
		p95 = sparkline(lat, sparkWidth, lo, hi) + "  " + ms(&lo) + " … " + ms(&hi)
	}
	if sampled {
		// Steal is drawn from 0 to at least twice the polluted threshold,
		// so noise below it stays at the bottom and a polluted tick
		// stands half-way up or more.
		threshold := s.PollutedThreshold()
		scale := max(top, 2*threshold)
		steal = sparkline(st, sparkWidth, 0, scale) + "  max " + pct(&top) + ", full height " + pct(&scale)
	}
	return p95, steal
}

// waitingSpark is the server's waiting requests per tick (a model
// target's QueueDepth, read from its metrics), drawn from 0: "" when no
// tick has it.
func waitingSpark(ticks []tare.Tick) string {
	if len(ticks) < 2 {
		return ""
	}
	w := make([]float64, len(ticks))
	seen, top := false, 0.0
	for i, t := range ticks {
		w[i] = math.NaN()
		if t.QueueDepth != nil {
			w[i] = *t.QueueDepth
			seen, top = true, max(top, w[i])
		}
	}
	if !seen {
		return ""
	}
	return sparkline(w, sparkWidth, 0, max(top, 1)) + "  max " + num(&top)
}
