package store

import (
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// BenchmarkAppendResults writes batches of 1,000 results, the Writer's
// default, as batches ("batch") and as tare stored them before schema
// version 3, a row each ("rows"), and reports the CPU cost per record in
// this process and the allocations per record. The ratio rows/batch is
// what the batches save.
func BenchmarkAppendResults(b *testing.B) {
	const batch = 1000
	ways := []struct {
		name   string
		append func(s testStore, id string, rs []tare.Result) error
	}{
		{"batch", func(s testStore, id string, rs []tare.Result) error {
			return s.AppendResults(testContext(b), id, rs)
		}},
		{"rows", func(s testStore, id string, rs []tare.Result) error {
			return legacyAppend(testContext(b), s, id, rs)
		}},
	}
	for _, o := range openers {
		for _, way := range ways {
			b.Run(o.name+"/"+way.name, func(b *testing.B) {
				s := o.open(b)
				id := NewRunID()
				mustCreate(b, s, newRun(id, base))
				b.ReportAllocs()
				var cpu time.Duration
				for i := 0; b.Loop(); i++ {
					// Distinct seqs for every batch, made off the clock.
					b.StopTimer()
					rs := makeResults(i*batch, batch)
					b.StartTimer()
					before := processCPU()
					if err := way.append(s, id, rs); err != nil {
						b.Fatal(err)
					}
					cpu += processCPU() - before
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
				// This process's CPU, which for PostgreSQL leaves out the
				// server's: what the load generator's core pays.
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/record")
			})
		}
	}
}

// BenchmarkEncodeBatch is the encoding alone, for 1,000 records.
func BenchmarkEncodeBatch(b *testing.B) { benchmarkEncode(b, makeResults(0, 1000)) }

// BenchmarkEncodeBatchMix is the encoding of 1,000 records of a targets
// file's mix against a model: each with its request's index, and a model
// record with its prompt's tokens (withMix).
func BenchmarkEncodeBatchMix(b *testing.B) { benchmarkEncode(b, withMix(makeResults(0, 1000))) }

func benchmarkEncode(b *testing.B, rs []tare.Result) {
	e := newBatchEncoder()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.sortedOrder(rs); err != nil {
			b.Fatal(err)
		}
		e.encode(rs, e.order)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
}

// BenchmarkStreamResults reads back 100,000 records stored as batches.
func BenchmarkStreamResults(b *testing.B) {
	s := openSQLiteT(b)
	id := NewRunID()
	mustCreate(b, s, newRun(id, base))
	const n = 100_000
	for i := 0; i < n; i += 1000 {
		if err := s.AppendResults(testContext(b), id, makeResults(i, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.StreamResults(testContext(b), id, func(*tare.Result) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// processCPU is the user and system CPU time this process has used, all
// its threads (the garbage collector's too).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
