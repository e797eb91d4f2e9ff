package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tare-dev/tare"
)

// Defaults of WriterConfig.
const (
	// DefaultBatchSize is the most records one stored batch holds: a
	// batch's cost is mostly its transaction, so the larger the cheaper
	// per record. Under 2,000/s the flush interval comes first.
	DefaultBatchSize     = maxBatchRecords
	DefaultFlushInterval = 500 * time.Millisecond
	DefaultHeartbeat     = 15 * time.Second
	DefaultMaxPending    = 1_000_000
	DefaultWriteTimeout  = 30 * time.Second
)

// WriterConfig tunes a Writer; the zero value means the defaults.
type WriterConfig struct {
	BatchSize     int           // records per write; DefaultBatchSize
	FlushInterval time.Duration // longest a record waits to be written; DefaultFlushInterval
	// Heartbeat is how often the run is marked alive when there has been
	// nothing to write; DefaultHeartbeat. It must stay well under the
	// stores' StaleAfter.
	Heartbeat time.Duration
	// MaxPending bounds the records held in memory when the store is
	// slower than the load; beyond it records are dropped and counted,
	// never waited for. DefaultMaxPending.
	MaxPending   int
	WriteTimeout time.Duration // bound on one batch write; DefaultWriteTimeout
}

func (c WriterConfig) withDefaults() WriterConfig {
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// ErrBehind is wrapped by the error a Writer reports when it dropped
// records because the store could not keep up.
var ErrBehind = errors.New("store writer fell behind")

// Writer streams one run's results and ticks to a store. Add and AddTick
// only append to a buffer under a short lock, so the load engine never
// waits for the database; one goroutine writes the buffer in batches of
// BatchSize, as soon as one is full or every FlushInterval, whichever
// comes first.
//
// After a write fails the Writer stops writing and drops what it is given
// (the measurement goes on in memory); Err reports the failure and Close
// returns it.
type Writer struct {
	s     tare.Store
	runID string
	cfg   WriterConfig

	kick   chan struct{} // a full batch is waiting; capacity 1, never blocks
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed by the goroutine when it has returned
	cancel context.CancelFunc

	mu sync.Mutex // guards the fields below
	// results and ticks are the records waiting to be written; the
	// goroutine swaps them out whole, so Add never waits for a write.
	results []tare.Result
	ticks   []tare.Tick
	spare   []tare.Result // the last written batch's array, reused
	err     error         // first write error
	behind  int           // records dropped over MaxPending
	dropped int           // all records not written, behind included
	closed  bool
}

// NewWriter starts a Writer for the run runID, which must exist in s. Call
// Close when the run ends. The quiet-time heartbeat needs s to have a
// Heartbeat method, as *SQLite and *Postgres do: a wrapper that hides it
// leaves the run looking dead to other machines after StaleAfter without
// writes.
func NewWriter(s tare.Store, runID string, cfg WriterConfig) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		s:      s,
		runID:  runID,
		cfg:    cfg.withDefaults(),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		cancel: cancel,
	}
	go w.loop(ctx)
	return w
}

// Add queues a copy of res to be written.
func (w *Writer) Add(res *tare.Result) {
	w.mu.Lock()
	n, ok := w.accept()
	if ok {
		w.results = append(w.results, *res)
		n++
	}
	w.mu.Unlock()
	if ok && n >= w.cfg.BatchSize {
		w.signal()
	}
}

// AddTick queues t to be written. The Writer keeps t.Host: it must not be
// changed afterwards.
func (w *Writer) AddTick(t tare.Tick) {
	w.mu.Lock()
	_, ok := w.accept()
	if ok {
		w.ticks = append(w.ticks, t)
	}
	w.mu.Unlock()
}

// accept reports whether one more record may be queued, counting it as
// dropped when not, and returns the results already waiting. w.mu is held.
func (w *Writer) accept() (pending int, ok bool) {
	pending = len(w.results)
	switch {
	case w.err != nil || w.closed:
		w.dropped++
		return pending, false
	case pending+len(w.ticks) >= w.cfg.MaxPending:
		w.behind++
		w.dropped++
		return pending, false
	}
	return pending, true
}

