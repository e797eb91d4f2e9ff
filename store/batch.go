package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// Results are stored as batches: one row of result_batches holds up to
// maxBatchRecords records of a run in seq order, encoded into one blob. A
// row per record cost about 4.5 µs of CPU in this process (SQLite's
// statement and b-tree work per row); a batch costs its encoding, tens of
// nanoseconds a record, and one insert.
//
// The blob, version 1:
//
//	byte     batchVersion
//	uvarint  number of records
//	six columns, each a uvarint byte length and then its bytes:
//	  seq      uvarint of the first seq, then uvarint differences (≥ 1)
//	  flags    uvarint per record: which fields are present (the bits below)
//	  times    varint per present time, in the order Scheduled, Sent,
//	           FirstByte, Done, Started, each the difference in ns from the
//	           previous present time of the record; the first from the
//	           previous record's Scheduled (0 at the start of a batch)
//	  ints     varint per present Status, BytesIn, BytesOut, Deliveries,
//	           OutputTokens, Redirects, TargetIndex, PromptTokens,
//	           Conversation, PromptWords, in that order
//	  strings  uvarint per present Err, Worker, TokenSource,
//	           PromptTokenSource, Class, Detail: an index into the table
//	  table    uvarint number of strings, then each as a uvarint length
//	           and its bytes
//
// A zero field (zero time, 0, "") is absent. The flags the usual HTTP
// record has fit the first byte. A field added later takes the next flag
// bit, so batches written before it simply lack the bit and read as they
// did (TargetIndex, PromptTokens and PromptTokenSource came so, and then
// a model call's Class, Conversation, PromptWords and Detail).
const (
	batchVersion    = 1
	maxBatchRecords = 4096
	batchColumns    = 6
	// yieldEvery is how many records encode between yields: about 20 µs.
	yieldEvery = 256
)

const (
	colSeq = iota
	colFlags
	colTimes
	colInts
	colStrings
	colTable
)

// Flag bits of a record.
const (
	hasScheduled = 1 << iota
	hasSent
	hasFirstByte
	hasDone
	hasStatus
	hasBytesIn
	isDropped
	hasErr
	hasBytesOut
	hasStarted
	hasWorker
	hasDeliveries
	hasOutputTokens
	hasTokenSource
	hasRedirects
	hasTargetIndex
	hasPromptTokens
	hasPromptTokenSource
	hasConversation
	hasPromptWords
	hasClass
	hasDetail
	allFlags = hasDetail<<1 - 1
)

// encodedBatch is one row of result_batches.
type encodedBatch struct {
	first, last     int64 // seqs
	records         int
	dropped, errors int // for the summary of a run that never finished
	data            []byte
}

// batchEncoder turns results into batches. It keeps its buffers between
// calls, so encoding allocates nothing once they have grown.
type batchEncoder struct {
	order []int32 // indexes of the records in seq order
	cols  [batchColumns][]byte
	ids   map[string]uint64 // string table of the batch being encoded
	data  []byte
}

func newBatchEncoder() *batchEncoder {
	return &batchEncoder{ids: make(map[string]uint64)}
}

// sortedOrder sets e.order to the indexes of results in seq order and
// rejects a repeated seq or one beyond a signed 64-bit column.
func (e *batchEncoder) sortedOrder(results []tare.Result) error {
	if len(results) > math.MaxInt32 {
		return tare.Errorf(tare.EINVALID, "%d results in one append: at most %d", len(results), math.MaxInt32)
	}
	e.order = e.order[:0]
	for i := range results {
		e.order = append(e.order, int32(i))
	}
	// Records come in completion order, which is nearly seq order.
	bySeq := func(a, b int32) int { return cmp.Compare(results[a].Seq, results[b].Seq) }
	if !slices.IsSortedFunc(e.order, bySeq) {
		slices.SortFunc(e.order, bySeq)
	}
	for k, i := range e.order {
		seq := results[i].Seq
		if seq > math.MaxInt64 {
			return tare.Errorf(tare.EINVALID, "result seq %d does not fit a signed 64-bit column", seq)
		}
		if k > 0 && results[e.order[k-1]].Seq == seq {
			return tare.Errorf(tare.EINVALID, "result seq %d appears twice in the batch", seq)
		}
	}
	return nil
}

