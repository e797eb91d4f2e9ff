package records

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tare-dev/tare"
)

// Export formats of raw records.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
	FormatHDR   = "hdr"
)

// Exporter writes raw records in one format, one at a time, so a run of any
// size streams in flat memory.
type Exporter interface {
	Write(r *tare.Result) error
	// Close writes what is buffered; the exporter is unusable after it.
	Close() error
}

// NewExporter returns an exporter writing format to w. The hdr format (an
// HdrHistogram interval log, as HistogramLogAnalyzer reads) needs the run's
// start and tick: one interval histogram of latency per tick. targets are
// the names of the requests of the run's targets file (its summary's
// targets), by index, or none.
func NewExporter(w io.Writer, format string, start time.Time, tick time.Duration, targets []string) (Exporter, error) {
	switch format {
	case FormatJSONL:
		bw := bufio.NewWriter(w)
		return &jsonlExporter{w: bw, enc: json.NewEncoder(bw), targets: targets}, nil
	case FormatCSV:
		cw := csv.NewWriter(w)
		return &csvExporter{w: cw, targets: targets}, cw.Write(csvHeader)
	case FormatHDR:
		return newHDRExporter(w, start, tick)
	}
	return nil, tare.Errorf(tare.EINVALID, "format must be jsonl, csv or hdr; got %q", format)
}

type jsonlExporter struct {
	w       *bufio.Writer
	enc     *json.Encoder
	targets []string
}

func (e *jsonlExporter) Write(r *tare.Result) error {
	rec := NewRecord(r)
	rec.Target = targetName(e.targets, r.TargetIndex)
	if err := e.enc.Encode(rec); err != nil {
		return fmt.Errorf("write jsonl record %d: %w", r.Seq, err)
	}
	return nil
}

func (e *jsonlExporter) Close() error { return e.w.Flush() }

// csvHeader names the columns; those added later come last, so the
// columns before keep their places.
var csvHeader = []string{"seq", "scheduled", "sent", "first_byte", "first_token", "done", "dropped", "status", "err", "bytes_in", "bytes_out",
	"started", "worker", "deliveries", "output_tokens", "token_source", "latency_ms", "service_ms", "send_lag_ms", "queue_wait_ms", "ttfb_ms", "ttft_ms",
	"target_index", "prompt_tokens", "prompt_token_source", "target", "class", "conversation", "prompt_words", "detail"}

// targetName is the name of request i of a targets file, or "".
func targetName(names []string, i int) string {
	if i < 0 || i >= len(names) {
		return ""
	}
	return names[i]
}

type csvExporter struct {
	w       *csv.Writer
	row     []string
	targets []string
}

func (e *csvExporter) Write(r *tare.Result) error {
	rec := NewRecord(r)
	e.row = append(e.row[:0],
		strconv.FormatUint(rec.Seq, 10), stamp(rec.Scheduled), stamp(rec.Sent), stamp(rec.FirstByte), stamp(rec.FirstToken), stamp(rec.Done),
		strconv.FormatBool(rec.Dropped), strconv.Itoa(rec.Status), rec.Err,
		strconv.FormatInt(rec.BytesIn, 10), strconv.FormatInt(rec.BytesOut, 10),
		stamp(rec.Started), rec.Worker, strconv.Itoa(rec.Deliveries), strconv.Itoa(rec.OutputTokens), rec.TokenSource,
		number(rec.LatencyMS), number(rec.ServiceMS), number(rec.SendLagMS), number(rec.QueueWaitMS), number(rec.TTFBMS), number(rec.TTFTMS),
		strconv.Itoa(rec.TargetIndex), strconv.Itoa(rec.PromptTokens), rec.PromptTokenSource, targetName(e.targets, r.TargetIndex),
		rec.Class, strconv.FormatUint(rec.Conversation, 10), strconv.Itoa(rec.PromptWords), rec.Detail)
	if err := e.w.Write(e.row); err != nil {
		return fmt.Errorf("write csv record %d: %w", r.Seq, err)
	}
	return nil
}

func (e *csvExporter) Close() error {
	e.w.Flush()
	return e.w.Error()
}

// hdrExporter writes one interval histogram of latency (ns) per tick of
// completion. Records arrive in arrival order, and none can finish before
// it was scheduled: once a record scheduled at S is seen, every tick that
// ended before S is complete and is written.
type hdrExporter struct {
	log   *hdrhistogram.HistogramLogWriter
	start time.Time
	tick  time.Duration
	open  map[int]*hdrhistogram.Histogram
	next  int // the first tick not yet written
}

func newHDRExporter(w io.Writer, start time.Time, tick time.Duration) (*hdrExporter, error) {
	if tick <= 0 {
		tick = time.Second
	}
	e := &hdrExporter{log: hdrhistogram.NewHistogramLogWriter(w), start: start, tick: tick, open: map[int]*hdrhistogram.Histogram{}}
	e.log.SetBaseTime(start.UnixMilli())
	for _, err := range []error{
		e.log.OutputLogFormatVersion(),
		e.log.OutputComment("tare latency (scheduled to done) per tick, in nanoseconds"),
		e.log.OutputStartTime(start.UnixMilli()),
		e.log.OutputBaseTime(start.UnixMilli()),
		e.log.OutputLegend(),
	} {
		if err != nil {
			return nil, fmt.Errorf("write hdr log header: %w", err)
		}
	}
	return e, nil
}

func (e *hdrExporter) index(t time.Time) int { return max(0, int(t.Sub(e.start)/e.tick)) }

func (e *hdrExporter) Write(r *tare.Result) error {
	if !r.Scheduled.IsZero() {
		if err := e.flush(e.index(r.Scheduled)); err != nil {
			return err
		}
	}
	if r.Dropped || r.Done.IsZero() {
		return nil
	}
	k := max(e.index(r.Done), e.next)
	h := e.open[k]
	if h == nil {
		h = hdrhistogram.New(1, int64(time.Hour), 3)
		h.SetStartTimeMs(e.start.Add(time.Duration(k) * e.tick).UnixMilli())
		h.SetEndTimeMs(e.start.Add(time.Duration(k+1) * e.tick).UnixMilli())
		e.open[k] = h
	}
	h.RecordValue(min(max(int64(r.Latency()), 1), int64(time.Hour)))
	return nil
}

// flush writes the ticks before limit, in order.
func (e *hdrExporter) flush(limit int) error {
	for ; e.next < limit; e.next++ {
		h := e.open[e.next]
		if h == nil {
			continue
		}
		delete(e.open, e.next)
		if err := e.log.OutputIntervalHistogram(h); err != nil {
			return fmt.Errorf("write hdr interval %d: %w", e.next, err)
		}
	}
	return nil
}

func (e *hdrExporter) Close() error {
	last := e.next
	for k := range e.open {
		last = max(last, k+1)
	}
	return e.flush(last)
}

func stamp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func number(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}
