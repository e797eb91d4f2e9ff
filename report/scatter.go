package report

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// maxDots is the most requests the scatter of every request draws: past
// it, a chart of 720 points' width is a smear, and the page grows by
// about 100 bytes a dot.
const maxDots = 20_000

// What a request overlapped, the order the scatter draws them in: the
// rare classes last, on top, so a few slow requests behind a neighbour
// stay visible over thousands of quiet ones.
const (
	overlapNone    = iota // no outside wait, or less than tare.OverlapShare of its latency
	overlapUnknown        // a tick of its life was not measured by the probe
	overlapFailed         // the request failed: no exposure is computed for it
	overlapSteal
	overlapOthers
	overlapClasses
)

// Colours of the scatter's classes not already in the page's palette.
const (
	colQuiet  = "#8fb3d9" // light: the many requests nothing overlapped
	colFailed = "#252525"
)

// dot is one request of the scatter: when it was scheduled (s from the
// run's start), its latency and what it overlapped.
type dot struct {
	at, ms float32
	class  uint8
}

// dots keeps the requests of a run for the scatter in memory bounded by
// maxDots whatever the run's length: every request while there are at
// most maxDots, and always the maxDots/2 slowest and a uniform sample
// (reservoir) of maxDots. The slowest are the point of the chart: they
// are the tail the verdict judges.
type dots struct {
	all     []dot // every request, until there are more than maxDots
	slowest slowestDots
	sample  []dot
	seen    int
	rng     *rand.Rand

	known  int            // requests whose exposure the probe measured
	behind map[string]int // overlapped requests by the other process they waited behind most
}

func (d *dots) add(x dot) {
	d.seen++
	if d.all != nil || d.seen == 1 {
		d.all = append(d.all, x)
		if len(d.all) > maxDots {
			d.all = nil
		}
	}
	if len(d.slowest) < maxDots/2 {
		heap.Push(&d.slowest, x)
	} else if x.ms > d.slowest[0].ms {
		d.slowest[0] = x
		heap.Fix(&d.slowest, 0)
	}
	// Algorithm R: each request is in the sample with chance size/seen.
	if len(d.sample) < maxDots {
		d.sample = append(d.sample, x)
	} else if j := d.rng.IntN(d.seen); j < len(d.sample) {
		d.sample[j] = x
	}
}

// chosen returns the dots to draw: all of them when there are at most
// maxDots, else every request slower than above (p95, or higher when
// more than maxDots/2 are slower than p95) and, up to maxDots in all, a
// uniform sample of the others.
func (d *dots) chosen(p95 float64) (out []dot, above float64) {
	if d.all != nil {
		return d.all, 0
	}
	above = max(p95, float64(d.slowest[0].ms))
	// Every request slower than the slowest's fastest is among them.
	for _, x := range d.slowest {
		if float64(x.ms) > above {
			out = append(out, x)
		}
	}
	var rest []dot
	for _, x := range d.sample {
		if float64(x.ms) <= above {
			rest = append(rest, x)
		}
	}
	// The reservoir's order is not random (its first items sit where they
	// came), so a share of it is drawn by a shuffle, the same every call.
	rand.New(rand.NewPCG(uint64(d.seen), 0x5ca7)).Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append(out, rest[:min(len(rest), maxDots-len(out))]...), above
}

// p95 estimates the latency percentile from what is kept: exact while
// every request is, from the uniform sample past that.
func (d *dots) p95() float64 {
	v := d.all
	if v == nil {
		v = d.sample
	}
	ms := make([]float64, len(v))
	for i, x := range v {
		ms[i] = float64(x.ms)
	}
	slices.Sort(ms)
	// Nearest rank, as HDR histograms read a percentile.
	return ms[max(int(math.Ceil(0.95*float64(len(ms))))-1, 0)]
}

// slowestDots is a min-heap on latency: its root is the fastest of the
// slowest kept, the one a slower request replaces.
type slowestDots []dot

