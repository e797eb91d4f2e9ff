package session

import (
	"context"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
)

// BenchmarkConsume is the consumer's cost per result (one op): what
// Measure does with each result an engine hands it (the recorders, the
// figures per stage, the watcher; no store), fed as an event loop at
// 100,000 arrivals a second offered hands them over, two in three
// dropped.
func BenchmarkConsume(b *testing.B) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Host = host.Config{Tick: 100 * time.Millisecond}
	w := &measuring{cfg: cfg, start: time.Now()}
	var err error
	if w.sampler, err = host.NewSampler(cfg.Host); err != nil {
		b.Fatal(err)
	}
	defer w.sampler.Close()
	if err := w.record(ctx); err != nil {
		b.Fatal(err)
	}
	w.samples, w.depths = make(chan tare.HostSample), make(chan depthSample)
	w.results = make(chan tare.Result, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	go produce(w.results, w.start, b.N)
	w.consume(ctx)
}

// produce sends n results as an event loop does: recorded, then handed
// over 1,024 at a time.
func produce(out chan<- tare.Result, start time.Time, n int) {
	flush := make([]tare.Result, 0, 1024)
	for i := range n {
		at := start.Add(time.Duration(i) * 10 * time.Microsecond)
		res := tare.Result{Seq: uint64(i), Scheduled: at, Dropped: i%3 != 0}
		if !res.Dropped {
			res.Sent, res.FirstByte, res.Done, res.Status = at, at.Add(50*time.Microsecond), at.Add(60*time.Microsecond), 200
		}
		if flush = append(flush, res); len(flush) == cap(flush) || i == n-1 {
			for i := range flush {
				out <- flush[i]
			}
			flush = flush[:0]
		}
	}
	close(out)
}
