package stats

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// Per-request blame: each request's exposure is the outside interference
// that overlapped its life, from Scheduled to Done (tare.Tail explains
// what counts). The ticks keep their outside waits, compact, until no
// request waiting to be settled can overlap them; a request is settled
// when its last tick closes, as its clean span is.

// tailSlices are the slowest shares of the sample a tare.Tail describes.
var tailSlices = []float64{1, 5}

// outsideWait is one of a tick's outside waits, in the recorder's terms.
type outsideWait struct {
	from, to time.Duration // from the run's start
	waited   time.Duration
	owner    int32 // into Recorder.owners
	tare     bool  // tare's threads waited, not the system under test's
}

// tareReadSlack is how soon after a wait of tare's threads ended tare
// reads a response that arrived during it. The loop that reads is woken
// by the response, so a wait that held a read up ends just before it:
// beside two nice-19 jobs (2026-12-07, 4 runs of 1,601 requests), 2,354
// of the 2,468 tare waits that ended between a request's send and its
// first byte (95 %; 71 to 99 % a run) ended within 100 µs of that byte;
// the rest, spread up to milliseconds, ended long before a response that
// came later.
const tareReadSlack = 200 * time.Microsecond

// exposed is one settled request of the tail's sample.
type exposed struct {
	latency time.Duration
	wait    time.Duration // outside wait it overlapped, steal included, at most latency
	waits   time.Duration // of which the probe's waits: the part measured for this request
	top     int32         // the owner it waited behind most; -1 when none
	topWait time.Duration
	stolen  time.Duration // the most the hypervisor took from one CPU in a stolen tick of its life (tare.StolenShare); 0 when none
	crowdBy int32         // the busiest other process of its most crowded tick (tare.CrowdedShare); -1 when none
}

// overlapped reports whether the request's measured outside wait counts
// (tare.OverlapShare). Steal does not: no event says which requests the
// hypervisor's steal hit, so it is spread over a tick's requests alike,
// and would mark every request of a stolen tick overlapped.
func (e exposed) overlapped() bool {
	return e.waits > 0 && float64(e.waits) >= tare.OverlapShare*float64(e.latency)
}

// exposures is the recorder's state of per-request blame.
type exposures struct {
	owners  []tare.TailOwner // outside owners seen, interned; their Requests and WaitMS unused
	byKey   map[tare.BehindKey]int32
	longest time.Duration // the longest outside wait seen: how far back a request's overlap looks
	freed   int           // ticks before it have dropped their waits

	requests, overlapped, stolen, crowded int
	measured                              dist // latencies of the requests settled
	quiet, exposed                        dist // latencies of requests that overlapped no outside wait, and of those that did
	unwaited                              dist // latency less the outside wait overlapped
	unstolen, uncrowded                   dist // latencies of requests that lived in no stolen tick, and in no crowded one
	sample                                reservoirOf[exposed]
}

// owner returns the index of w's holder, interning it.
func (e *exposures) owner(key tare.BehindKey, pid int) int32 {
	if e.byKey == nil {
		e.byKey = make(map[tare.BehindKey]int32)
	}
	i, ok := e.byKey[key]
	if !ok {
		i = int32(len(e.owners))
		e.byKey[key] = i
		e.owners = append(e.owners, tare.TailOwner{Owner: key.Owner, Name: key.Name, Root: key.Root})
	}
	if pid > 0 {
		e.owners[i].PIDs = tare.AddPID(e.owners[i].PIDs, pid)
	}
	return i
}

// addWaits keeps the outside waits of a host sample in the ticks they
// started in, and returns the sample's blame with only those: the rest
// (waits behind the system under test, tare, or nobody) overlap no
// request's interference, and a stored tick need not carry them.
func (r *Recorder) addWaits(b *tare.Blame) *tare.Blame {
	if b == nil || len(b.Waits) == 0 {
		return b
	}
	c := *b
	c.Waits = nil
	for _, w := range b.Waits {
		if !w.Outside() || !w.End.After(w.Start) {
			continue
		}
		c.Waits = append(c.Waits, w)
		k, outside := r.index(w.Start)
		if k < 0 || outside || k < r.exp.freed {
			continue
		}
		ow := outsideWait{
			from:   w.Start.Sub(r.cfg.Start),
			to:     w.End.Sub(r.cfg.Start),
			waited: w.Waited,
			owner:  r.exp.owner(tare.BehindKey{Owner: w.Owner, Name: w.Name, Root: w.Root}, w.PID),
			tare:   w.Group == tare.OwnerTare,
		}
		t := r.at(k)
		t.outside = append(t.outside, ow)
		if n := len(t.outside); n > 1 && t.outside[n-2].from > ow.from {
			slices.SortFunc(t.outside, func(a, b outsideWait) int { return cmp.Compare(a.from, b.from) })
		}
		r.exp.longest = max(r.exp.longest, ow.to-ow.from)
	}
	return &c
}

