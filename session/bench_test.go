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
	w.results = make(chan *load.Batch, 64)
	b.ReportAllocs()
	b.ResetTimer()
	go produce(w.results, w.start, b.N)
	w.consume(ctx)
}

// produce sends n results as an event loop does: recorded, then handed
// over 1,024 at a time, in batches the consumer releases.
func produce(out chan<- *load.Batch, start time.Time, n int) {
	flush := load.NewBatch()
	for i := range n {
		at := start.Add(time.Duration(i) * 10 * time.Microsecond)
		res := tare.Result{Seq: uint64(i), Scheduled: at, Dropped: i%3 != 0}
		if !res.Dropped {
			res.Sent, res.FirstByte, res.Done, res.Status = at, at.Add(50*time.Microsecond), at.Add(60*time.Microsecond), 200
		}
		if flush.Results = append(flush.Results, res); len(flush.Results) == 1024 || i == n-1 {
			out <- flush
			flush = load.NewBatch()
		}
	}
	flush.Release()
	close(out)
}
