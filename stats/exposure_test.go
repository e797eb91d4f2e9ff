package stats

import (
	"math"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// measuredSample is a host sample over [from, to) seconds the probe
// measured, with waits.
func measuredSample(from, to float64, waits ...tare.Wait) tare.HostSample {
	h := sample(from, to, 0)
	h.Blame = &tare.Blame{Source: tare.BlameMeasured, Behind: []tare.Behind{}, Waits: waits}
	return h
}

// hogWait is a wait of the system under test's threads behind the hog
// (pid 42) from from to to seconds, waited ms in all.
func hogWait(from, to, waited float64) tare.Wait {
	return tare.Wait{Start: sec(from), End: sec(to), Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "hog", PID: 42, Root: 42, Waited: msd(waited)}
}

func TestTailNamesWhoHeldTheSlowestUp(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	// 200 fast requests over 3 s, none while the hog held the CPU, and
	// 4 slow ones that lived inside the hog's wait in tick 1.
	for i := range 200 {
		at := 0.01 + float64(i)*0.013
		if at > 1.18 {
			at += 0.15
		}
		r.AddResult(result(at, 0, 1))
	}
	for i := range 4 {
		r.AddResult(span(1.2+float64(i)*0.01, 1.24+float64(i)*0.01))
	}
	r.AddHost(measuredSample(0, 1))
	r.AddHost(measuredSample(1, 2,
		hogWait(1.2, 1.3, 100),
		tare.Wait{Start: sec(1.5), End: sec(1.6), Group: tare.OwnerSUT, Owner: tare.OwnerSUT, Waited: msd(50)}, // the service's own: no one's blame
		// Kernel threads are not neighbours: mostly the kernel working
		// for the test (its loopback's and veth's softirqs).
		tare.Wait{Start: sec(1.7), End: sec(1.8), Group: tare.OwnerSUT, Owner: tare.OwnerKernel, Name: "ksoftirqd/0", Waited: msd(50)},
	))
	r.AddHost(measuredSample(2, 3))
	s := r.Summary(sec(3), 3*1e9)
	tl := s.Tail
	if tl == nil {
		t.Fatal("Tail = nil, want the requests' exposure")
	}
	if tl.Requests != 204 || tl.Overlapped != 4 {
		t.Errorf("requests %d, overlapped %d; want 204 and 4", tl.Requests, tl.Overlapped)
	}
	if len(tl.Slowest) != 2 {
		t.Fatalf("slices = %+v, want the slowest 1 %% and 5 %%", tl.Slowest)
	}
	one := tl.Slowest[0]
	if one.Requests != 3 || one.Overlapped != 3 || len(one.Behind) != 1 || one.Behind[0].Name != "hog" || one.Behind[0].Requests != 3 {
		t.Errorf("slowest 1 %% = %+v, want 3 requests, all behind the hog", one)
	}
	if one.P >= 0.001 {
		t.Errorf("p = %g, want the 3 slowest all overlapping (4 of 204) to be far from chance", one.P)
	}
	near(t, "mean wait of the slowest", one.WaitMS, 40, 0.01)
	near(t, "quiet p99", tl.Quiet.P99, 1, 0.01)
	near(t, "exposed p50", tl.Exposed.P50, 40, 0.01)
	near(t, "unwaited max", tl.Unwaited.Max, 1, 0.01)
	if c := s.CleanLatency; c == nil || c.By != tare.CleanByRequests || c.Requests != 200 {
		t.Errorf("clean latency = %+v, want the 200 requests no outside wait overlapped", c)
	}
	if ws := r.Ticks()[1].Host.Blame.Waits; len(ws) != 1 || ws[0].Name != "hog" {
		t.Errorf("tick 1 keeps waits %+v, want the hog's alone (the outside ones)", ws)
	}
}

// A neighbour whose waits overlap fast and slow requests alike held up
// no tail: the slowest are not more exposed than chance makes them.
func TestTailOfWaitsThatSlowedNobody(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	var waits []tare.Wait
	for i := range 100 {
		at := float64(i) * 0.03
		// Every other request overlaps a short wait, slow or fast.
		lat := 1.0
		if i%10 == 0 {
			lat = 5
		}
		r.AddResult(result(at, 0, lat))
		if i%2 == 0 {
			waits = append(waits, hogWait(at, at+0.0001, 0.1))
		}
	}
	r.AddHost(measuredSample(0, 3, waits...))
	tl := r.Summary(sec(3), 3e9).Tail
	if tl == nil || tl.Overlapped == 0 {
		t.Fatalf("tail = %+v, want overlapped requests", tl)
	}
	for _, sl := range tl.Slowest {
		if sl.P < 0.05 {
			t.Errorf("slowest %g %%: p = %g, want no sign the slow ones overlapped more (%d of %d)", sl.Pct, sl.P, sl.Overlapped, sl.Requests)
		}
	}
}

func TestTailNeedsTheProbe(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	r.AddResult(result(0.1, 0, 1))
	r.AddHost(measuredSample(0, 1))
	r.AddResult(result(1.1, 0, 1))
	r.AddHost(sample(1, 2, 0)) // estimated: the probe did not run
	s := r.Summary(sec(2), 2e9)
	if s.Tail == nil || s.Tail.Requests != 1 {
		t.Errorf("tail = %+v, want the one request of the measured tick", s.Tail)
	}
	r2 := newRecorder(t, Config{Start: t0})
	r2.AddResult(result(0.1, 0, 1))
	r2.AddHost(sample(0, 1, 0))
	if s := r2.Summary(sec(1), 1e9); s.Tail != nil || s.CleanLatency == nil || s.CleanLatency.By != tare.CleanByTicks {
		t.Errorf("without the probe: tail %+v, clean %+v; want no tail and clean ticks' latency", s.Tail, s.CleanLatency)
	}
}

// Steal counts for its share of the time a request overlapped, in the
// run without the waits, but makes no request overlapped: no event says
// which requests it hit.
func TestTailCountsSteal(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	r.AddResult(result(0.1, 0, 10))
	h := measuredSample(0, 1)
	h.CPU.Steal = 50
	r.AddHost(h)
	tl := r.Summary(sec(1), 1e9).Tail
	if tl == nil || tl.Overlapped != 0 {
		t.Fatalf("tail = %+v, want the request measured and not overlapped", tl)
	}
	near(t, "its latency without the steal", tl.Unwaited.P50, 5, 0.01)
}

// A burst of steal on one CPU in tick 1 (the run's run 9 on the
// development VM: 87 ms taken from one CPU, the p99 17 ms in that tick
// alone): the slowest requests lived in it, more than chance gives, and
// the requests of the other ticks are the run without it. Tick 0's
// steal, 1 % of one CPU, is not a burst.
func TestTailOfStolenTicks(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	for i := range 300 {
		at := 0.005 + float64(i)*0.01
		latency := 1.0
		if at >= 1 && at < 2 && i%6 == 0 {
			latency = 15
		}
		r.AddResult(result(at, 0, latency))
	}
	for k, steal := range []float64{1, 8.7, 0} {
		h := measuredSample(float64(k), float64(k+1))
		h.CPU.Steal = steal / 2
		h.PerCPU = []tare.CPUShares{{CPU: 0, Steal: steal}, {CPU: 1}}
		r.AddHost(h)
	}
	tl := r.Summary(sec(3), 3e9).Tail
	if tl == nil {
		t.Fatal("Tail = nil, want the requests' exposure")
	}
	if tl.Stolen != 100 {
		t.Errorf("stolen = %d, want the 100 requests of tick 1", tl.Stolen)
	}
	near(t, "p99 of the other ticks' requests", tl.Unstolen.P99, 1, 0.01)
	one := tl.Slowest[0]
	if one.Requests != 3 || one.Stolen != 3 || one.StolenP >= 0.05 {
		t.Errorf("slowest 1 %% = %+v, want 3 requests, all in the stolen tick, p below 0.05", one)
	}
	near(t, "the most taken from one CPU", one.StealMS, 87, 0.01)
	if five := tl.Slowest[1]; five.Stolen != 15 || five.StolenP >= 1e-6 {
		t.Errorf("slowest 5 %% = %+v, want 15 requests, all in the stolen tick, far from chance", five)
	}
}

// A hog starts at 1 s and uses one of two CPUs: the requests of ticks
// 1 and 2 are the slow ones though no wait overlapped them; the slowest
// lived in its ticks more than chance gives, and it is named.
func TestTailOfCrowdedTicks(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	for i := range 300 {
		at := 0.005 + float64(i)*0.01
		latency := 1.0
		if at >= 1 && i%5 == 0 {
			latency = 4
		}
		r.AddResult(result(at, 0, latency))
	}
	for k, others := range []float64{1, 50, 50} {
		h := measuredSample(float64(k), float64(k+1))
		h.PerCPU = []tare.CPUShares{{CPU: 0}, {CPU: 1}}
		h.CPUBy = &tare.CPUBy{Others: others, TopOthers: []tare.ProcessShare{{Name: "image-resize", PID: 901, CPUPct: others}}}
		r.AddHost(h)
	}
	tl := r.Summary(sec(3), 3e9).Tail
	if tl == nil {
		t.Fatal("Tail = nil, want the requests' exposure")
	}
	if tl.Crowded != 200 || tl.Overlapped != 0 {
		t.Errorf("crowded %d, overlapped %d; want the 200 requests of ticks 1 and 2, none overlapped", tl.Crowded, tl.Overlapped)
	}
	near(t, "p99 of the other ticks' requests", tl.Uncrowded.P99, 1, 0.01)
	five := tl.Slowest[1]
	if five.Crowded != 15 || five.CrowdedP >= 0.01 || len(five.CrowdedBy) != 1 || five.CrowdedBy[0].Name != "image-resize" || five.CrowdedBy[0].Requests != 15 {
		t.Errorf("slowest 5 %% = %+v, want 15 requests, all in the hog's ticks, p below 0.01, the hog named", five)
	}
}

func TestHypergeometricTail(t *testing.T) {
	for _, tt := range []struct {
		k, N, K, n int
		want       float64
	}{
		{2, 10, 2, 2, 1.0 / 45},
		{1, 10, 2, 2, 17.0 / 45}, // 1 − C(8,2)/C(10,2)
		{0, 10, 2, 2, 1},
		{3, 10, 2, 3, 0}, // more marked than there are
		{5, 5, 5, 5, 1},
	} {
		if got := HypergeometricTail(tt.k, tt.N, tt.K, tt.n); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("HypergeometricTail(%d, %d, %d, %d) = %g, want %g", tt.k, tt.N, tt.K, tt.n, got, tt.want)
		}
	}
}

