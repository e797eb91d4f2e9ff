package stats

import (
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
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