// measured reports whether the probe measured tick k: its waits, if
// any, are all there.
func (t *tick) measured() bool {
	return t.host != nil && t.host.Blame != nil && t.host.Blame.Source == tare.BlameMeasured
}

// exposureOf is what outside interference overlapped request p: each
// wait counted for at most the wall time it overlapped (k threads
// waiting at once hold one request up by that time, not k times it), the
// tick's steal for its share of the time overlapped, the whole at most
// the request's latency. known is false when a tick of its life was not
// measured by the probe.
func (r *Recorder) exposureOf(p pendingReq) (e exposed, known bool) {
	e = exposed{latency: p.latency, top: -1, crowdBy: -1}
	if int(p.last) >= len(r.ticks) || int(p.first) < r.exp.freed {
		// Past the timeline, or late: its ticks' waits were let go
		// (freeWaits), so what it overlapped is not known, not nil.
		return e, false
	}
	for k := p.first; k <= p.last; k++ {
		if !r.ticks[k].measured() {
			return e, false
		}
	}
	var by [4]struct {
		owner int32
		wait  time.Duration
	}
	n := 0
	add := func(owner int32, d time.Duration) {
		e.wait += d
		for i := range n {
			if by[i].owner == owner {
				by[i].wait += d
				return
			}
		}
		if n < len(by) {
			by[n].owner, by[n].wait = owner, d
			n++
		}
	}
	back := int32(r.exp.longest/r.cfg.Tick) + 1
	// No wait is longer than the longest seen, so none that started
	// before p.from-longest reaches p.from: each tick's waits (sorted by
	// start) are searched from there rather than walked from the first,
	// which at 20,000 requests a second beside a busy neighbour was
	// requests × waits.
	since := p.from - r.exp.longest
	crowd := 0.0 // the most crowded tick's, e.crowdBy's
	for k := max(p.first-back, 0); k <= p.last; k++ {
		t := &r.ticks[k]
		i, _ := slices.BinarySearchFunc(t.outside, since, func(w outsideWait, at time.Duration) int { return cmp.Compare(w.from, at) })
		for _, w := range t.outside[i:] {
			if w.from >= p.to {
				break
			}
			ov := min(w.to, p.to) - max(w.from, p.from)
			if w.tare {
				ov = p.heldUpBy(w)
			}
			if ov <= 0 {
				continue
			}
			part := min(time.Duration(float64(w.waited)*float64(ov)/float64(w.to-w.from)), ov)
			e.waits += part
			add(w.owner, part)
		}
		if k < p.first {
			continue
		}
		e.stolen = max(e.stolen, t.stolen)
		if t.crowd > crowd {
			crowd, e.crowdBy = t.crowd, t.crowdBy
		}
		if t.host.CPU.Steal <= 0 {
			continue
		}
		start := time.Duration(k) * r.cfg.Tick
		ov := min(start+r.cfg.Tick, p.to) - max(start, p.from)
		if ov > 0 {
			add(r.exp.owner(tare.BehindKey{Owner: tare.OwnerSteal}, 0), time.Duration(float64(ov)*t.host.CPU.Steal/100))
		}
	}
	e.wait, e.waits = min(e.wait, e.latency), min(e.waits, e.latency)
	for i := range n {
		if by[i].wait > e.topWait {
			e.top, e.topWait = by[i].owner, by[i].wait
		}
	}
	return e, true
}

// heldUpBy is how long a wait of tare's threads, w, held p up: the part
// of it before p was sent (a send due while tare waited goes when it
// runs again), and the part after, only when p's response was read as
// the wait ended (tareReadSlack). tare's threads waiting while the
// service worked on p delayed nothing of p's, unless the answer came
// meanwhile: counted in full, such waits made the p99 less each
// request's overlap lower than the same service's quiet p99.
func (p pendingReq) heldUpBy(w outsideWait) time.Duration {
	send := min(w.to, p.sent) - max(w.from, p.from)
	readIn := func(at time.Duration) bool { return at >= w.from && at <= w.to+tareReadSlack }
	if !readIn(p.read) && !readIn(p.to) {
		return max(send, 0)
	}
	return max(send, 0) + max(min(w.to, p.to)-max(w.from, p.sent), 0)
}