// Two host samples in one tick keep the waits of both.
func TestTickKeepsTheWaitsOfMergedSamples(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	r.AddHost(measuredSample(0, 0.5, hogWait(0.1, 0.2, 10)))
	r.AddHost(measuredSample(0.5, 1, hogWait(0.6, 0.7, 10)))
	ws := r.Ticks()[0].Host.Blame.Waits
	if len(ws) != 2 || !ws[0].Start.Before(ws[1].Start) {
		t.Errorf("waits = %+v, want both samples' in order", ws)
	}
}

// A stored run's ticks answer for its records as the recorder did.
func TestOverlapsOfStoredTicks(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	slow := span(1.2, 1.24)
	r.AddResult(slow)
	r.AddHost(measuredSample(0, 1))
	r.AddHost(measuredSample(1, 2, hogWait(1.2, 1.3, 100)))
	o, err := NewOverlaps(r.Ticks())
	if err != nil {
		t.Fatal(err)
	}
	e, known := o.Of(slow)
	if !known || !e.Overlapped || e.Top.Name != "hog" || e.Wait != msd(40) {
		t.Errorf("Of(slow) = %+v, %v; want 40 ms behind the hog", e, known)
	}
	if _, known := o.Of(span(2.5, 2.6)); known {
		t.Error("a request of an unsampled tick is known")
	}
	if e, known := o.Of(span(0.1, 0.2)); !known || e.Overlapped || e.Wait != 0 {
		t.Errorf("a quiet request: %+v, %v", e, known)
	}
}

