package scenario

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
)

// OwnTail is what the hogs did to a run's p99, measured from the run's
// own requests: those scheduled while the hogs were not running (before
// they started, or in the periods they were stopped) against all of
// them. The same service process in the same minute, where two quiet
// runs of it back to back gave p99s up to 1.8× apart (2026-12-07): as
// much as the effect to judge. The run's first second is left out of
// both: it is cold (its connections open, the service starts a thread
// for each; its p99 1.06-1.53 ms where the next seconds' were 0.5-0.8).
type OwnTail struct {
	P99, Without float64 // ms
	// Requests and WithoutRequests are the requests each p99 is of.
	Requests, WithoutRequests int
	// Lo and Hi bound P99/Without: the 2.5th and 97.5th percentiles of the
	// ratio over runs drawn again from the run's own 100 ms blocks, those
	// with the hogs and those without apart (requests close in time are
	// delayed together, so blocks of them, not single requests, are what
	// is drawn).
	Lo, Hi float64
}

// Ratio is P99/Without.
func (t OwnTail) Ratio() float64 { return t.P99 / t.Without }

const (
	// ownBlock is the span of scheduled time drawn whole by the bootstrap.
	ownBlock = 100 * time.Millisecond
	// ownDraws is how many runs the bootstrap draws.
	ownDraws = 1000
	// ownLeast is the fewest requests without the hogs that make a p99.
	ownLeast = 100
)

// ownTail measures the run of results: its p99 against that of its
// requests scheduled while without says the hogs were not running; nil
// when fewer than ownLeast were.
func ownTail(results []*tare.Result, without func(time.Time) bool) *OwnTail {
	var start time.Time
	for _, r := range results {
		if start.IsZero() || r.Scheduled.Before(start) {
			start = r.Scheduled
		}
	}
	warm := start.Add(time.Second)
	// Each 100 ms block's requests, apart by whether the hogs ran.
	blocks := map[bool]map[int][]float64{true: {}, false: {}}
	for _, r := range results {
		if !r.OK() || r.Scheduled.Before(warm) {
			continue
		}
		b, w := int(r.Scheduled.Sub(warm)/ownBlock), without(r.Scheduled)
		blocks[w][b] = append(blocks[w][b], float64(r.Latency())/1e6)
	}
	inOrder := func(m map[int][]float64) (out [][]float64) {
		for _, b := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[b])
		}
		return out
	}
	with, wo := inOrder(blocks[false]), inOrder(blocks[true])
	p99s := func(with, wo [][]float64) (all, without float64, n, nw int) {
		w := slices.Concat(wo...)
		a := slices.Concat(append(with, w)...)
		return p99(a), p99(w), len(a), len(w)
	}
	all, without99, n, nw := p99s(with, wo)
	if nw < ownLeast {
		return nil
	}
	own := &OwnTail{P99: all, Without: without99, Requests: n, WithoutRequests: nw}
	// Drawn apart, as many of each as the run had: how many seconds ran
	// with the hogs is the scenario's, not chance's.
	rng := rand.New(rand.NewPCG(uint64(n), uint64(nw)))
	draw := func(from [][]float64) [][]float64 {
		out := make([][]float64, len(from))
		for i := range out {
			out[i] = from[rng.IntN(len(from))]
		}
		return out
	}
	ratios := make([]float64, 0, ownDraws)
	for range ownDraws {
		if a, w, _, nw := p99s(draw(with), draw(wo)); nw > 0 && w > 0 {
			ratios = append(ratios, a/w)
		}
	}
	slices.Sort(ratios)
	own.Lo, own.Hi = ratios[len(ratios)*25/1000], ratios[len(ratios)*975/1000]
	return own
}

// movedP99 is how many times the run's p99 is its p99 without the
// outside waits, as tare's tail signal weighs it (judge.MovedBy); 0 where
// the probe did not measure it.
func movedP99(s *tare.Summary) float64 {
	if s.Tail == nil {
		return 0
	}
	for _, sl := range s.Tail.Slowest {
		if sl.Quantile() == "p99" {
			return judge.MovedBy(s, s.Tail, sl)
		}
	}
	return 0
}

// p99 is the 99th percentile of ms, as the nearest rank below; NaN for
// none. ms is sorted in place.
func p99(ms []float64) float64 {
	if len(ms) == 0 {
		return math.NaN()
	}
	slices.Sort(ms)
	return ms[int(0.99*float64(len(ms)-1))]
}

// hogSpans records when the hogs ran: from when they started, less the
// periods they were stopped in.
type hogSpans struct {
	mu      sync.Mutex
	started time.Time
	stopped [][2]time.Time // from, to; to is zero while still stopped
}

// hogSettle is how far from a switch of the hogs a request must be
// scheduled to count as without them: the run queue they leave drains,
// and a request scheduled just before they continue ends before them.
const hogSettle = 50 * time.Millisecond

// without says whether the hogs were not running at t, hogSettle clear of
// their switching: before they started, or well inside a period they
// were stopped in.
func (h *hogSpans) without(t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started.IsZero() || t.Before(h.started.Add(-hogSettle)) {
		return true
	}
	for _, p := range h.stopped {
		if t.After(p[0].Add(hogSettle)) && (p[1].IsZero() || t.Before(p[1].Add(-hogSettle))) {
			return true
		}
	}
	return false
}

// start records that the hogs started at t.
func (h *hogSpans) start(t time.Time) {
	h.mu.Lock()
	h.started = t
	h.mu.Unlock()
}

// stop records that the hogs were stopped at t, or continued where
// stopped is false.
func (h *hogSpans) stop(t time.Time, stopped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stopped {
		h.stopped = append(h.stopped, [2]time.Time{t})
	} else if n := len(h.stopped); n > 0 && h.stopped[n-1][1].IsZero() {
		h.stopped[n-1][1] = t
	}
}

// startedAt is when the hogs started; zero until then.
func (h *hogSpans) startedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started
}