// markTick works out once, when a host sample joins tick t, what each
// request living in it inherits: steal and a crowd are facts of the
// tick, not of the request.
func (r *Recorder) markTick(t *tick) {
	t.stolen = stolenIn(t.host)
	t.crowd, t.crowdBy = 0, -1
	if c, by := crowdIn(t.host); c > 0 {
		t.crowd, t.crowdBy = c, r.exp.owner(by, by.Root)
	}
}

// stolenIn is the most the hypervisor took from one CPU in h, when it
// was at least tare.StolenShare of it; 0 otherwise.
func stolenIn(h *tare.HostSample) time.Duration {
	most := 0.0
	for _, c := range h.PerCPU {
		most = max(most, c.Steal)
	}
	if most < 100*tare.StolenShare {
		return 0
	}
	return time.Duration(most / 100 * float64(h.End.Sub(h.Start)))
}

// crowdIn is the CPU other processes used in h, in % of one CPU, when it
// was at least tare.CrowdedShare of one, and the busiest of them; 0
// otherwise.
func crowdIn(h *tare.HostSample) (float64, tare.BehindKey) {
	by := h.CPUBy
	if by == nil || len(by.TopOthers) == 0 {
		return 0, tare.BehindKey{}
	}
	c := by.Others * float64(max(len(h.PerCPU), 1))
	if c < 100*tare.CrowdedShare {
		return 0, tare.BehindKey{}
	}
	top := by.TopOthers[0]
	return c, tare.BehindKey{Owner: tare.OwnerOther, Name: top.Name, Root: top.PID}
}

// settle adds a settled request's exposure to the figures.
func (x *exposures) settle(e exposed) {
	x.requests++
	x.measured.add(e.latency)
	if e.overlapped() {
		x.overlapped++
		x.exposed.add(e.latency)
	} else {
		x.quiet.add(e.latency)
	}
	x.unwaited.add(e.latency - e.wait)
	if e.stolen > 0 {
		x.stolen++
	} else {
		x.unstolen.add(e.latency)
	}
	if e.crowdBy >= 0 {
		x.crowded++
	} else {
		x.uncrowded.add(e.latency)
	}
	x.sample.add(e)
}

// freeWaits drops the waits of the ticks no unsettled request can
// overlap any more: those before the first tick of the oldest pending
// request, less the longest wait's reach.
func (r *Recorder) freeWaits() {
	upto := r.firstOpen
	for _, p := range r.pending {
		upto = min(upto, int(p.first))
	}
	upto -= int(r.exp.longest/r.cfg.Tick) + 1
	for k := r.exp.freed; k < min(upto, len(r.ticks)); k++ {
		r.ticks[k].outside = nil
	}
	r.exp.freed = max(r.exp.freed, upto)
}

// tail is the run's per-request blame, with the pending requests the
// samples in so far can settle, without settling them; nil when the probe
// measured no request's life.
func (r *Recorder) tail() *tare.Tail {
	x := r.exp
	x.measured, x.quiet, x.exposed, x.unwaited = r.exp.measured.clone(), r.exp.quiet.clone(), r.exp.exposed.clone(), r.exp.unwaited.clone()
	x.unstolen, x.uncrowded = r.exp.unstolen.clone(), r.exp.uncrowded.clone()
	// A sample of its own: the pending requests replace items in a copy,
	// drawn by a generator of its own, so a summary taken mid-run leaves
	// the run's sample as it would have been without it.
	x.sample.items = slices.Clone(r.exp.sample.items)
	x.sample.rng = rand.New(rand.NewPCG(uint64(x.sample.seen), 0x7a11))
	for _, p := range r.pending {
		if !p.ok {
			continue
		}
		if e, known := r.exposureOf(p); known {
			x.settle(e)
		}
	}
	if x.requests == 0 {
		return nil
	}
	t := &tare.Tail{
		Requests:   x.requests,
		Overlapped: x.overlapped,
		Measured:   new(percentilesMS(&x.measured)),
		Quiet:      percentilesMS(&x.quiet),
		Exposed:    percentilesMS(&x.exposed),
		Unwaited:   percentilesMS(&x.unwaited),
		Stolen:     x.stolen,
		Unstolen:   percentilesMS(&x.unstolen),
		Crowded:    x.crowded,
		Uncrowded:  percentilesMS(&x.uncrowded),
		Sampled:    len(x.sample.items),
	}
	items := slices.SortedFunc(slices.Values(x.sample.items), func(a, b exposed) int { return cmp.Compare(b.latency, a.latency) })
	stolen := func(e exposed) bool { return e.stolen > 0 }
	crowded := func(e exposed) bool { return e.crowdBy >= 0 }
	var all, allStolen, allCrowded int
	for _, e := range items {
		if e.overlapped() {
			all++
		}
		if stolen(e) {
			allStolen++
		}
		if crowded(e) {
			allCrowded++
		}
	}
	for _, pct := range tailSlices {
		n := int(math.Ceil(pct / 100 * float64(len(items))))
		slowest := items[:n]
		sl := r.slice(pct, slowest, len(items), all)
		sl.ShareP = shareP(slowest, items[n:])
		sl.Stolen, sl.StolenP = markedOf(slowest, len(items), allStolen, stolen)
		sl.StealMS = mostStolen(slowest)
		sl.Crowded, sl.CrowdedP = markedOf(slowest, len(items), allCrowded, crowded)
		sl.CrowdedBy = r.crowdedBy(slowest)
		t.Slowest = append(t.Slowest, sl)
	}
	return t
}