// The tail's percentiles are of the requests it measured: those of a
// tick the probe did not measure whole are in the run's own, not in the
// figures (Unwaited) the tail compares with.
func TestTailMeasuredLeavesOutUnmeasuredTicks(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	for i := range 20 {
		r.AddResult(result(0.1+float64(i)*0.04, 0, 50)) // tick 0: slow, not measured
	}
	for i := range 200 {
		r.AddResult(result(1.01+float64(i)*0.009, 0, 1))
	}
	r.AddHost(sample(0, 1, 0))
	r.AddHost(measuredSample(1, 2))
	r.AddHost(measuredSample(2, 3))
	s := r.Summary(sec(3), 3*1e9)
	if s.Tail == nil || s.Tail.Requests != 200 || s.Tail.Measured == nil {
		t.Fatalf("tail = %+v, want the 200 requests of the measured ticks", s.Tail)
	}
	near(t, "measured p99", s.Tail.Measured.P99, 1, 0.01)
	near(t, "run's p99", s.Latency.P99, 50, 0.01)
}

// A wait of tare's threads holds a request up only where tare had
// something to do for it: its send, due while tare waited, or its answer,
// read as the wait ended. While the service works on the request, tare
// waiting delays nothing of it; the service's own threads waiting does.
func TestTareWaitsHoldUpSendAndRead(t *testing.T) {
	// Scheduled at 1.000 s, sent at 1.005, first byte at 1.030, done at
	// 1.031: 31 ms.
	req := &tare.Result{Scheduled: sec(1), Sent: sec(1.005), FirstByte: sec(1.030), Done: sec(1.031), Status: 200}
	wait := func(group string, from, to float64) tare.Wait {
		w := hogWait(from, to, (to-from)*1000)
		w.Group = group
		return w
	}
	for _, c := range []struct {
		name string
		res  *tare.Result
		wait tare.Wait
		want time.Duration
	}{
		{"tare waiting while the service worked", req, wait(tare.OwnerTare, 1.010, 1.020), 0},
		{"the service waiting while it worked", req, wait(tare.OwnerSUT, 1.010, 1.020), msd(10)},
		{"tare waiting when the send was due", req, wait(tare.OwnerTare, 0.998, 1.004), msd(4)},
		{"tare waiting as the answer came", req, wait(tare.OwnerTare, 1.020, 1.0299), msd(9.9)},
		{"tare waiting over the send and the answer", req, wait(tare.OwnerTare, 0.990, 1.040), msd(31)},
		{"tare waiting, the send not known", &tare.Result{Scheduled: sec(1), Done: sec(1.031), Status: 200}, wait(tare.OwnerTare, 1.010, 1.020), msd(10)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorder(t, Config{Start: t0})
			r.AddResult(c.res)
			r.AddHost(measuredSample(0, 1))
			r.AddHost(measuredSample(1, 2, c.wait))
			o, err := NewOverlaps(r.Ticks())
			if err != nil {
				t.Fatal(err)
			}
			e, known := o.Of(c.res)
			if !known || (e.Wait-c.want).Abs() > 10*time.Microsecond {
				t.Errorf("Of = %v (known %v), want %v of outside wait", e.Wait, known, c.want)
			}
		})
	}
}

