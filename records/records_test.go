package records

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

var exportStart = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// seededResults are n results of a queue-and-model run at 20/s over a
// targets file of three requests, in arrival order, from a fixed seed.
func seededResults(n int) []tare.Result {
	rng := rand.New(rand.NewPCG(7, 7))
	var out []tare.Result
	for i := range n {
		sched := exportStart.Add(time.Duration(i) * 50 * time.Millisecond)
		r := tare.Result{Seq: uint64(i), Scheduled: sched, TargetIndex: i % 3}
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
			r.PromptTokens, r.PromptTokenSource = 100+i*7%400, "worker"
			r.Conversation, r.Class, r.PromptWords = uint64(1+i/4), fmt.Sprintf("turn %d", 1+i%4), 70+i*5%300
			if i%11 == 3 {
				r.Status, r.Err, r.Detail = 503, "http 503", "the server is overloaded, try again"
			}
		}
		out = append(out, r)
	}
	return out
}

// exportTargets name the requests of the targets file the seeded results
// took (TargetIndex 0 to 2).
var exportTargets = []string{"home", "POST /orders", "search"}

func export(t *testing.T, format string, results []tare.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := NewExporter(&buf, format, exportStart, time.Second, exportTargets)
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
	err := Read(bytes.NewReader(export(t, FormatJSONL, results)), func(r *tare.Result) error {
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
			want.Err != got.Err || want.Dropped != got.Dropped || want.OutputTokens != got.OutputTokens || want.QueueWait() != got.QueueWait() ||
			want.TargetIndex != got.TargetIndex || want.PromptTokens != got.PromptTokens || want.PromptTokenSource != got.PromptTokenSource ||
			want.Class != got.Class || want.Conversation != got.Conversation || want.PromptWords != got.PromptWords || want.Detail != got.Detail {
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
	_, err := NewExporter(io.Discard, "xml", exportStart, time.Second, nil)
	if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), `got "xml"`) {
		t.Errorf("err %v, want EINVALID naming the format", err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, in := range []string{"{not json}\n", `{"seq": 1}` + "\n", "{}\n{\"seq\":\"x\"}\n"} {
		err := Read(strings.NewReader(in), func(*tare.Result) error { return nil })
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: err %v, want ErrMalformed naming the line", in, err)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(string(export(&testing.T{}, FormatJSONL, seededResults(3))))
	f.Add(`{"seq":1,"scheduled":"2026-11-29T14:00:00Z","done":"2026-11-29T13:00:00Z"}`)
	f.Add("\n\n{}")
	f.Fuzz(func(t *testing.T, in string) {
		err := Read(strings.NewReader(in), func(r *tare.Result) error {
			_ = NewRecord(r)
			return nil
		})
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
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
		e, err := NewExporter(io.Discard, format, exportStart, time.Second, nil)
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

// TestExportNamesFirstAnswer: a plain HTTP record's first answer is its
// first byte (first_byte, ttfb_ms); a model call's or a queue job's is its
// first token (first_token, ttft_ms). Neither is named as the other (issue
// 20, item 9).
func TestExportNamesFirstAnswer(t *testing.T) {
	sent := exportStart.Add(time.Millisecond)
	plain := tare.Result{Seq: 0, Scheduled: exportStart, Sent: sent, FirstByte: sent.Add(3 * time.Millisecond),
		Done: sent.Add(5 * time.Millisecond), Status: 200}
	model := tare.Result{Seq: 1, Scheduled: exportStart, Sent: sent, FirstByte: sent.Add(40 * time.Millisecond),
		Done: sent.Add(90 * time.Millisecond), Status: 200, OutputTokens: 9, TokenSource: "usage"}
	job := model
	job.Seq, job.Started, job.Worker, job.Deliveries = 2, sent.Add(10*time.Millisecond), "w1", 1
	lines := strings.Split(strings.TrimSpace(string(export(t, FormatJSONL, []tare.Result{plain, model, job}))), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	tests := []struct {
		name      string
		line      string
		has, hasn []string
	}{
		{"plain HTTP", lines[0], []string{`"first_byte":"2026-11-29T14:00:00.004Z"`, `"ttfb_ms":3`}, []string{"ttft_ms", "first_token"}},
		{"model call", lines[1], []string{`"first_token":"2026-11-29T14:00:00.041Z"`, `"ttft_ms":40`}, []string{"ttfb_ms", "first_byte"}},
		{"queue job", lines[2], []string{`"first_token":"2026-11-29T14:00:00.041Z"`, `"ttft_ms":30`}, []string{"ttfb_ms", "first_byte"}},
	}
	for _, tt := range tests {
		for _, s := range tt.has {
			if !strings.Contains(tt.line, s) {
				t.Errorf("%s: %s\nhas no %s", tt.name, tt.line, s)
			}
		}
		for _, s := range tt.hasn {
			if strings.Contains(tt.line, `"`+s+`"`) {
				t.Errorf("%s: %s\nhas %q", tt.name, tt.line, s)
			}
		}
	}

	csv := strings.Split(strings.TrimSpace(string(export(t, FormatCSV, []tare.Result{plain, model}))), "\n")
	head := strings.Split(csv[0], ",")
	col := func(row, name string) string {
		for i, h := range head {
			if h == name {
				return strings.Split(row, ",")[i]
			}
		}
		t.Fatalf("csv header %q has no %s", csv[0], name)
		return ""
	}
	if col(csv[1], "ttfb_ms") != "3" || col(csv[1], "ttft_ms") != "" {
		t.Errorf("csv, plain HTTP: ttfb_ms %q ttft_ms %q; want 3 and empty", col(csv[1], "ttfb_ms"), col(csv[1], "ttft_ms"))
	}
	if col(csv[2], "ttft_ms") != "40" || col(csv[2], "ttfb_ms") != "" {
		t.Errorf("csv, model call: ttft_ms %q ttfb_ms %q; want 40 and empty", col(csv[2], "ttft_ms"), col(csv[2], "ttfb_ms"))
	}

	// Both read back as the Result they came from, and so does a record of
	// an export from before the split, whose first token is in first_byte.
	old := `{"seq":1,"scheduled":"2026-11-29T14:00:00Z","sent":"2026-11-29T14:00:00.001Z","first_byte":"2026-11-29T14:00:00.041Z","done":"2026-11-29T14:00:00.091Z","status":200,"output_tokens":9,"token_source":"usage","ttft_ms":40}`
	var back []tare.Result
	in := strings.Join(lines[:2], "\n") + "\n" + old + "\n"
	if err := Read(strings.NewReader(in), func(r *tare.Result) error { back = append(back, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, want := range []tare.Result{plain, model, model} {
		if !back[i].FirstByte.Equal(want.FirstByte) {
			t.Errorf("record %d read back with its first answer at %v, want %v", i, back[i].FirstByte, want.FirstByte)
		}
	}
}
