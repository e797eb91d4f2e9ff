package report

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/goldenfile"
)

var exportStart = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// seededResults are n results of a queue-and-model run at 20/s, in arrival
// order, from a fixed seed.
func seededResults(n int) []tare.Result {
	rng := rand.New(rand.NewPCG(7, 7))
	var out []tare.Result
	for i := range n {
		sched := exportStart.Add(time.Duration(i) * 50 * time.Millisecond)
		r := tare.Result{Seq: uint64(i), Scheduled: sched}
		switch {
		case i%17 == 5:
			r.Dropped = true
		default:
			r.Sent = sched.Add(time.Duration(rng.IntN(500)) * time.Microsecond)
			r.Started = r.Sent.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
			r.FirstByte = r.Started.Add(time.Duration(20+rng.IntN(30)) * time.Millisecond)
			r.Done = r.FirstByte.Add(time.Duration(100+rng.IntN(900)) * time.Millisecond)
			r.Status, r.Worker, r.Deliveries = 200, "w1", 1
			r.OutputTokens, r.TokenSource = 10+rng.IntN(50), "usage"
			if i%11 == 3 {
				r.Status, r.Err = 503, "http 503"
			}
		}
		out = append(out, r)
	}
	return out
}

func export(t *testing.T, format string, results []tare.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := NewExporter(&buf, format, exportStart, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range results {
		if err := e.Write(&results[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportGolden(t *testing.T) {
	results := seededResults(40)
	goldenfile.Check(t, "records.golden.jsonl", export(t, FormatJSONL, results))
	goldenfile.Check(t, "records.golden.csv", export(t, FormatCSV, results))
}

func TestJSONLRoundTrip(t *testing.T) {
	results := seededResults(200)
	var back []tare.Result
	err := ReadRecords(bytes.NewReader(export(t, FormatJSONL, results)), func(r *tare.Result) error {
		back = append(back, *r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(results) {
		t.Fatalf("read %d records, wrote %d", len(back), len(results))
	}
	for i := range results {
		want, got := results[i], back[i]
		if !want.Scheduled.Equal(got.Scheduled) || !want.Done.Equal(got.Done) || want.Latency() != got.Latency() ||
			want.Err != got.Err || want.Dropped != got.Dropped || want.OutputTokens != got.OutputTokens || want.QueueWait() != got.QueueWait() {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
	}
}

// TestHDRLog reads the interval log back with the library's reader: every
// completed request is in exactly one interval, intervals in time order.
func TestHDRLog(t *testing.T) {
	results := seededResults(400)
	r := hdrhistogram.NewHistogramLogReader(bytes.NewReader(export(t, FormatHDR, results)))
	var total int64
	last := int64(-1)
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			break
		}
		if h.StartTimeMs() <= last {
			t.Errorf("interval starting %d after one starting %d", h.StartTimeMs(), last)
		}
		last = h.StartTimeMs()
		total += h.TotalCount()
	}
	want := int64(0)
	for _, res := range results {
		if !res.Dropped {
			want++
		}
	}
	if total != want {
		t.Errorf("intervals hold %d values, want %d completed requests", total, want)
	}
}

func TestExportUnknownFormat(t *testing.T) {
	_, err := NewExporter(io.Discard, "xml", exportStart, time.Second)
	if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), `got "xml"`) {
		t.Errorf("err %v, want EINVALID naming the format", err)
	}
}

func TestReadRecordsErrors(t *testing.T) {
	for _, in := range []string{"{not json}\n", `{"seq": 1}` + "\n", "{}\n{\"seq\":\"x\"}\n"} {
		err := ReadRecords(strings.NewReader(in), func(*tare.Result) error { return nil })
		if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: err %v, want ErrRecord naming the line", in, err)
		}
	}
}

func FuzzReadRecords(f *testing.F) {
	f.Add(string(export(&testing.T{}, FormatJSONL, seededResults(3))))
	f.Add(`{"seq":1,"scheduled":"2026-11-29T14:00:00Z","done":"2026-11-29T13:00:00Z"}`)
	f.Add("\n\n{}")
	f.Fuzz(func(t *testing.T, in string) {
		err := ReadRecords(strings.NewReader(in), func(r *tare.Result) error {
			_ = NewRecord(r)
			return nil
		})
		if err != nil && !errors.Is(err, ErrRecord) {
			t.Fatalf("error %v does not wrap ErrRecord", err)
		}
	})
}

// TestExportFlatMemory streams 1,000,000 records through each exporter and
// checks that the heap does not grow with them.
func TestExportFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 records; skipped with -short")
	}
	for _, format := range []string{FormatJSONL, FormatCSV, FormatHDR} {
		e, err := NewExporter(io.Discard, format, exportStart, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		res := tare.Result{Status: 200}
		for i := range 1_000_000 {
			res.Seq = uint64(i)
			res.Scheduled = exportStart.Add(time.Duration(i) * time.Millisecond)
			res.Sent = res.Scheduled
			res.Done = res.Scheduled.Add(time.Duration(1+i%500) * time.Millisecond)
			if err := e.Write(&res); err != nil {
				t.Fatal(err)
			}
			if i == 10_000 {
				runtime.GC()
				runtime.ReadMemStats(&before)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("%s: heap in use %.1f MB after 10k records, %.1f MB after 1M", format, float64(before.HeapInuse)/1e6, float64(after.HeapInuse)/1e6)
		if grew > 16<<20 {
			t.Errorf("%s: heap grew by %.1f MB over 990,000 records: the export does not stream", format, float64(grew)/1e6)
		}
	}
}
