package store

import (
	"bytes"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// encodeAll encodes results as one batch, as AppendResults does.
func encodeAll(t testing.TB, results []tare.Result) encodedBatch {
	t.Helper()
	b, err := encodeCopy(results)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeCopy(results []tare.Result) (encodedBatch, error) {
	e := newBatchEncoder()
	if err := e.sortedOrder(results); err != nil {
		return encodedBatch{}, err
	}
	b := e.encode(results, e.order)
	b.data = append([]byte(nil), b.data...)
	return b, nil
}

func TestBatchRoundTrip(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	tests := []struct {
		name    string
		results []tare.Result
	}{
		{"every kind of record", makeResults(0, 1000)},
		{"one empty record", []tare.Result{{}}},
		{"every field set", []tare.Result{everyField}},
		{"times only some present, out of order", []tare.Result{
			{Seq: 1, Done: at(time.Hour)},
			{Seq: 2, Scheduled: at(time.Second), Started: at(-time.Hour)},
			{Seq: 3, FirstByte: epoch, Sent: at(-24 * time.Hour)},
		}},
		{"extremes", []tare.Result{
			{Seq: 0, Scheduled: time.Unix(0, math.MinInt64).UTC(), Done: time.Unix(0, math.MaxInt64).UTC(),
				Status: -1, BytesIn: math.MinInt64, BytesOut: math.MaxInt64, Deliveries: math.MinInt32},
			{Seq: math.MaxInt64, Scheduled: time.Unix(0, math.MaxInt64).UTC(), Err: "é\x00\xff"},
		}},
		{"strings shared and distinct", []tare.Result{
			{Seq: 10, Err: "timeout", Worker: "timeout"},
			{Seq: 11, Err: "refused", Worker: "a", TokenSource: "usage", PromptTokenSource: "worker"},
			{Seq: 12, Err: "timeout", Worker: "a", TokenSource: "usage", PromptTokenSource: "usage"},
		}},
		{"a targets file's mix, first request included", []tare.Result{
			{Seq: 0, TargetIndex: 0, PromptTokens: 17},
			{Seq: 1, TargetIndex: 2, PromptTokens: math.MaxInt32},
			{Seq: 2, TargetIndex: math.MaxInt64, PromptTokens: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encodeAll(t, tt.results)
			got, err := decodeBatch(b.data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.results) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, tt.results)
			}
			seqs, err := batchSeqs(nil, b.data)
			if err != nil || len(seqs) != len(got) || int64(seqs[0]) != b.first || int64(seqs[len(seqs)-1]) != b.last {
				t.Errorf("batchSeqs = %v, %v; want %d seqs from %d to %d", seqs, err, len(got), b.first, b.last)
			}
			dropped, errs := 0, 0
			for _, r := range tt.results {
				switch {
				case r.Dropped:
					dropped++
				case r.Err != "":
					errs++
				}
			}
			if b.records != len(got) || b.dropped != dropped || b.errors != errs {
				t.Errorf("batch counts %d records, %d dropped, %d errors; want %d, %d, %d",
					b.records, b.dropped, b.errors, len(got), dropped, errs)
			}
		})
	}
}

// TestBatchStoresEveryField: the record with every field set leaves none
// zero, so a field added to tare.Result fails here until the batch stores
// it, or notStored says why it need not.
func TestBatchStoresEveryField(t *testing.T) {
	r := reflect.ValueOf(everyField)
	for i := range r.NumField() {
		if name := r.Type().Field(i).Name; r.Field(i).IsZero() && notStored[name] == "" {
			t.Errorf("tare.Result.%s is zero in everyField: set it, and store it in the batch", name)
		}
	}
	got, err := decodeBatch(encodeAll(t, []tare.Result{everyField}).data)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], everyField) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, everyField)
	}
}

// notStored are the fields of tare.Result a batch leaves out, and why.
var notStored = map[string]string{
	"Conn": "the connections' counts are the summary's (generator.connection_use); a number per record would cost a varint for a figure no report reads",
}

// everyField is a record with every field of tare.Result set.
var everyField = tare.Result{
	Seq: 7, Scheduled: at(0), Sent: at(time.Millisecond), FirstByte: at(2 * time.Millisecond),
	Done: at(3 * time.Millisecond), Dropped: true, Status: 503, Err: "http 503", BytesIn: 1 << 40,
	BytesOut: 3, Redirects: 2, Started: at(time.Microsecond), Worker: "w-1", Deliveries: 3,
	OutputTokens: 99, TokenSource: "counted", TargetIndex: 4, PromptTokens: 1200, PromptTokenSource: "usage",
	Class: "turn 2", Conversation: 1<<63 + 5, PromptWords: 870, Detail: "the server's own words",
}