func (h slowestDots) Len() int           { return len(h) }
func (h slowestDots) Less(i, j int) bool { return h[i].ms < h[j].ms }
func (h slowestDots) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slowestDots) Push(x any)        { *h = append(*h, x.(dot)) }
func (h *slowestDots) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// addDot keeps res for the scatter, classed by what Exposure says it
// overlapped. Without Exposure (the caller had no probe's waits to give)
// or a timeline, there is no scatter.
func (r *Run) addDot(res *tare.Result) {
	if r.Exposure == nil || len(r.Ticks) == 0 {
		return
	}
	if r.dots == nil {
		r.dots = &dots{rng: rand.New(rand.NewPCG(uint64(len(r.Ticks)), 0x5ca7)), behind: map[string]int{}}
	}
	class := overlapFailed
	if res.OK() {
		e, known := r.Exposure(res)
		switch {
		case !known:
			class = overlapUnknown
		case !e.Overlapped:
			class = overlapNone
		case e.Top.Owner == tare.OwnerSteal:
			class = overlapSteal
		default:
			class = overlapOthers
			r.dots.behind[e.Top.Name]++
		}
		if known {
			r.dots.known++
		}
	}
	r.dots.add(dot{at: float32(res.Scheduled.Sub(r.start).Seconds()), ms: float32(millis(res.Latency())), class: uint8(class)})
}

// scatterChart draws every request (or, past maxDots, the slowest and a
// sample of the rest) at its scheduled time and latency, coloured by
// what it overlapped. Nil when the probe measured no request's life.
func (r *Run) scatterChart(id string) *chartData {
	d := r.dots
	if d == nil || d.known == 0 {
		return nil
	}
	c := &chartData{ID: id + "-requests", Title: "Every request, by what it overlapped", Kind: kindScatter,
		XLabel: "scheduled, time since the run started", YLabel: "latency (ms)", XMax: float64(len(r.Ticks)) * r.tickSeconds(),
		height: mainHeight, Stages: stageMarks(&r.Summary)}
	p95 := 0.0
	if v := r.Summary.Latency.P95; v != nil {
		p95 = *v
	} else {
		p95 = d.p95()
	}
	chosen, above := d.chosen(p95)
	var by [overlapClasses][]point
	for _, x := range chosen {
		by[x.class] = append(by[x.class], point{float64(x.at), float64(x.ms)})
	}
	colours := [overlapClasses]string{colQuiet, colUnattributed, colFailed, colSteal, colNeighbours}
	for class, pts := range by {
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b point) int { return cmp.Or(cmp.Compare(a.X, b.X), cmp.Compare(a.Y, b.Y)) })
		c.Series = append(c.Series, seriesData{Name: d.label(class), Color: colours[class], Dots: true, Points: pts})
	}
	c.Marks = r.sloMarks()
	c.Note = fmt.Sprintf("Each dot is a request, at the time it was scheduled. Coloured when outside interference overlapped at least %.0f %% of its latency: waits of the system under test behind other processes, as the scheduler probe measured them, or steal.",
		100*tare.OverlapShare)
	if n := len(chosen); above > 0 {
		c.Points = d.seen
		slower := 0
		for _, x := range chosen {
			if float64(x.ms) > above {
				slower++
			}
		}
		if above > p95 {
			c.Marks = append(c.Marks, markData{Name: fmt.Sprintf("the slowest %s, all drawn", thousands(slower)), Value: above, Color: colThreshold})
			c.Note += fmt.Sprintf(" %s of %s requests drawn: every one slower than %s (the slowest %s: more were slower than p95 than the chart holds), and a uniform sample of the others (%s of %s).",
				thousands(n), thousands(d.seen), tare.MSText(above), thousands(slower), thousands(n-slower), thousands(d.seen-slower))
		} else {
			c.Marks = append(c.Marks, markData{Name: "p95: every request above it drawn", Value: above, Color: colThreshold})
			c.Note += fmt.Sprintf(" %s of %s requests drawn: every one slower than p95 (%s), and a uniform sample of the others (%s of %s).",
				thousands(n), thousands(d.seen), tare.MSText(above), thousands(n-slower), thousands(d.seen-slower))
		}
	}
	return c
}

// label names a class in the legend; the other processes by the one most
// requests waited behind most.
func (d *dots) label(class int) string {
	switch class {
	case overlapNone:
		return "no outside wait"
	case overlapUnknown:
		return "not measured by the probe"
	case overlapFailed:
		return "failed"
	case overlapSteal:
		return "steal"
	}
	names := make([]string, 0, len(d.behind))
	for n := range d.behind {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(d.behind[b], d.behind[a]), strings.Compare(a, b)) })
	switch {
	case len(names) == 0 || names[0] == "":
		return "behind other processes"
	case len(names) == 1:
		return fmt.Sprintf("behind `%s`", names[0])
	}
	return fmt.Sprintf("behind other processes, most `%s`", names[0])
}
