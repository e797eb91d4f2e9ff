package stats

import (
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
)

// The range and precision of the histograms, in microseconds.
const (
	histLowest  = 1                                   // 1 µs
	histHighest = int64(time.Hour / time.Microsecond) // 1 h
	runDigits   = 3                                   // run-wide: within 0.1 %
	tickDigits  = 2                                   // per tick: within 1 %, an eighth of the memory
)

// dist is one run-wide distribution: an HDR histogram for the percentiles,
// and the exact count, sum and maximum that a histogram can only approximate.
// The histogram is allocated on first use, so a figure the run never
// measures (queue wait of an HTTP run) costs nothing.
type dist struct {
	h       *hdrhistogram.Histogram
	n       int64
	sum     float64 // nanoseconds; float64 cannot overflow where an int64 sum of a long run could
	max     time.Duration
	clamped int64 // values outside 0 .. 1 h, recorded at the nearest bound
}

// add records one value.
func (d *dist) add(v time.Duration) {
	if d.h == nil {
		d.h = hdrhistogram.New(histLowest, histHighest, runDigits)
	}
	if v < 0 {
		// A clock read out of order: the value is unknown but small.
		v = 0
		d.clamped++
	}
	d.n++
	d.sum += float64(v)
	if v > d.max {
		d.max = v
	}
	recordClamped(d.h, v, &d.clamped)
}

// recordClamped records v in microseconds, at the histogram's bounds when it
// falls outside them, counting each such value in *clamped.
func recordClamped(h *hdrhistogram.Histogram, v time.Duration, clamped *int64) {
	us := int64(v / time.Microsecond)
	switch {
	case us < 0:
		us = 0
		*clamped++
	case us > h.HighestTrackableValue():
		us = h.HighestTrackableValue()
		*clamped++
	}
	// Cannot fail: the value is within range and the count is 1.
	_ = h.RecordValue(us)
}

// quantile is the q-th percentile (0–100), zero when d is empty. HDR
// answers with the highest value equivalent to the true one, which can be a
// hair above the exact maximum: capping it keeps p99 ≤ max in every report.
func (d *dist) quantile(q float64) time.Duration {
	if d.n == 0 {
		return 0
	}
	return min(time.Duration(d.h.ValueAtPercentile(q))*time.Microsecond, d.max)
}

// ms returns the q-th percentile in milliseconds, nil when d is empty.
func (d *dist) ms(q float64) *float64 {
	if d.n == 0 {
		return nil
	}
	return msOf(d.quantile(q))
}

// avgMS is the exact mean in milliseconds, nil when d is empty.
func (d *dist) avgMS() *float64 {
	if d.n == 0 {
		return nil
	}
	return msOf(time.Duration(d.sum / float64(d.n)))
}

// maxMS is the exact maximum in milliseconds, nil when d is empty.
func (d *dist) maxMS() *float64 {
	if d.n == 0 {
		return nil
	}
	return msOf(d.max)
}

// clone returns an independent copy, so a summary can fold pending values
// into it without touching the recorder.
func (d *dist) clone() dist {
	c := *d
	if d.h != nil {
		c.h = d.h.Clone()
	}
	return c
}

// msOf is d in milliseconds, rounded to the microsecond: the resolution of
// the histograms, and no false precision in the JSON.
func msOf(d time.Duration) *float64 {
	return round(float64(d)/float64(time.Millisecond), 3)
}

// round returns v rounded to the given number of decimals.
func round(v float64, decimals int) *float64 {
	p := math.Pow(10, float64(decimals))
	r := math.Round(v*p) / p
	return &r
}

// Distribution is a run-wide distribution of durations as stats keeps
// them (1 µs .. 1 h, three significant figures), for a reader that draws
// it: the report's latency distribution.
type Distribution struct{ d dist }

// Add records one value.
func (d *Distribution) Add(v time.Duration) { d.d.add(v) }

// Count is the number of values added.
func (d *Distribution) Count() int64 { return d.d.n }

// Quantile is the q-th percentile (0–100), at most Max; zero when empty.
func (d *Distribution) Quantile(q float64) time.Duration { return d.d.quantile(q) }

// Max is the exact maximum; zero when empty.
func (d *Distribution) Max() time.Duration { return d.d.max }

// LatencyDistributions are the latency distributions of a stored run's raw records over
// every request that was sent and finished, and over those that lived in
// clean ticks only: what the recorder's summary keeps as percentiles, for
// drawing. Memory stays flat in the number of records.
type LatencyDistributions struct {
	ticks     []tare.Tick
	threshold float64 // polluted-tick threshold, percent
	start     time.Time
	tick      time.Duration

	All, CleanOnly Distribution
}

// NewLatencyDistributions prepares the distributions of a run with the given
// timeline (none: no request counts as clean) and polluted-tick threshold.
func NewLatencyDistributions(ticks []tare.Tick, threshold float64) *LatencyDistributions {
	l := &LatencyDistributions{ticks: ticks, threshold: threshold}
	if len(ticks) > 0 {
		l.start, l.tick = ticks[0].Start, ticks[0].End.Sub(ticks[0].Start)
	}
	return l
}

// Add records one raw record's latency; a dropped or unfinished one has
// none.
func (l *LatencyDistributions) Add(res *tare.Result) {
	if res.Dropped || res.Done.IsZero() || res.Scheduled.IsZero() {
		return
	}
	l.All.Add(res.Latency())
	host := func(k int) *tare.HostSample { return l.ticks[k].Host }
	if cleanSpan(l.Index(res.Scheduled), l.Index(res.Done), len(l.ticks), host, l.threshold) {
		l.CleanOnly.Add(res.Latency())
	}
}

// Index is the tick that contains t, or -1 before the timeline or without
// one.
func (l *LatencyDistributions) Index(t time.Time) int {
	if l.tick <= 0 {
		return -1
	}
	d := t.Sub(l.start)
	if d < 0 {
		return -1
	}
	return int(d / l.tick)
}
