package report

import (
	"math"
	"slices"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// Run is one run as the HTML report draws it: its summary and timeline,
// and, once its raw records have been fed to AddResult, what the timeline
// does not keep: the latency distribution over every request and over the
// requests that lived entirely in clean ticks, and, for a model run (one
// whose summary has model figures), the time to first token and the token
// throughput per tick.
//
// Memory stays flat in the number of records: stats' two latency
// distributions and, for model runs only, one float32 per model call.
type Run struct {
	Summary tare.Summary
	Ticks   []tare.Tick
	// Exposure, when set before the records are added, says what outside
	// interference overlapped a request (stats.Overlaps.Of over Ticks: the
	// rule is the recorder's, not the report's), and the report draws
	// every request coloured by it, in memory bounded by maxDots.
	Exposure func(*tare.Result) (tare.Exposure, bool)

	start time.Time
	tick  time.Duration

	records int
	latency *stats.LatencyDistributions // every sent and finished request, and those of clean ticks only
	ttft    [][]float32                 // per tick: TTFT (ms) of model calls that finished in it
	tokens  []int64                     // per tick: output tokens of calls that finished in it
	dots    *dots                       // the requests of the scatter, when Exposure is set
}

// NewRun prepares a run for the report. A summary without a timeline (a
// summary JSON file) is drawn as far as it goes: the verdict and the
// tables, and its percentiles in the latency distribution.
func NewRun(s tare.Summary, ticks []tare.Tick) *Run {
	r := &Run{Summary: s, Ticks: ticks, latency: stats.NewLatencyDistributions(ticks, s.PollutedThreshold())}
	if len(ticks) > 0 {
		r.start, r.tick = ticks[0].Start, ticks[0].End.Sub(ticks[0].Start)
	}
	return r
}

// AddResult adds one raw record. It never fails; the error return lets it
// be passed to tare.Store.StreamResults and records.Read as it is.
func (r *Run) AddResult(res *tare.Result) error {
	r.records++
	if res.Dropped || res.Done.IsZero() || res.Scheduled.IsZero() {
		return nil
	}
	r.addDot(res)
	r.latency.Add(res)
	last := r.latency.Index(res.Done)

	// Only a model run's first byte is a first token.
	if r.Summary.Model == nil || last < 0 || last >= len(r.Ticks) {
		return nil
	}
	if r.ttft == nil {
		r.ttft, r.tokens = make([][]float32, len(r.Ticks)), make([]int64, len(r.Ticks))
	}
	if !res.FirstByte.IsZero() {
		r.ttft[last] = append(r.ttft[last], float32(millis(res.TTFT())))
	}
	if res.OK() {
		r.tokens[last] += int64(res.OutputTokens)
	}
	return nil
}

// latencies is the distribution of every request's latency from the raw
// records, nil when none had one.
func (r *Run) latencies() *stats.Distribution {
	if r.latency == nil || r.latency.All.Count() == 0 {
		return nil
	}
	return &r.latency.All
}

// Records is the number of raw records added.
func (r *Run) Records() int { return r.records }

// tickSeconds is the length of one tick in seconds, 1 without a timeline.
func (r *Run) tickSeconds() float64 {
	if r.tick <= 0 {
		return 1
	}
	return r.tick.Seconds()
}

// ttftTick returns the q-th percentile (0–100) of TTFT in tick i, NaN when
// no call finished in it.
func (r *Run) ttftTick(i int, q float64) float64 {
	if r.ttft == nil || len(r.ttft[i]) == 0 {
		return math.NaN()
	}
	v := r.ttft[i]
	if !slices.IsSorted(v) {
		slices.Sort(v)
	}
	// Nearest rank, as HDR histograms read a percentile.
	k := int(math.Ceil(q/100*float64(len(v)))) - 1
	return float64(v[max(k, 0)])
}

// distribution returns latency percentiles as points on a "nines" axis:
// x = −log10(1 − q), so 90 % is 1, 99 % is 2 and 99.9 % is 3. It stops
// at the resolution of the sample (one in n), where the maximum is drawn.
func distribution(d *stats.Distribution) []point {
	n := d.Count()
	if n == 0 {
		return nil
	}
	top := min(math.Log10(float64(n)), 5)
	var pts []point
	for i := 0; ; i++ {
		x := float64(i) / 20
		if x >= top {
			break
		}
		q := 100 * (1 - math.Pow(10, -x))
		pts = append(pts, point{x, millis(d.Quantile(q))})
	}
	return append(pts, point{top, millis(d.Max())})
}

// summaryDistribution returns the summary's own percentiles on the nines
// axis, for a run whose raw records are not at hand.
func summaryDistribution(l tare.LatencyMS) []point {
	var pts []point
	for _, p := range []struct {
		q float64
		v *float64
	}{{50, l.P50}, {90, l.P90}, {95, l.P95}, {99, l.P99}} {
		if p.v != nil {
			pts = append(pts, point{-math.Log10(1 - p.q/100), *p.v})
		}
	}
	return pts
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