// A result that comes after its ticks' waits were let go (later than
// Grace) did not escape them: its exposure is unknown, not nil.
func TestTailLateResultIsUnknown(t *testing.T) {
	r := newRecorder(t, Config{Start: t0})
	for i := range 10 {
		var waits []tare.Wait
		if i == 1 {
			waits = append(waits, hogWait(1.2, 1.3, 100))
		}
		r.AddHost(measuredSample(float64(i), float64(i+1), waits...))
	}
	r.AddResult(span(1.2, 1.25)) // inside the hog's wait, 8 ticks late
	if tl := r.Summary(sec(10), 10e9).Tail; tl != nil {
		t.Errorf("tail = %+v, want none: the one request came after its ticks' waits were gone", tl)
	}
}

// BenchmarkExposure is per-request blame at 20,000 requests a second
// beside a busy neighbour: 4,000 outside waits a tick, each request
// settled against them. Per op: one request.
func BenchmarkExposure(b *testing.B) {
	const perTick, waitsPerTick = 20_000, 4_000
	ticks := max(b.N/perTick, 1) + 1
	r := newRecorder(b, Config{Start: t0})
	b.ResetTimer()
	for k := range ticks {
		var waits []tare.Wait
		for i := range waitsPerTick {
			at := float64(k) + float64(i)/waitsPerTick
			waits = append(waits, hogWait(at, at+0.0002, 0.2))
		}
		for i := range min(perTick, b.N-k*perTick) {
			at := float64(k) + float64(i)/perTick
			r.AddResult(result(at, 0, 1))
		}
		r.AddHost(measuredSample(float64(k), float64(k+1), waits...))
	}
	if s := r.Summary(sec(float64(ticks)), time.Duration(ticks)*time.Second); s.Tail == nil {
		b.Fatal("no tail")
	}
}

