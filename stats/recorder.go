package stats

import (
	"fmt"
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
)

// DefaultMaxTicks caps the timeline when Config.MaxTicks is 0: about 12
// days of 1 s ticks, 29 hours of 100 ms ticks. The tick's bounds and the
// polluted-tick threshold's default are the root's (tare.DefaultTick,
// tare.MinTick, tare.DefaultPollutedThreshold).
const DefaultMaxTicks = 1 << 20

// Config sets up a Recorder. Its zero value, with Start set, uses the
// defaults.
type Config struct {
	Start     time.Time     // run start: tick 0 begins here (required)
	Tick      time.Duration // tick length; tare.DefaultTick when 0, at least tare.MinTick
	Threshold float64       // polluted-tick threshold in percent; tare.DefaultPollutedThreshold when 0

	// Grace is how long after a tick ends its late results and host samples
	// are still awaited before the tick's percentiles are computed and its
	// histogram discarded. When 0: two ticks, and at least 2 s. To replay
	// a stored run, feed results and samples in time order, or set Grace to
	// cover the whole run (every tick then stays open until the end).
	Grace time.Duration

	// Targets names the requests of a targets file, by Result.TargetIndex:
	// the summary then breaks its figures down per request. None: no
	// breakdown.
	Targets []string

	// MaxTicks caps the timeline, so a bogus instant far in the future cannot
	// allocate a huge one; instants beyond it are put in the last tick and
	// reported. DefaultMaxTicks when 0.
	MaxTicks int
}

// withDefaults returns c with its zero fields set, or a *tare.Error naming
// the field that is wrong.
func (c Config) withDefaults() (Config, error) {
	if c.Start.IsZero() {
		return c, tare.Errorf(tare.EINVALID, "stats: run start is not set: give the instant tick 0 begins")
	}
	if c.Tick == 0 {
		c.Tick = tare.DefaultTick
	}
	if c.Tick < tare.MinTick {
		return c, tare.Errorf(tare.EINVALID, "tick %q is too short: use %s or more", c.Tick, tare.MinTick)
	}
	if c.Threshold == 0 {
		c.Threshold = tare.DefaultPollutedThreshold
	}
	if math.IsNaN(c.Threshold) || c.Threshold < 0 || c.Threshold > 100 {
		return c, tare.Errorf(tare.EINVALID, "polluted-tick threshold %q is not a share: use a percentage between 0 and 100", fmt.Sprint(c.Threshold))
	}
	if c.Grace == 0 {
		c.Grace = max(2*c.Tick, 2*time.Second)
	}
	if c.Grace < 0 {
		return c, tare.Errorf(tare.EINVALID, "grace %q is negative: use 0 for the default or a positive duration", c.Grace)
	}
	if c.MaxTicks == 0 {
		c.MaxTicks = DefaultMaxTicks
	}
	if c.MaxTicks < 0 {
		return c, tare.Errorf(tare.EINVALID, "max ticks %d is negative: use 0 for the default (%d) or a positive count", c.MaxTicks, DefaultMaxTicks)
	}
	return c, nil
}