// encode encodes the records results[i] for i in order, which are in seq
// order. The returned batch's data is valid until the next call.
func (e *batchEncoder) encode(results []tare.Result, order []int32) encodedBatch {
	for c := range e.cols {
		e.cols[c] = e.cols[c][:0]
	}
	clear(e.ids)
	var table []byte
	nstrings := uint64(0)
	str := func(s string) {
		id, ok := e.ids[s]
		if !ok {
			id = nstrings
			nstrings++
			e.ids[s] = id
			table = binary.AppendUvarint(table, uint64(len(s)))
			table = append(table, s...)
		}
		e.cols[colStrings] = binary.AppendUvarint(e.cols[colStrings], id)
	}
	table = e.cols[colTable]
	b := encodedBatch{records: len(order)}
	var prevSeq uint64
	var prevSched int64
	for k, i := range order {
		if k%yieldEvery == yieldEvery-1 {
			runtime.Gosched() // see insertResults
		}
		r := &results[i]
		if k == 0 {
			b.first = int64(r.Seq)
			e.cols[colSeq] = binary.AppendUvarint(e.cols[colSeq], r.Seq)
		} else {
			e.cols[colSeq] = binary.AppendUvarint(e.cols[colSeq], r.Seq-prevSeq)
		}
		prevSeq = r.Seq
		flags := flagsOf(r)
		e.cols[colFlags] = binary.AppendUvarint(e.cols[colFlags], flags)
		ref := prevSched
		t := e.cols[colTimes]
		for _, bit := range timeBits {
			if flags&bit != 0 {
				v := timeField(r, bit).UnixNano()
				t = binary.AppendVarint(t, v-ref)
				ref = v
				if bit == hasScheduled {
					prevSched = v
				}
			}
		}
		e.cols[colTimes] = t
		n := e.cols[colInts]
		for _, bit := range intBits {
			if flags&bit != 0 {
				n = binary.AppendVarint(n, intField(r, bit))
			}
		}
		e.cols[colInts] = n
		if flags&hasErr != 0 {
			str(r.Err)
		}
		if flags&hasWorker != 0 {
			str(r.Worker)
		}
		if flags&hasTokenSource != 0 {
			str(r.TokenSource)
		}
		if flags&hasPromptTokenSource != 0 {
			str(r.PromptTokenSource)
		}
		if flags&hasClass != 0 {
			str(r.Class)
		}
		if flags&hasDetail != 0 {
			str(r.Detail)
		}
		if r.Dropped {
			b.dropped++
		} else if r.Err != "" {
			b.errors++
		}
	}
	b.last = int64(prevSeq)
	// The table's strings were appended as they came; its count, known
	// only now, goes in front of them below.
	e.cols[colTable] = table
	d := append(e.data[:0], batchVersion)
	d = binary.AppendUvarint(d, uint64(len(order)))
	for c := range e.cols {
		col := e.cols[c]
		if c == colTable {
			var count [binary.MaxVarintLen64]byte
			nc := binary.PutUvarint(count[:], nstrings)
			d = binary.AppendUvarint(d, uint64(nc+len(col)))
			d = append(d, count[:nc]...)
		} else {
			d = binary.AppendUvarint(d, uint64(len(col)))
		}
		d = append(d, col...)
	}
	e.data = d
	b.data = d
	clear(e.ids) // let the records' strings go
	return b
}

var (
	timeBits = [...]uint64{hasScheduled, hasSent, hasFirstByte, hasDone, hasStarted}
	intBits  = [...]uint64{hasStatus, hasBytesIn, hasBytesOut, hasDeliveries, hasOutputTokens, hasRedirects, hasTargetIndex, hasPromptTokens, hasConversation, hasPromptWords}
)

