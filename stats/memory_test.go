package stats

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
)

// TestHistogramSizes measures what one dense histogram costs at the two
// precisions the package uses, which is why per-tick histograms use two
// significant figures and are recycled.
func TestHistogramSizes(t *testing.T) {
	run := hdrhistogram.New(histLowest, histHighest, runDigits).ByteSize()
	tick := hdrhistogram.New(histLowest, histHighest, tickDigits).ByteSize()
	t.Logf("dense histogram 1µs..1h: %d bytes at %d digits, %d bytes at %d digits", run, runDigits, tick, tickDigits)
	if tick*4 > run {
		t.Errorf("per-tick histogram is %d bytes, want well under the run-wide %d", tick, run)
	}
}

// feedMillion records 1,000,000 synthetic results over 1,000 one-second
// ticks, with a host sample per tick, the way a consumer would.
func feedMillion(r *Recorder) {
	rng := rand.New(rand.NewPCG(42, 1))
	res := &tare.Result{Status: 200}
	const perTick = 1000
	for k := range 1000 {
		for j := range perTick {
			res.Scheduled = sec(float64(k) + float64(j)/perTick)
			res.Sent = res.Scheduled.Add(time.Duration(rng.IntN(500)) * time.Microsecond)
			res.Done = res.Sent.Add(time.Duration(5+rng.ExpFloat64()*40) * time.Millisecond)
			res.Err = ""
			if rng.IntN(100) == 0 {
				res.Err = "timeout"
			}
			r.AddResult(res)
		}
		r.AddHost(sample(float64(k), float64(k+1), 20*rng.Float64()))
	}
}

// TestMemoryMillion checks that memory stays flat: a million results leave
// the heap in use at a few megabytes, not a million records.
func TestMemoryMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds a million results")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newRecorder(t, Config{})
	feedMillion(r)
	s := r.Summary(sec(1000), 1000*time.Second)
	runtime.GC()
	runtime.ReadMemStats(&after)
	inUse := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use after 1,000,000 results over 1,000 ticks: %.2f MB (pending %d, free tick histograms %d)",
		float64(inUse)/(1<<20), len(r.pending), len(r.free))
	if s.Requests.Total != 1_000_000 {
		t.Errorf("Requests.Total = %d, want 1000000", s.Requests.Total)
	}
	if inUse > 16<<20 {
		t.Errorf("heap in use grew by %d bytes, want under 16 MB: the recorder keeps per-request state", inUse)
	}
	runtime.KeepAlive(r)
}

// TestAddResultAllocs checks that recording a result allocates nothing once
// the timeline and the histograms are warm.
func TestAddResultAllocs(t *testing.T) {
	r := newRecorder(t, Config{})
	res := &tare.Result{Status: 200, Err: "timeout"}
	i := 0
	next := func() {
		res.Scheduled = sec(float64(i) / 1000)
		res.Sent = res.Scheduled
		res.Done = res.Scheduled.Add(time.Duration(1+i%50) * time.Millisecond)
		i++
		r.AddResult(res)
	}
	for range 10_000 {
		next()
	}
	if n := testing.AllocsPerRun(10_000, next); n != 0 {
		t.Errorf("AddResult allocates %g times per call, want 0", n)
	}
}

func BenchmarkAddResult(b *testing.B) {
	r := newRecorder(b, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 4096)
	for i := range lat {
		lat[i] = time.Duration(1e6 + rng.ExpFloat64()*2e7)
	}
	res := &tare.Result{Status: 200}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// 1,000 arrivals a second, so the timeline advances and ticks close.
		res.Scheduled = t0.Add(time.Duration(i) * time.Millisecond)
		res.Sent = res.Scheduled
		res.Done = res.Scheduled.Add(lat[i%len(lat)])
		r.AddResult(res)
		i++
	}
}

// BenchmarkTicks is the timeline the verdict reads at the end of a run of
// a million requests: with each tick's share of the full sample, its
// costs taken per request sharing the system (a sort of 16,384 ends).
func BenchmarkTicks(b *testing.B) {
	r := newRecorder(b, Config{})
	feedMillion(r)
	b.ReportAllocs()
	for b.Loop() {
		r.Ticks()
	}
}

func BenchmarkSummary(b *testing.B) {
	r := newRecorder(b, Config{})
	feedMillion(r)
	b.ReportAllocs()
	for b.Loop() {
		r.Summary(sec(1000), 1000*time.Second)
	}
}