// Recorder accumulates one run. It is not safe for concurrent use: one
// consumer goroutine feeds it (see the package documentation).
type Recorder struct {
	cfg Config

	total, ok, errs, dropped int
	redirects                int // redirects followed, over all requests
	errorKinds               map[string]int
	statusCodes              map[int]int
	errorMessages            map[string]string  // error kind → the first failure's detail
	failedAfterStatus        map[statusKind]int // requests answered 2xx that then failed

	latency, service, sendLag dist
	wait, ttft, tpot          dist
	clean                     dist // latencies of requests resolved as clean
	queueSeen, modelSeen      bool
	outputTokens              int
	inputTokens               int                     // prompt tokens the servers' usage reported
	inputSource               string                  // where they came from; "" when no request said
	promptCount               promptCount             // the server's counts of the prompts against tare's
	good, goodTokens          int                     // requests that met the per-request SLO, and their output tokens
	goodput                   func(*tare.Result) bool // nil: no goodput
	goodputSLO                string

	depthN             int
	depthSum, depthMax float64

	host hostTotals

	targets []targetTotals          // per request of a targets file, by Result.TargetIndex
	classes map[string]*classTotals // per Result.Class; nil until one is seen
	convs   map[uint64]*convTotals  // per Result.Conversation; nil until one is seen

	// connTick is, for each connection that carried a request lately
	// (Result.Conn), the last tick it was counted in use: a connection
	// carries one request at a time, in order, so each tick counts it
	// once. Connections last counted in a closed tick are forgotten.
	connTick map[uint64]int32

	ticks     []tick
	sample    reservoir // requests that succeeded, with their tick, for the verdict
	exp       exposures // per-request blame
	firstOpen int       // ticks before it are closed: percentiles final, histogram gone
	newest    time.Time // latest Done or host sample End seen: drives closing
	free      []*hdrhistogram.Histogram
	pending   []pendingReq // finished requests whose last tick is still open

	lateResults int   // results whose Done tick was already closed
	lateHost    int   // host samples whose tick was already closed
	outside     int   // instants before Start or beyond MaxTicks, put at the edge
	tickClamped int64 // per-tick values out of range; the run-wide ones already count them
}

// pendingReq is a finished request waiting for the host samples of its
// ticks, to decide whether it lived in clean ticks only.
type pendingReq struct {
	latency     time.Duration
	from, to    time.Duration // Scheduled and Done, from the run's start
	sent, read  time.Duration // Sent and FirstByte, within from..to: to when not known
	first, last int32         // ticks of Scheduled and Done
	ok          bool          // it succeeded: only those have an exposure
}

// pendingOf is res as a pendingReq, its life in ticks first to last.
// Without a Sent (or a FirstByte) the whole life counts as before it.
func (r *Recorder) pendingOf(res *tare.Result, first, last int, ok bool) pendingReq {
	p := pendingReq{latency: res.Latency(), from: res.Scheduled.Sub(r.cfg.Start), first: int32(first), last: int32(max(first, last)), ok: ok}
	p.to = max(res.Done.Sub(r.cfg.Start), p.from)
	at := func(t time.Time, from time.Duration) time.Duration {
		if t.IsZero() {
			return p.to
		}
		return min(max(t.Sub(r.cfg.Start), from), p.to)
	}
	p.sent = at(res.Sent, p.from)
	p.read = at(res.FirstByte, p.sent)
	return p
}

// statusKind is a status and the error kind that followed it.
type statusKind struct {
	status int
	kind   string
}

// NewRecorder returns a Recorder for a run starting at cfg.Start. A bad
// Config is a *tare.Error with code EINVALID.
func NewRecorder(cfg Config) (*Recorder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Recorder{
		cfg:               cfg,
		errorKinds:        make(map[string]int),
		statusCodes:       make(map[int]int),
		errorMessages:     make(map[string]string),
		failedAfterStatus: make(map[statusKind]int),
		targets:           make([]targetTotals, len(cfg.Targets)),
	}, nil
}

// CountGoodput makes the summary count goodput: the requests that
// succeeded and for which good says they met every per-request objective of
// slo. Call it before the first result.
func (r *Recorder) CountGoodput(good func(*tare.Result) bool, slo string) {
	r.goodput, r.goodputSLO = good, slo
}

// Config returns the recorder's configuration with the defaults filled in.
func (r *Recorder) Config() Config { return r.cfg }

