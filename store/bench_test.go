package store

import (
	"testing"
)

// BenchmarkAppendResults writes batches of 1,000 results, the Writer's
// default, and reports rows per second.
func BenchmarkAppendResults(b *testing.B) {
	const batch = 1000
	for _, o := range openers {
		b.Run(o.name, func(b *testing.B) {
			s := o.open(b)
			ctx := testContext(b)
			id := NewRunID()
			mustCreate(b, s, newRun(id, base))
			for i := 0; b.Loop(); i++ {
				// Distinct seqs for every batch, made off the clock.
				b.StopTimer()
				rs := makeResults(i*batch, batch)
				b.StartTimer()
				if err := s.AppendResults(ctx, id, rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