func flagsOf(r *tare.Result) uint64 {
	var f uint64
	set := func(bit uint64, on bool) {
		if on {
			f |= bit
		}
	}
	set(hasScheduled, !r.Scheduled.IsZero())
	set(hasSent, !r.Sent.IsZero())
	set(hasFirstByte, !r.FirstByte.IsZero())
	set(hasDone, !r.Done.IsZero())
	set(hasStatus, r.Status != 0)
	set(hasBytesIn, r.BytesIn != 0)
	set(isDropped, r.Dropped)
	set(hasErr, r.Err != "")
	set(hasBytesOut, r.BytesOut != 0)
	set(hasStarted, !r.Started.IsZero())
	set(hasWorker, r.Worker != "")
	set(hasDeliveries, r.Deliveries != 0)
	set(hasOutputTokens, r.OutputTokens != 0)
	set(hasTokenSource, r.TokenSource != "")
	set(hasRedirects, r.Redirects != 0)
	set(hasTargetIndex, r.TargetIndex != 0)
	set(hasPromptTokens, r.PromptTokens != 0)
	set(hasPromptTokenSource, r.PromptTokenSource != "")
	set(hasConversation, r.Conversation != 0)
	set(hasPromptWords, r.PromptWords != 0)
	set(hasClass, r.Class != "")
	set(hasDetail, r.Detail != "")
	return f
}

func timeField(r *tare.Result, bit uint64) *time.Time {
	switch bit {
	case hasScheduled:
		return &r.Scheduled
	case hasSent:
		return &r.Sent
	case hasFirstByte:
		return &r.FirstByte
	case hasDone:
		return &r.Done
	}
	return &r.Started
}

func intField(r *tare.Result, bit uint64) int64 {
	switch bit {
	case hasStatus:
		return int64(r.Status)
	case hasBytesIn:
		return r.BytesIn
	case hasBytesOut:
		return r.BytesOut
	case hasDeliveries:
		return int64(r.Deliveries)
	case hasOutputTokens:
		return int64(r.OutputTokens)
	case hasTargetIndex:
		return int64(r.TargetIndex)
	case hasPromptTokens:
		return int64(r.PromptTokens)
	case hasConversation:
		return int64(r.Conversation) // a number from 1: read back as it was, whatever its sign here
	case hasPromptWords:
		return int64(r.PromptWords)
	}
	return int64(r.Redirects)
}

func setIntField(r *tare.Result, bit uint64, v int64) {
	switch bit {
	case hasStatus:
		r.Status = int(v)
	case hasBytesIn:
		r.BytesIn = v
	case hasBytesOut:
		r.BytesOut = v
	case hasDeliveries:
		r.Deliveries = int(v)
	case hasOutputTokens:
		r.OutputTokens = int(v)
	case hasTargetIndex:
		r.TargetIndex = int(v)
	case hasPromptTokens:
		r.PromptTokens = int(v)
	case hasConversation:
		r.Conversation = uint64(v)
	case hasPromptWords:
		r.PromptWords = int(v)
	default:
		r.Redirects = int(v)
	}
}

// varints reads one column of a batch.
type varints struct {
	b   []byte
	err bool // a value ran past the end or overflowed
}

func (v *varints) uvarint() uint64 {
	x, n := binary.Uvarint(v.b)
	return v.took(n, x)
}

func (v *varints) varint() int64 {
	x, n := binary.Varint(v.b)
	return int64(v.took(n, uint64(x)))
}

// took consumes the n bytes a value x took, or marks the column bad when
// n says it did not fit.
func (v *varints) took(n int, x uint64) uint64 {
	if n <= 0 {
		v.err, v.b = true, nil
		return 0
	}
	v.b = v.b[n:]
	return x
}

// batchReader decodes a batch one record at a time.
type batchReader struct {
	records, read int
	cols          [batchColumns]varints
	table         []string
	seq           uint64
	prevSched     int64
}

func batchError(format string, args ...any) error {
	return fmt.Errorf("%w: result batch: %s", ErrDecode, fmt.Sprintf(format, args...))
}