// AddResult records one arrival: every one, dropped ones included, as it
// finishes. It does not keep res.
func (r *Recorder) AddResult(res *tare.Result) {
	if res == nil {
		return
	}
	r.total++
	r.addTarget(res)
	r.addClass(res)
	si := r.resultIndex(res.Scheduled)
	r.at(si).arrivals++
	if res.Dropped {
		r.dropped++
		r.ticks[si].dropped++
		return
	}
	r.ticks[si].sent++

	failed := res.Err != ""
	if failed {
		r.errs++
		r.errorKinds[res.Err]++
		if _, seen := r.errorMessages[res.Err]; !seen && res.Detail != "" {
			r.errorMessages[res.Err] = res.Detail
		}
		if res.Status >= 200 && res.Status <= 299 {
			r.failedAfterStatus[statusKind{res.Status, res.Err}]++ // a struct key: no allocation
		}
	} else {
		r.ok++
	}
	if res.Status != 0 {
		r.statusCodes[res.Status]++
	}
	r.redirects += max(res.Redirects, 0)
	sent := !res.Sent.IsZero()
	if sent {
		lag := res.SendLag()
		r.sendLag.add(lag)
		r.ticks[si].sendLagMax = max(r.ticks[si].sendLagMax, lag)
	}
	if !res.Started.IsZero() {
		r.queueSeen = true
		if sent {
			r.wait.add(res.QueueWait())
		}
	}
	if res.OutputTokens > 0 || res.TokenSource != "" {
		r.modelSeen = true
		r.outputTokens += max(res.OutputTokens, 0)
	}
	if res.PromptTokenSource != "" {
		r.modelSeen = true
		r.inputTokens += max(res.PromptTokens, 0)
		r.inputSource = res.PromptTokenSource
		r.promptCount.add(res)
	}

	if res.Done.IsZero() {
		// Never finished (cancelled before an answer): a completion with no
		// latency, in the tick it was scheduled in.
		r.ticks[si].completions++
		if failed {
			r.ticks[si].errors++
		}
		return
	}
	di := max(si, r.resultIndex(res.Done))
	t := r.at(di)
	t.completions++
	if failed {
		t.errors++
	}

	if res.Conn != 0 && sent {
		r.addConn(res.Conn, res.Sent, di)
	}
	if r.goodput != nil && !failed && r.goodput(res) {
		r.good++
		r.goodTokens += max(res.OutputTokens, 0)
	}
	lat := res.Latency()
	r.latency.add(lat)
	if sent {
		r.service.add(res.Service())
	}
	if !res.FirstByte.IsZero() {
		if sent {
			r.ttft.add(res.TTFT())
		}
		if res.OutputTokens > 1 {
			r.tpot.add(res.TPOT())
		}
	}

	r.addInSystem(res.Scheduled, res.Done, si, di)
	from := res.Scheduled.Sub(r.cfg.Start)
	r.sample.add(sampled{from: from, to: max(res.Done.Sub(r.cfg.Start), from), value: perToken(res), tick: int32(di), ok: !failed})
	if di >= r.firstOpen {
		if t.hist == nil {
			t.hist = r.newTickHist()
		}
		recordClamped(t.hist, lat, &r.tickClamped)
	} else {
		r.lateResults++
	}
	r.pending = append(r.pending, r.pendingOf(res, si, di, !failed))
	r.advance(res.Done)
}

// AddHost records one host sample: in the run-wide host figures, and in the
// tick containing its midpoint (see the package documentation). A sample
// whose midpoint is before Start counts in the run-wide figures only.
func (r *Recorder) AddHost(h tare.HostSample) {
	h.Blame = r.addWaits(h.Blame)
	r.host.add(&h, r.cfg.Threshold, r.cfg.Tick)

	if i, outside := r.index(h.Mid()); i >= 0 {
		if outside {
			r.outside++
		}
		if i < r.firstOpen {
			r.lateHost++
		}
		t := r.at(i)
		t.addHost(&h, r.cfg.Tick)
		r.markTick(t)
	}
	r.advance(h.End)
}

// AddDepth records one queue depth sample. Depths that are not finite or are
// negative are ignored.
func (r *Recorder) AddDepth(at time.Time, depth float64) {
	if math.IsNaN(depth) || math.IsInf(depth, 0) || depth < 0 {
		return
	}
	r.depthN++
	r.depthSum += depth
	r.depthMax = max(r.depthMax, depth)
	if i, outside := r.index(at); i >= 0 {
		if outside {
			r.outside++
		}
		t := r.at(i)
		t.depthSum += depth
		t.depthN++
	}
}