// TestShareP: the slowest requests' outside wait as a share of their
// latency, ranked against the rest's. A neighbour that every request
// overlapped a little, and the slowest a lot, shows; a spike of the
// code's own, which overlaps as much wait in absolute terms only because
// it lives longer, does not.
func TestShareP(t *testing.T) {
	rest := make([]exposed, 200)
	for i := range rest {
		rest[i] = exposed{latency: time.Millisecond, waits: time.Duration(i%10) * 10 * time.Microsecond}
	}
	quiet := make([]exposed, 200) // none overlapped anything
	for i := range quiet {
		quiet[i] = exposed{latency: time.Millisecond}
	}
	slowest := func(latency, waits time.Duration) []exposed {
		out := make([]exposed, 10)
		for i := range out {
			out[i] = exposed{latency: latency + time.Duration(i)*time.Microsecond, waits: waits}
		}
		return out
	}
	for _, tt := range []struct {
		name          string
		slowest, rest []exposed
		small         bool
	}{
		{"waited most of their lives", slowest(3*time.Millisecond, 2*time.Millisecond), rest, true},
		{"the code's own spikes", slowest(30*time.Millisecond, 90*time.Microsecond), rest, false},
		// Most requests overlapped nothing; the long ones overlapped a
		// blip each, a sliver of their lives.
		{"spikes beside requests that overlapped nothing", slowest(30*time.Millisecond, 20*time.Microsecond), quiet, false},
		{"waited most of their lives beside requests that overlapped nothing", slowest(3*time.Millisecond, 2*time.Millisecond), quiet, true},
		// The gate's recycled pool, once: one of its three slowest
		// overlapped 8 ms behind the sandbox's init, 5 of the other 256
		// overlapped some wait. Three drawn at random hold one of 6 in
		// 7 % of draws.
		{"one of three, beside 5 of 256", func() []exposed {
			out := slowest(13*time.Millisecond, 0)[:3]
			out[0].waits = 8 * time.Millisecond
			return out
		}(), func() []exposed {
			out := make([]exposed, 256)
			for i := range out {
				out[i] = exposed{latency: time.Millisecond}
			}
			for i := range 5 {
				out[i].waits = 100 * time.Microsecond
			}
			return out
		}(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := shareP(tt.slowest, tt.rest)
			if p == nil {
				t.Fatal("shareP = nil")
			}
			if small := *p < 0.01; small != tt.small {
				t.Errorf("shareP = %g, want below 0.01: %v", *p, tt.small)
			}
		})
	}
	if p := shareP(nil, rest); p != nil {
		t.Errorf("shareP of no slowest = %g, want nil", *p)
	}
	// Slowest that overlapped nothing rank below or tied with every other:
	// every draw ranks as high, so p is 1, whether the rest overlapped
	// nothing or some did.
	for _, others := range [][]exposed{quiet, rest} {
		if p := shareP(slowest(30*time.Millisecond, 0), others); p == nil || *p != 1 {
			t.Errorf("shareP of slowest that overlapped nothing = %v, want 1", p)
		}
	}
}

// TestRankSumGreaterPAtTheLeast: x holding only the least values, below
// y's or tied with them, is p 1 exactly; one value above y's least is not.
func TestRankSumGreaterPAtTheLeast(t *testing.T) {
	for _, tt := range []struct {
		x, y []float64
		one  bool
	}{
		{[]float64{0, 0}, []float64{0, 0, 1, 2}, true},
		{[]float64{0, 0}, []float64{1, 2, 3}, true},
		{[]float64{0}, []float64{0}, true},
		{[]float64{0, 0.5}, []float64{0, 0, 1, 2}, false},
		{[]float64{3, 3}, []float64{0, 0, 1, 2}, false},
	} {
		if p := rankSumGreaterP(tt.x, tt.y); (p == 1) != tt.one {
			t.Errorf("rankSumGreaterP(%v, %v) = %g, want 1: %v", tt.x, tt.y, p, tt.one)
		}
	}
}