func (w *Writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default: // a kick is already waiting
	}
}

// Err reports the first write error, or, when records were dropped
// because the store could not keep up, an error wrapping ErrBehind.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errLocked()
}

func (w *Writer) errLocked() error {
	if w.err != nil {
		return w.err
	}
	if w.behind > 0 {
		return fmt.Errorf("%w: %d records of run %q dropped", ErrBehind, w.behind, w.runID)
	}
	return nil
}

// Dropped is how many records were not written: after a write error, over
// MaxPending, or added after Close.
func (w *Writer) Dropped() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// Close writes what is still buffered and stops the Writer. It returns
// Err(), or ctx's error if ctx ends first, in which case the last write is
// abandoned. Close is safe to call more than once.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
	w.mu.Unlock()
	var ctxErr error
	select {
	case <-w.done:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	// Cancelling abandons a write in progress; the goroutine then returns
	// at once.
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	// A write that failed because Close cancelled it failed for ctx.
	if ctxErr != nil && (w.err == nil || errors.Is(w.err, context.Canceled)) {
		w.err = fmt.Errorf("close store writer of run %q: %w", w.runID, ctxErr)
	}
	return w.errLocked()
}

// loop is the one goroutine that writes.
func (w *Writer) loop(ctx context.Context) {
	defer close(w.done)
	flush := time.NewTicker(w.cfg.FlushInterval)
	defer flush.Stop()
	lastWrite := time.Now()
	for {
		select {
		case <-w.stop:
			w.write(ctx)
			return
		case <-w.kick:
		case <-flush.C:
		}
		if w.write(ctx) {
			lastWrite = time.Now()
		} else if time.Since(lastWrite) >= w.cfg.Heartbeat {
			w.heartbeat(ctx)
			lastWrite = time.Now()
		}
	}
}

// write writes everything buffered, in batches, and reports whether there
// was anything to write.
func (w *Writer) write(ctx context.Context) bool {
	w.mu.Lock()
	results, ticks := w.results, w.ticks
	w.results, w.ticks, w.spare = w.spare, nil, nil
	failed := w.err != nil
	w.mu.Unlock()
	if len(results) == 0 && len(ticks) == 0 {
		w.recycle(results)
		return false
	}
	if failed {
		w.mu.Lock()
		w.dropped += len(results) + len(ticks)
		w.mu.Unlock()
	} else {
		w.writeBatches(ctx, results, ticks)
	}
	w.recycle(results)
	return true
}

// recycle keeps a written batch's array for the next one, unless it grew
// large while the store was slow.
func (w *Writer) recycle(results []tare.Result) {
	if cap(results) > 4*w.cfg.BatchSize {
		return
	}
	clear(results) // drop references to strings of the written records
	w.mu.Lock()
	if w.spare == nil {
		w.spare = results[:0]
	}
	w.mu.Unlock()
}

func (w *Writer) writeBatches(ctx context.Context, results []tare.Result, ticks []tare.Tick) {
	for len(results) > 0 {
		n := min(len(results), w.cfg.BatchSize)
		batch := results[:n]
		if err := w.do(ctx, func(ctx context.Context) error {
			return w.s.AppendResults(ctx, w.runID, batch)
		}); err != nil {
			w.fail(err, len(results)+len(ticks))
			return
		}
		results = results[n:]
	}
	if len(ticks) > 0 {
		if err := w.do(ctx, func(ctx context.Context) error {
			return w.s.AppendTicks(ctx, w.runID, ticks)
		}); err != nil {
			w.fail(err, len(ticks))
		}
	}
}

func (w *Writer) heartbeat(ctx context.Context) {
	if w.Err() != nil {
		return
	}
	if err := w.do(ctx, func(ctx context.Context) error { return w.s.Heartbeat(ctx, w.runID) }); err != nil {
		w.fail(err, 0)
	}
}

func (w *Writer) do(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	return fn(ctx)
}

// fail records the first write error and the records it lost.
func (w *Writer) fail(err error, lost int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("store writer of run %q: %w", w.runID, err)
	}
	w.dropped += lost
}