// slice describes the slowest requests of a sample of n, all of which
// overlapped outside waits.
func (r *Recorder) slice(pct float64, slowest []exposed, n, all int) tare.TailSlice {
	s := tare.TailSlice{Pct: pct, Requests: len(slowest), Behind: []tare.TailOwner{}}
	var wait time.Duration
	byOwner := map[int32]*tare.TailOwner{}
	for _, e := range slowest {
		if !e.overlapped() {
			continue
		}
		s.Overlapped++
		wait += e.wait
		if e.top < 0 {
			continue
		}
		o := byOwner[e.top]
		if o == nil {
			c := r.exp.owners[e.top]
			c.PIDs = slices.Clone(c.PIDs)
			o = &c
			byOwner[e.top] = o
		}
		o.Requests++
		o.WaitMS += ms(e.topWait)
	}
	if s.Overlapped > 0 {
		s.WaitMS = round(ms(wait)/float64(s.Overlapped), 3)
	}
	for _, o := range byOwner {
		o.WaitMS = *round(o.WaitMS/float64(o.Requests), 3)
		s.Behind = append(s.Behind, *o)
	}
	slices.SortFunc(s.Behind, func(a, b tare.TailOwner) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Root, b.Root))
	})
	s.P = HypergeometricTail(s.Overlapped, n, all, len(slowest))
	return s
}

// shareP is the chance that the slowest requests' measured outside wait,
// as a share of each one's latency, ranks as high against the rest's as
// it does (tare.TailSlice.ShareP); nil when either is empty. A share, not
// the wait itself: a request slow for its own reasons lives longer and
// so overlaps more of any wait, but not a larger share of its life. And
// a share below tare.OverlapShare counts as none, as it does not make a
// request overlapped: where most requests overlapped nothing, a long one
// that overlapped a blip would rank above them all.
func shareP(slowest, rest []exposed) *float64 {
	if len(slowest) == 0 || len(rest) == 0 {
		return nil
	}
	shares := func(es []exposed) []float64 {
		out := make([]float64, len(es))
		for i, e := range es {
			if e.overlapped() {
				out[i] = float64(e.waits) / float64(e.latency)
			}
		}
		return out
	}
	p := rankSumGreaterP(shares(slowest), shares(rest))
	return &p
}

// rankSumDraws is how many random draws rankSumGreaterP compares with:
// its least p is about 1/4000, far below any threshold a tail uses.
const rankSumDraws = 4000

// rankSumGreaterP is the one-sided p of the rank-sum (Mann-Whitney)
// test that x ranks above y, by permutation: how often len(x) values
// drawn at random from both, without replacement, rank as high in sum
// (ties at their mean rank). Not the normal approximation: most shares
// tie at 0 where most requests overlapped nothing, and with three
// slowest, one of which overlapped, beside 5 of 256 that did, it gave
// p 0.0002 where the chance of it is 0.07. Seeded by the sizes, so a
// run's summary is the same every time it is made.
func rankSumGreaterP(x, y []float64) float64 {
	if least := slices.Min(y); !slices.ContainsFunc(x, func(v float64) bool { return v > least }) {
		// No draw ranks lower than x, which holds only the least values:
		// every draw counts, and p is 1 without them.
		return 1
	}
	ranks := midRanks(slices.Concat(x, y))
	own := 0.0
	for _, r := range ranks[:len(x)] {
		own += r
	}
	own -= 1e-9 * own // a draw that ties counts as high
	rng := rand.New(rand.NewPCG(uint64(len(x)), uint64(len(ranks))))
	as := 0
	for range rankSumDraws {
		sum := 0.0
		for i := range len(x) { // a partial Fisher-Yates shuffle
			k := i + rng.IntN(len(ranks)-i)
			ranks[i], ranks[k] = ranks[k], ranks[i]
			sum += ranks[i]
		}
		if sum >= own {
			as++
		}
	}
	return float64(as+1) / float64(rankSumDraws+1)
}

