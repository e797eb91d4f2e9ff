package stats

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
)

// tick is the recorder's state of one tick of the timeline. Everything but
// hist is a few words, so a long run keeps all its ticks; hist is set only
// while the tick is open and had completions.
type tick struct {
	arrivals    int // scheduled in the tick, dropped ones included
	sent        int // scheduled in the tick and not dropped: the in-flight increments
	completions int // finished in the tick: the in-flight decrements
	errors      int
	dropped     int
	sendLagMax  time.Duration // the latest send of an arrival scheduled in the tick
	conns       int           // connections that carried a request in the tick

	hist          *hdrhistogram.Histogram // latencies finished in the tick, µs, while open
	p50, p95, p99 time.Duration           // set when the tick closes

	present time.Duration // time requests spent in the system within the tick, of those that began or ended in it
	whole   int           // requests that began before the tick, minus those that ended in it, of those in the system through it: summed from tick 0, how many spanned it whole

	depthSum float64
	depthN   int

	host       *tare.HostSample // merged samples whose midpoint is in the tick
	hostWeight time.Duration    // total length of the merged samples

	outside []outsideWait // the outside waits that started in the tick, by start, until no request can overlap them
	stolen  time.Duration // the most the hypervisor took from one CPU, when a stolen tick (tare.StolenShare); else 0
	crowd   float64       // the CPU other processes used, % of one CPU, when a crowded tick (tare.CrowdedShare); else 0
	crowdBy int32         // the busiest of them, into the recorder's owners; meaningful when crowd > 0
}

// tickPercentiles reads a tick's percentiles from its histogram.
func tickPercentiles(h *hdrhistogram.Histogram) (p50, p95, p99 time.Duration) {
	at := func(q float64) time.Duration {
		return time.Duration(h.ValueAtPercentile(q)) * time.Microsecond
	}
	return at(50), at(95), at(99)
}

// Closed is the number of ticks, from the first, whose figures are final:
// Grace has passed since they ended.
func (r *Recorder) Closed() int { return r.firstOpen }

// Ticks returns the timeline as known so far, one tare.Tick per tick from
// Start to the last tick anything happened in. Arrivals and in-flight of the
// latest ticks grow as their requests finish; percentiles of ticks still open
// are read from their live histograms. Each call returns fresh values the
// caller may keep.
//
// Unlike TicksBetween, it fills each tick's Sample, for the verdict.
func (r *Recorder) Ticks() []tare.Tick {
	ticks := r.TicksBetween(0, len(r.ticks))
	for k, values := range r.sample.byTick(0, len(ticks)) {
		ticks[k].Sample = values
	}
	return ticks
}

// TicksBetween returns ticks from to to (exclusive) of the timeline, as
// Ticks would, building only those: a caller that streams the closed ticks
// of a long run as they close does not copy the whole timeline each time.
func (r *Recorder) TicksBetween(from, to int) []tare.Tick {
	from, to = max(from, 0), min(to, len(r.ticks))
	if from >= to {
		return nil
	}
	inFlight, whole := 0, 0
	for k := range from {
		inFlight += r.ticks[k].sent - r.ticks[k].completions
		whole += r.ticks[k].whole
	}
	out := make([]tare.Tick, 0, to-from)
	for k := from; k < to; k++ {
		t := &r.ticks[k]
		// Outstanding at the end of tick k: sent in ticks ≤ k and not yet
		// finished in ticks ≤ k. A request is outstanding from Scheduled,
		// not Sent: waiting for a free worker is waiting too.
		inFlight += t.sent - t.completions
		whole += t.whole
		start := r.cfg.Start.Add(time.Duration(k) * r.cfg.Tick)
		o := tare.Tick{
			Start:       start,
			End:         start.Add(r.cfg.Tick),
			Arrivals:    t.arrivals,
			Completions: t.completions,
			Errors:      t.errors,
			Dropped:     t.dropped,
			InFlight:    inFlight,
			P50:         t.p50,
			P95:         t.p95,
			P99:         t.p99,
			InSystem:    (t.present + time.Duration(whole)*r.cfg.Tick).Seconds() / r.cfg.Tick.Seconds(),
			SendLagMax:  t.sendLagMax,
		}
		if t.hist != nil {
			o.P50, o.P95, o.P99 = tickPercentiles(t.hist)
		}
		if t.depthN > 0 {
			o.QueueDepth = tare.Float(t.depthSum / float64(t.depthN))
		}
		if t.host != nil {
			h := copySample(t.host)
			o.Host = &h
		}
		out = append(out, o)
	}
	return out
}