// TestBatchWrittenBeforeTargets: a batch written before the batches kept
// TargetIndex and PromptTokens (testdata/batch_before_targets.bin, 300
// records of makeResults) reads as it did, and the same records encode to
// the same bytes today.
func TestBatchWrittenBeforeTargets(t *testing.T) {
	old, err := os.ReadFile("testdata/batch_before_targets.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := makeResults(0, 300)
	got, err := decodeBatch(old)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the old batch decoded to %d records (%v), not the %d written", len(got), err, len(want))
	}
	if now := encodeAll(t, want).data; !bytes.Equal(now, old) {
		t.Errorf("the same records encode to %d bytes that differ from the %d written before", len(now), len(old))
	}
}

func TestBatchSortsAndRejects(t *testing.T) {
	want := makeResults(0, 50)
	shuffled := append([]tare.Result(nil), want...)
	for i := range shuffled {
		j := (i * 17) % len(shuffled)
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	got, err := decodeBatch(encodeAll(t, shuffled).data)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a shuffled batch decoded to %d records (%v), not the %d in seq order", len(got), err, len(want))
	}
	e := newBatchEncoder()
	for _, bad := range [][]tare.Result{
		{{Seq: 3}, {Seq: 1}, {Seq: 3}},
		{{Seq: math.MaxInt64 + 1}},
	} {
		wantCode(t, e.sortedOrder(bad), tare.EINVALID)
	}
}

// A typical HTTP record takes a few bytes, not the hundred or so of a row.
func TestBatchIsCompact(t *testing.T) {
	rs := makeResults(0, 1000)
	if n := len(encodeAll(t, rs).data); n > 32*len(rs) {
		t.Errorf("1,000 records take %d bytes, want at most 32 a record", n)
	}
}

func TestBatchEncodeAllocatesNothingWhenSteady(t *testing.T) {
	rs := makeResults(0, 1000)
	e := newBatchEncoder()
	encode := func() {
		if err := e.sortedOrder(rs); err != nil {
			t.Fatal(err)
		}
		e.encode(rs, e.order)
	}
	encode()
	if n := testing.AllocsPerRun(20, encode); n != 0 {
		t.Errorf("encoding a batch allocates %.1f times once warm, want 0", n)
	}
}

func TestBatchDecodeRejects(t *testing.T) {
	good := encodeAll(t, makeResults(0, 20)).data
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"other version", append([]byte{2}, good[1:]...)},
		{"no records", []byte{batchVersion, 0, 0, 0, 0, 0, 0, 1, 0}},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"seq repeats", []byte{batchVersion, 2, 2, 5, 0, 2, 0, 0, 0, 0, 0, 1, 0}},
		{"unknown flag", []byte{batchVersion, 1, 1, 0, 3, 0x80, 0x80, 0x10, 0, 0, 0, 1, 0}},
		{"string not in table", []byte{batchVersion, 1, 1, 0, 2, 0x80, 0x01, 0, 0, 1, 3, 1, 0}},
		{"column ends early", []byte{batchVersion, 1, 1, 0, 1, 1, 0, 0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeBatch(tt.data); !errors.Is(err, ErrDecode) {
				t.Errorf("decodeBatch = %v, want an error wrapping ErrDecode", err)
			}
		})
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeAll(f, makeResults(0, 30)).data)
	f.Add(encodeAll(f, []tare.Result{{Seq: 1, Err: "x", Worker: "y", TokenSource: "z", Redirects: 1}}).data)
	f.Add(encodeAll(f, []tare.Result{everyField, {Seq: 8, TargetIndex: 1, PromptTokens: 3, PromptTokenSource: "worker"}}).data)
	if old, err := os.ReadFile("testdata/batch_before_targets.bin"); err == nil {
		f.Add(old)
	}
	f.Add([]byte{batchVersion, 1, 1, 0, 1, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeBatch(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		if _, err := batchSeqs(nil, data); err != nil {
			t.Fatalf("batchSeqs rejects what decodeBatch reads: %v", err)
		}
		// What decodes is in seq order and encodes to the same records.
		b, err := encodeCopy(got)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		again, err := decodeBatch(b.data)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip of %+v gave %+v, %v", got, again, err)
		}
	})
}