// Progress is the cheap state of a run for a live progress line.
type Progress struct {
	Elapsed time.Duration // now − Start
	Total   int           // results recorded, dropped ones included
	OK      int
	Errors  int
	Dropped int
	// P95 is the run-wide latency p95 so far; 0 until a request finished.
	P95 time.Duration
	// Steal is the aggregate steal of the latest host sample; nil before
	// the first one.
	Steal *float64
}

// Snapshot returns the progress of the run at now.
func (r *Recorder) Snapshot(now time.Time) Progress {
	return Progress{
		Elapsed: now.Sub(r.cfg.Start),
		Total:   r.total,
		OK:      r.ok,
		Errors:  r.errs,
		Dropped: r.dropped,
		P95:     r.latency.quantile(95),
		Steal:   r.host.lastSteal(),
	}
}

// Warnings returns the non-fatal findings about the recording itself
// (late results, clamped values), in words for the verdict's warnings.
func (r *Recorder) Warnings() []string {
	var w []string
	if r.lateResults > 0 {
		w = append(w, fmt.Sprintf("%d results arrived more than %s after their tick ended: counted, but left out of that tick's percentiles", r.lateResults, r.cfg.Grace))
	}
	if r.lateHost > 0 {
		w = append(w, fmt.Sprintf("%d host samples arrived more than %s after their tick ended: requests of those ticks were judged without them", r.lateHost, r.cfg.Grace))
	}
	if r.outside > 0 {
		w = append(w, fmt.Sprintf("%d instants fell before the run start or beyond the timeline's %d ticks: put in its first or last tick", r.outside, r.cfg.MaxTicks))
	}
	var clamped int64
	for _, d := range []*dist{&r.latency, &r.service, &r.sendLag, &r.wait, &r.ttft, &r.tpot} {
		clamped += d.clamped
	}
	if clamped > 0 {
		w = append(w, fmt.Sprintf("%d durations were negative or above %s: recorded at the nearest bound (the maximum and mean are exact)", clamped, time.Hour))
	}
	return w
}

// index is the tick containing t: -1 before Start, and MaxTicks − 1 beyond
// the timeline's end, with outside set in both cases.
func (r *Recorder) index(t time.Time) (i int, outside bool) {
	d := t.Sub(r.cfg.Start)
	switch {
	case d < 0:
		return -1, true
	case d/r.cfg.Tick >= time.Duration(r.cfg.MaxTicks):
		return r.cfg.MaxTicks - 1, true
	}
	return int(d / r.cfg.Tick), false
}

// resultIndex is index for a result's instants, which belong on the
// timeline even when a clock said otherwise: before Start is tick 0.
func (r *Recorder) resultIndex(t time.Time) int {
	i, outside := r.index(t)
	if outside {
		r.outside++
	}
	return max(i, 0)
}

// at returns tick i, growing the timeline to hold it. The pointer is valid
// until the next call that may grow the timeline.
func (r *Recorder) at(i int) *tick {
	for len(r.ticks) <= i {
		r.ticks = append(r.ticks, tick{})
	}
	return &r.ticks[i]
}

// newTickHist returns an empty per-tick histogram, reusing a closed one.
func (r *Recorder) newTickHist() *hdrhistogram.Histogram {
	if n := len(r.free); n > 0 {
		h := r.free[n-1]
		r.free = r.free[:n-1]
		return h
	}
	return hdrhistogram.New(histLowest, histHighest, tickDigits)
}

// advance moves the newest instant seen to t if t is later, and closes the
// ticks that ended more than Grace before it:
//
//	tick:   … | k−2 | k−1 |  k  | k+1 |
//	                      ▲           ▲
//	           newest − Grace       newest
//	closed: everything before the tick containing newest − Grace
func (r *Recorder) advance(t time.Time) {
	if !t.After(r.newest) {
		return
	}
	r.newest = t
	limit, _ := r.index(t.Add(-r.cfg.Grace))
	if limit <= r.firstOpen {
		return
	}
	for k := r.firstOpen; k < min(limit, len(r.ticks)); k++ {
		r.closeTick(k)
	}
	r.firstOpen = limit
	r.resolvePending()
	for c, last := range r.connTick {
		if int(last) < r.firstOpen-1 {
			delete(r.connTick, c)
		}
	}
}

