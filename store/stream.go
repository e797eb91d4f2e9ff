package store

import (
	"container/heap"
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/tare-dev/tare"
)

// encoders keeps batch encoders, and their grown buffers, between appends.
var encoders = sync.Pool{New: func() any { return newBatchEncoder() }}

// insertResults stores results, sorted by seq, as batches of at most
// maxBatchRecords, after checking that the run's batches have none of their
// seqs (the per-record rows of a store made before schema version 3 are
// not checked: tare never appends to a run it did not create); q is
// inTx's, which has locked the run's row (openRun).
func (c *core) insertResults(ctx context.Context, q querier, run int64, results []tare.Result) error {
	e := encoders.Get().(*batchEncoder)
	defer encoders.Put(e)
	if err := e.sortedOrder(results); err != nil {
		return err
	}
	var stored []uint64
	for order := e.order; len(order) > 0; {
		n := min(len(order), maxBatchRecords)
		b := e.encode(results, order[:n])
		// With a single P nothing else runs while this goroutine does,
		// the load generator's pacer included: yield between the steps,
		// each a fraction of a millisecond.
		runtime.Gosched()
		var err error
		if stored, err = c.storedSeqs(ctx, q, run, b.first, b.last, stored[:0]); err != nil {
			return err
		}
		runtime.Gosched()
		if seq, ok := common(stored, results, order[:n]); ok {
			return tare.Errorf(tare.EINVALID, "result seq %d is already stored", seq)
		}
		if _, err := q.exec(ctx, `INSERT INTO result_batches (run, first_seq, last_seq, records, dropped, errors, data)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, run, b.first, b.last, b.records, b.dropped, b.errors, b.data); err != nil {
			return err
		}
		order = order[n:]
	}
	return nil
}

// storedSeqs appends to dst the seqs of the stored batches whose range
// overlaps first to last. Records arrive about in seq order, so that is the
// last batch or two, and those still holding a request that was slow.
func (c *core) storedSeqs(ctx context.Context, q querier, run, first, last int64, dst []uint64) ([]uint64, error) {
	// The unary plus keeps SQLite off the first_seq index, which would
	// visit every earlier batch of the run.
	rs, err := q.query(ctx, `SELECT data FROM result_batches WHERE run = ? AND last_seq >= ? AND +first_seq <= ?`,
		run, first, last)
	if err != nil {
		return dst, err
	}
	defer rs.Close()
	var data []byte
	for rs.Next() {
		if err := rs.Scan(&data); err != nil {
			return dst, err
		}
		if dst, err = batchSeqs(dst, data); err != nil {
			return dst, err
		}
	}
	return dst, rs.Err()
}

// common returns a seq both in stored (any order) and among results[i]
// for i in order (seq order).
func common(stored []uint64, results []tare.Result, order []int32) (uint64, bool) {
	if len(stored) == 0 {
		return 0, false
	}
	lo, hi := results[order[0]].Seq, results[order[len(order)-1]].Seq
	for _, s := range stored {
		if s < lo || s > hi {
			continue
		}
		// Binary search in the new batch.
		i, j := 0, len(order)
		for i < j {
			m := int(uint(i+j) >> 1)
			if results[order[m]].Seq < s {
				i = m + 1
			} else {
				j = m
			}
		}
		if i < len(order) && results[order[i]].Seq == s {
			return s, true
		}
	}
	return 0, false
}

// cursor is one seq-ordered source of a run's records: a batch, or the
// per-record rows of stores made before batches.
type cursor interface {
	current() *tare.Result
	advance() (bool, error)
}

type batchCursor struct {
	br  *batchReader
	cur tare.Result
}

func (b *batchCursor) current() *tare.Result  { return &b.cur }
func (b *batchCursor) advance() (bool, error) { return b.br.next(&b.cur) }

// rowCursor reads the results table, written by tare before schema
// version 3.
type rowCursor struct {
	rs  rows
	s   *resultScan
	cur tare.Result
}

func (c *rowCursor) current() *tare.Result { return &c.cur }

func (c *rowCursor) advance() (bool, error) {
	if !c.rs.Next() {
		return false, c.rs.Err()
	}
	if err := c.rs.Scan(c.s.dest...); err != nil {
		return false, err
	}
	c.cur = *c.s.result()
	return true, nil
}

// cursorHeap orders the open cursors by their current seq.
type cursorHeap []cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].current().Seq < h[j].current().Seq }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// push advances c to its first record and adds it unless it has none.
func (h *cursorHeap) push(c cursor) error {
	ok, err := c.advance()
	if ok {
		heap.Push(h, c)
	}
	return err
}

// StreamResults calls fn for each raw record of a run in seq order; each
// call gets a fresh Result it may keep. It stops at fn's first error and
// returns it unwrapped. An unknown id is ENOTFOUND.
//
// A batch holds the records that completed in one stretch of time, so the
// seq ranges of batches overlap where requests were slow: batches are read
// in order of their first seq and merged, and a batch is only opened once
// the merge reaches its first seq, so what is held is the batches that
// overlap the current seq, not the run.
func (c *core) StreamResults(ctx context.Context, runID string, fn func(*tare.Result) error) error {
	if err := c.streamResults(ctx, runID, fn); err != nil {
		if fe, ok := err.(fnError); ok {
			return fe.err
		}
		return fmt.Errorf("stream results of run %q: %w", runID, err)
	}
	return nil
}

// fnError carries the callback's error out unwrapped.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (c *core) streamResults(ctx context.Context, runID string, fn func(*tare.Result) error) error {
	pk, err := runKey(ctx, c.b, runID)
	if err != nil {
		return err
	}
	var h cursorHeap
	var legacy bool
	if err := c.b.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM results WHERE run = ?)`, pk).Scan(&legacy); err != nil {
		return err
	}
	if legacy {
		rs, err := c.b.query(ctx, "SELECT "+resultColumns+" FROM results WHERE run = ? ORDER BY seq", pk)
		if err != nil {
			return err
		}
		defer rs.Close()
		if err := h.push(&rowCursor{rs: rs, s: newResultScan()}); err != nil {
			return err
		}
	}
	bs, err := c.b.query(ctx, `SELECT first_seq, records, data FROM result_batches WHERE run = ? ORDER BY first_seq`, pk)
	if err != nil {
		return err
	}
	defer bs.Close()
	// next is the first batch not yet opened, nil after the last.
	type batchRow struct {
		first   int64
		records int
		data    []byte
	}
	var next *batchRow
	read := func() error {
		next = nil
		if !bs.Next() {
			return bs.Err()
		}
		next = &batchRow{}
		return bs.Scan(&next.first, &next.records, &next.data)
	}
	if err := read(); err != nil {
		return err
	}
	for {
		// Open every batch that may hold the smallest seq not yet given.
		for next != nil && (len(h) == 0 || uint64(next.first) <= h[0].current().Seq) {
			if err := openCursor(&h, next.first, next.records, next.data); err != nil {
				return err
			}
			if err := read(); err != nil {
				return err
			}
		}
		if len(h) == 0 {
			return nil
		}
		top := h[0]
		r := new(tare.Result)
		*r = *top.current()
		if err := fn(r); err != nil {
			return fnError{err}
		}
		ok, err := top.advance()
		switch {
		case err != nil:
			return err
		case ok:
			heap.Fix(&h, 0)
		default:
			heap.Pop(&h)
		}
	}
}

// openCursor adds the batch of a result_batches row to h, checked against
// the row's first seq and record count.
func openCursor(h *cursorHeap, first int64, records int, data []byte) error {
	br, err := openBatch(data)
	if err != nil {
		return fmt.Errorf("batch from seq %d: %w", first, err)
	}
	if br.records != records {
		return batchError("batch from seq %d holds %d records, its row says %d", first, br.records, records)
	}
	bc := &batchCursor{br: br}
	if err := h.push(bc); err != nil {
		return fmt.Errorf("batch from seq %d: %w", first, err)
	}
	if bc.cur.Seq != uint64(first) {
		return batchError("batch from seq %d starts at seq %d", first, bc.cur.Seq)
	}
	return nil
}
