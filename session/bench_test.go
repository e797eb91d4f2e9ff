package session

import (
	"context"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/load"
)

// BenchmarkConsume is the consumer's cost per result (one op): what
// Measure does with each result an engine hands it (the recorders, the
// figures per stage, the watcher; no store), fed as an event loop at
// 100,000 arrivals a second offered hands them over, two in three
// dropped.
func BenchmarkConsume(b *testing.B) {
	w := consumer(b)
	w.results = make(chan *load.Batch, 64)
	b.ReportAllocs()
	b.ResetTimer()
	go produce(w.results, w.start, 0, b.N)
	w.consume(context.Background())
}

// TestConsumeAllocatesNothing: in the steady state the consumer takes
// results without an allocation each (it used to copy each to the heap).
func TestConsumeAllocatesNothing(t *testing.T) {
	w := consumer(t)
	const n = 1024
	seq := 0
	run := func() {
		w.results = make(chan *load.Batch, 1)
		produce(w.results, w.start, seq, n)
		seq += n
		w.consume(context.Background())
	}
	run() // the first ticks and the pool's first batches
	// A channel and a batch a run, and the timeline's ticks as it grows.
	allocs := testing.AllocsPerRun(20, run)
	t.Logf("%.1f allocations for %d results", allocs, n)
	if allocs > n/100 {
		t.Errorf("%.0f allocations for %d results; want next to none", allocs, n)
	}
}

// consumer is a window whose results and samples go nowhere but to the
// recorders, with tare as the host's process of interest.
func consumer(tb testing.TB) *measuring {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Host = host.Config{Tick: 100 * time.Millisecond}
	w := &measuring{cfg: cfg, start: time.Now()}
	var err error
	if w.sampler, err = host.NewSampler(cfg.Host); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.sampler.Close)
	if err := w.record(context.Background()); err != nil {
		tb.Fatal(err)
	}
	w.samples, w.depths = make(chan tare.HostSample), make(chan depthSample)
	return w
}

// produce sends the results from seq from to from+n as an event loop
// does: recorded, then handed over 1,024 at a time, in batches the
// consumer releases; then closes out.
func produce(out chan<- *load.Batch, start time.Time, from, n int) {
	flush := load.NewBatch()
	for i := from; i < from+n; i++ {
		at := start.Add(time.Duration(i) * 10 * time.Microsecond)
		res := tare.Result{Seq: uint64(i), Scheduled: at, Dropped: i%3 != 0}
		if !res.Dropped {
			res.Sent, res.FirstByte, res.Done, res.Status = at, at.Add(50*time.Microsecond), at.Add(60*time.Microsecond), 200
		}
		if flush.Results = append(flush.Results, res); len(flush.Results) == 1024 {
			out <- flush
			flush = load.NewBatch()
		}
	}
	if len(flush.Results) > 0 {
		out <- flush
	} else {
		flush.Release()
	}
	close(out)
}