// markedOf is how many of the slowest requests, of a sample of n of which
// marked are so, are marked; and the chance of as many among as many
// drawn at random.
func markedOf(slowest []exposed, n, marked int, is func(exposed) bool) (k int, p float64) {
	for _, e := range slowest {
		if is(e) {
			k++
		}
	}
	return k, HypergeometricTail(k, n, marked, len(slowest))
}

// mostStolen is the most the hypervisor took from one CPU in a stolen
// tick the slowest requests lived in; nil when none did.
func mostStolen(slowest []exposed) *float64 {
	var longest time.Duration
	for _, e := range slowest {
		longest = max(longest, e.stolen)
	}
	if longest == 0 {
		return nil
	}
	return round(ms(longest), 3)
}

// crowdedBy names the busiest other process of the crowded ticks the
// slowest requests lived in, each request counted under its own, the
// most requests first; empty when none did.
func (r *Recorder) crowdedBy(slowest []exposed) []tare.TailOwner {
	out := []tare.TailOwner{}
	for _, e := range slowest {
		if e.crowdBy < 0 {
			continue
		}
		o := r.exp.owners[e.crowdBy]
		if i := slices.IndexFunc(out, func(x tare.TailOwner) bool { return x.Owner == o.Owner && x.Name == o.Name && x.Root == o.Root }); i >= 0 {
			out[i].Requests++
			continue
		}
		o.PIDs, o.Requests = slices.Clone(o.PIDs), 1
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b tare.TailOwner) int { return cmp.Compare(b.Requests, a.Requests) })
	return out
}

// HypergeometricTail is the chance of k or more marked items among n
// drawn without replacement from N items of which K are marked: how
// unusual it is that the slowest n requests of a sample hold k that
// overlapped outside waits, when K of all N did.
func HypergeometricTail(k, N, K, n int) float64 {
	if k <= 0 {
		return 1
	}
	if N <= 0 || n > N || K > N || k > min(n, K) {
		return 0
	}
	logC := func(a, b int) float64 {
		x, _ := math.Lgamma(float64(a + 1))
		y, _ := math.Lgamma(float64(b + 1))
		z, _ := math.Lgamma(float64(a - b + 1))
		return x - y - z
	}
	total := logC(N, n)
	p := 0.0
	for i := k; i <= min(n, K); i++ {
		if n-i > N-K {
			continue
		}
		p += math.Exp(logC(K, i) + logC(N-K, n-i) - total)
	}
	return min(p, 1)
}

// Overlaps answers, for any request of a run read back, what outside
// interference overlapped its life, by the recorder's own rule: what a
// reader of stored records (the report's scatter of every request) colours
// each request by.
type Overlaps struct{ r *Recorder }

// NewOverlaps indexes the outside waits of a run's ticks (their host
// samples, as stored); the ticks are of one length, from the first.
func NewOverlaps(ticks []tare.Tick) (*Overlaps, error) {
	if len(ticks) == 0 {
		return &Overlaps{}, nil
	}
	r, err := NewRecorder(Config{Start: ticks[0].Start, Tick: max(ticks[0].End.Sub(ticks[0].Start), tare.MinTick), Grace: 1<<63 - 1})
	if err != nil {
		return nil, err
	}
	for _, t := range ticks {
		if t.Host != nil {
			r.AddHost(*t.Host)
		}
	}
	return &Overlaps{r: r}, nil
}

// Of is what overlapped res; known is false when the probe did not
// measure every tick of its life, or res did not succeed.
func (o *Overlaps) Of(res *tare.Result) (e tare.Exposure, known bool) {
	if o.r == nil || !res.OK() || res.Done.IsZero() {
		return e, false
	}
	r := o.r
	first, _ := r.index(res.Scheduled)
	last, _ := r.index(res.Done)
	if first < 0 {
		return e, false
	}
	x, known := r.exposureOf(r.pendingOf(res, first, last, true))
	if !known {
		return e, false
	}
	e.Wait, e.Overlapped = x.wait, x.overlapped()
	if x.top >= 0 {
		e.Top = r.exp.owners[x.top]
	}
	return e, true
}