// addConn counts connection c in use in the ticks from its request's send
// to tick last, those it was not counted in already.
func (r *Recorder) addConn(c uint64, sent time.Time, last int) {
	if r.connTick == nil {
		r.connTick = make(map[uint64]int32)
	}
	first, _ := r.index(sent)
	first = max(first, 0)
	if prev, ok := r.connTick[c]; ok {
		first = max(first, int(prev)+1)
	}
	for k := first; k <= last; k++ {
		r.at(k).conns++
	}
	if prev, ok := r.connTick[c]; !ok || last > int(prev) {
		r.connTick[c] = int32(last)
	}
}

// ConnsPerTick is, per tick of the timeline, how many connections
// carried a request at some moment of it, from the request's send to its
// end, as the results named them (Result.Conn).
func (r *Recorder) ConnsPerTick() []int {
	out := make([]int, len(r.ticks))
	for k := range r.ticks {
		out[k] = r.ticks[k].conns
	}
	return out
}

// closeTick computes tick k's percentiles and returns its histogram.
func (r *Recorder) closeTick(k int) {
	t := &r.ticks[k]
	if t.hist == nil {
		return
	}
	t.p50, t.p95, t.p99 = tickPercentiles(t.hist)
	t.hist.Reset()
	r.free = append(r.free, t.hist)
	t.hist = nil
}

// addInSystem adds a request's time in the system, from to to, to the
// ticks first to last that it spans: the parts of its first and last
// ticks as they are, and the whole ticks between as one count at either
// end (summed in TicksBetween), so a long request costs no more than a
// short one.
func (r *Recorder) addInSystem(from, to time.Time, first, last int) {
	start := func(k int) time.Time { return r.cfg.Start.Add(time.Duration(k) * r.cfg.Tick) }
	from, to = maxTime(from, start(first)), minTime(to, start(last+1))
	if first == last {
		r.ticks[first].present += max(to.Sub(from), 0)
		return
	}
	r.ticks[first].present += max(start(first+1).Sub(from), 0)
	r.ticks[last].present += max(to.Sub(start(last)), 0)
	r.ticks[first+1].whole++
	r.ticks[last].whole--
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// resolvePending settles the pending requests whose last tick is closed:
// clean ones go into the clean distribution, the rest are forgotten. The
// buffer is compacted in place, so it does not allocate once warm.
func (r *Recorder) resolvePending() {
	keep := r.pending[:0]
	for _, p := range r.pending {
		if int(p.last) >= r.firstOpen {
			keep = append(keep, p)
			continue
		}
		if r.cleanSpan(int(p.first), int(p.last)) {
			r.clean.add(p.latency)
		}
		if !p.ok {
			continue
		}
		if e, known := r.exposureOf(p); known {
			r.exp.settle(e)
		}
	}
	r.pending = keep
	r.freeWaits()
}

// cleanSpan reports whether ticks first..last all have a host sample and
// none is polluted.
func (r *Recorder) cleanSpan(first, last int) bool {
	return cleanSpan(first, last, len(r.ticks), func(k int) *tare.HostSample { return r.ticks[k].host }, r.cfg.Threshold)
}

// cleanSpan reports whether ticks first..last are all inside a timeline of
// n ticks, sampled (host gives each one's sample) and not polluted at
// threshold: a tick without a sample cannot vouch for a request. The one
// rule of a request that lived in clean ticks only, for the recorder and
// for a stored run's records (LatencyDistributions).
func cleanSpan(first, last, n int, host func(k int) *tare.HostSample, threshold float64) bool {
	if first < 0 || last >= n {
		return false
	}
	for k := first; k <= last; k++ {
		if h := host(k); h == nil || h.Polluted(threshold) {
			return false
		}
	}
	return true
}