// openBatch checks a batch's header and string table. Any bytes give a
// reader or an error wrapping ErrDecode.
func openBatch(data []byte) (*batchReader, error) {
	if len(data) == 0 || data[0] != batchVersion {
		return nil, batchError("not a version %d batch", batchVersion)
	}
	head := varints{b: data[1:]}
	records := head.uvarint()
	if head.err || records == 0 || records > maxBatchRecords {
		return nil, batchError("record count missing or not 1 to %d", maxBatchRecords)
	}
	br := &batchReader{records: int(records)}
	for c := range br.cols {
		n := head.uvarint()
		if head.err || n > uint64(len(head.b)) {
			return nil, batchError("column %d runs past the end", c)
		}
		br.cols[c].b = head.b[:n]
		head.b = head.b[n:]
	}
	if len(head.b) != 0 {
		return nil, batchError("%d bytes after the last column", len(head.b))
	}
	t := &br.cols[colTable]
	n := t.uvarint()
	// Every string takes at least a byte, so the count cannot exceed them.
	if t.err || n > uint64(len(t.b)) {
		return nil, batchError("string table count missing or too large")
	}
	br.table = make([]string, n)
	for i := range br.table {
		size := t.uvarint()
		if t.err || size > uint64(len(t.b)) {
			return nil, batchError("string %d runs past the end", i)
		}
		br.table[i] = string(t.b[:size])
		t.b = t.b[size:]
	}
	if len(t.b) != 0 {
		return nil, batchError("%d bytes after the string table", len(t.b))
	}
	return br, nil
}

// next decodes the next record into r and reports whether there was one.
func (br *batchReader) next(r *tare.Result) (bool, error) {
	if br.read == br.records {
		for c := range br.cols {
			if len(br.cols[c].b) != 0 {
				return false, batchError("%d bytes left in column %d after %d records", len(br.cols[c].b), c, br.records)
			}
		}
		return false, nil
	}
	seqs := &br.cols[colSeq]
	if br.read == 0 {
		br.seq = seqs.uvarint()
	} else {
		d := seqs.uvarint()
		if d == 0 || br.seq+d < br.seq {
			return false, batchError("record %d: seq not after the previous one", br.read)
		}
		br.seq += d
	}
	if br.seq > math.MaxInt64 {
		return false, batchError("record %d: seq %d does not fit a signed 64-bit column", br.read, br.seq)
	}
	flags := br.cols[colFlags].uvarint()
	if flags&^allFlags != 0 {
		return false, batchError("record %d: unknown flags %#x", br.read, flags&^allFlags)
	}
	*r = tare.Result{Seq: br.seq, Dropped: flags&isDropped != 0}
	times := &br.cols[colTimes]
	ref := br.prevSched
	for _, bit := range timeBits {
		if flags&bit != 0 {
			ref += times.varint()
			*timeField(r, bit) = time.Unix(0, ref).UTC()
			if bit == hasScheduled {
				br.prevSched = ref
			}
		}
	}
	ints := &br.cols[colInts]
	for _, bit := range intBits {
		if flags&bit != 0 {
			setIntField(r, bit, ints.varint())
		}
	}
	for _, f := range [...]struct {
		bit uint64
		s   *string
	}{{hasErr, &r.Err}, {hasWorker, &r.Worker}, {hasTokenSource, &r.TokenSource}, {hasPromptTokenSource, &r.PromptTokenSource}, {hasClass, &r.Class}, {hasDetail, &r.Detail}} {
		if flags&f.bit == 0 {
			continue
		}
		id := br.cols[colStrings].uvarint()
		if id >= uint64(len(br.table)) {
			return false, batchError("record %d: string %d not in the table of %d", br.read, id, len(br.table))
		}
		*f.s = br.table[id]
	}
	for c := range br.cols {
		if br.cols[c].err {
			return false, batchError("record %d: column %d ends early", br.read, c)
		}
	}
	br.read++
	return true, nil
}

// decodeBatch returns every record of a batch.
func decodeBatch(data []byte) ([]tare.Result, error) {
	br, err := openBatch(data)
	if err != nil {
		return nil, err
	}
	out := make([]tare.Result, 0, br.records)
	for {
		var r tare.Result
		ok, err := br.next(&r)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, r)
	}
}

// batchSeqs appends the seqs of a batch to dst, decoding nothing else.
func batchSeqs(dst []uint64, data []byte) ([]uint64, error) {
	br, err := openBatch(data)
	if err != nil {
		return dst, err
	}
	seqs := &br.cols[colSeq]
	var seq uint64
	for i := range br.records {
		d := seqs.uvarint()
		if i > 0 && (d == 0 || seq+d < seq) {
			return dst, batchError("record %d: seq not after the previous one", i)
		}
		seq += d
		dst = append(dst, seq)
	}
	if seqs.err {
		return dst, batchError("seq column ends early")
	}
	return dst, nil
}
