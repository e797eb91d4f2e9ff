package load

import (
	"iter"
	"sync"

	"github.com/tare-dev/tare"
)

// Batch is results handed to the consumer together: what an event loop
// recorded since its last flush, a run of arrivals dropped at once, or a
// goroutine's one result. One channel operation and one wake of the
// consumer then carry many results, and the consumer gives the batch back
// (Release) for the engine to fill again, so that the steady state
// allocates nothing.
type Batch struct {
	Results []tare.Result
}

// batchKeep is the largest batch kept for reuse: one that grew beyond it
// (a long run of drops) goes to the garbage collector.
const batchKeep = 4096

var batches = sync.Pool{New: func() any { return new(Batch) }}

// NewBatch returns an empty batch: one released before, when there is one.
func NewBatch() *Batch {
	b := batches.Get().(*Batch)
	b.Results = b.Results[:0]
	return b
}

// Release gives b back once its results are read; neither b nor its
// results may be used after.
func (b *Batch) Release() {
	if cap(b.Results) <= batchKeep {
		batches.Put(b)
	}
}

// All yields the results of the batches received from out until it is
// closed, releasing each batch once read: a consumer that reads results
// one by one.
func All(out <-chan *Batch) iter.Seq[tare.Result] {
	return func(yield func(tare.Result) bool) {
		for b := range out {
			for _, res := range b.Results {
				if !yield(res) {
					return
				}
			}
			b.Release()
		}
	}
}

// one sends res alone, as a goroutine that finished it does.
func one(out chan<- *Batch, res tare.Result) {
	b := NewBatch()
	b.Results = append(b.Results, res)
	out <- b
}
