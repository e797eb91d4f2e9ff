package records

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tare-dev/tare"
)

// ErrMalformed is wrapped by every error reading a raw record.
var ErrMalformed = errors.New("bad record")

// Record is one raw record as exported: the Result's clocks as RFC 3339
// instants with nanoseconds, and the derived figures in milliseconds so a
// spreadsheet needs no arithmetic. Zero instants are left out.
//
// The first answer of a request is named for what it is: on a plain HTTP
// record the first response byte (first_byte, and ttfb_ms from the send),
// on a model call or a queue job the first content token (first_token, and
// ttft_ms from the call's start). A record has one pair or the other.
type Record struct {
	Seq          uint64     `json:"seq"`
	Scheduled    *time.Time `json:"scheduled"`
	Sent         *time.Time `json:"sent,omitempty"`
	FirstByte    *time.Time `json:"first_byte,omitempty"`  // plain HTTP: the first response byte
	FirstToken   *time.Time `json:"first_token,omitempty"` // model call or queue job: the first content token
	Done         *time.Time `json:"done,omitempty"`
	Dropped      bool       `json:"dropped,omitempty"`
	Status       int        `json:"status,omitempty"`
	Err          string     `json:"err,omitempty"`
	BytesIn      int64      `json:"bytes_in,omitempty"`
	BytesOut     int64      `json:"bytes_out,omitempty"`
	Started      *time.Time `json:"started,omitempty"`
	Worker       string     `json:"worker,omitempty"`
	Deliveries   int        `json:"deliveries,omitempty"`
	OutputTokens int        `json:"output_tokens,omitempty"`
	TokenSource  string     `json:"token_source,omitempty"`
	// TargetIndex is which request of a targets file the arrival took,
	// from 0 (as tare.Result.TargetIndex), and Target its name, so that
	// the records summarised again have their figures per request.
	TargetIndex       int    `json:"target_index,omitempty"`
	Target            string `json:"target,omitempty"`
	PromptTokens      int    `json:"prompt_tokens,omitempty"`
	PromptTokenSource string `json:"prompt_token_source,omitempty"`
	// A model call's part of the load (its turn of a conversation, or
	// its prefix group), the conversation it is a turn of, tare's own
	// count of its prompt's words, and the failure in the server's words
	// (as tare.Result), so that the records summarised again have their
	// figures per class and conversation, and the prompt count.
	Class        string `json:"class,omitempty"`
	Conversation uint64 `json:"conversation,omitempty"`
	PromptWords  int    `json:"prompt_words,omitempty"`
	Detail       string `json:"detail,omitempty"`

	LatencyMS   *float64 `json:"latency_ms,omitempty"`
	ServiceMS   *float64 `json:"service_ms,omitempty"`
	SendLagMS   *float64 `json:"send_lag_ms,omitempty"`
	QueueWaitMS *float64 `json:"queue_wait_ms,omitempty"`
	TTFBMS      *float64 `json:"ttfb_ms,omitempty"` // plain HTTP: first byte − sent
	TTFTMS      *float64 `json:"ttft_ms,omitempty"` // model call or queue job: first token − the call's start
}

// NewRecord returns the exported form of r.
func NewRecord(r *tare.Result) Record {
	rec := Record{
		Seq: r.Seq, Scheduled: instant(r.Scheduled), Sent: instant(r.Sent),
		Done: instant(r.Done), Dropped: r.Dropped, Status: r.Status, Err: r.Err, BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		Started: instant(r.Started), Worker: r.Worker, Deliveries: r.Deliveries, OutputTokens: r.OutputTokens, TokenSource: r.TokenSource,
		TargetIndex: r.TargetIndex, PromptTokens: r.PromptTokens, PromptTokenSource: r.PromptTokenSource,
		Class: r.Class, Conversation: r.Conversation, PromptWords: r.PromptWords, Detail: r.Detail,
	}
	token := r.FirstIsToken()
	if token {
		rec.FirstToken = instant(r.FirstByte)
	} else {
		rec.FirstByte = instant(r.FirstByte)
	}
	if !r.Done.IsZero() && !r.Sent.IsZero() {
		rec.LatencyMS, rec.ServiceMS = msOf(r.Latency()), msOf(r.Service())
	}
	if !r.Sent.IsZero() {
		rec.SendLagMS = msOf(r.SendLag())
	}
	if !r.Started.IsZero() {
		rec.QueueWaitMS = msOf(r.QueueWait())
	}
	switch {
	case r.FirstByte.IsZero():
	case token:
		rec.TTFTMS = msOf(r.TTFT())
	default:
		rec.TTFBMS = msOf(r.TTFT())
	}
	return rec
}

// Result returns the tare.Result the record describes. A record written
// before first_token was split from first_byte has its first token in
// first_byte: either is read.
func (rec *Record) Result() tare.Result {
	first := rec.FirstToken
	if first == nil {
		first = rec.FirstByte
	}
	return tare.Result{
		Seq: rec.Seq, Scheduled: at(rec.Scheduled), Sent: at(rec.Sent), FirstByte: at(first), Done: at(rec.Done),
		Dropped: rec.Dropped, Status: rec.Status, Err: rec.Err, BytesIn: rec.BytesIn, BytesOut: rec.BytesOut,
		Started: at(rec.Started), Worker: rec.Worker, Deliveries: rec.Deliveries, OutputTokens: rec.OutputTokens, TokenSource: rec.TokenSource,
		TargetIndex: rec.TargetIndex, PromptTokens: rec.PromptTokens, PromptTokenSource: rec.PromptTokenSource,
		Class: rec.Class, Conversation: rec.Conversation, PromptWords: rec.PromptWords, Detail: rec.Detail,
	}
}

// Read reads JSONL raw records (as the jsonl exporter writes them)
// and calls fn for each, stopping at fn's first error. A malformed line is
// an error wrapping ErrMalformed that names the line.
func Read(r io.Reader, fn func(*tare.Result) error) error {
	return ReadNamed(r, func(res *tare.Result, _ string) error { return fn(res) })
}

// ReadNamed is Read, giving fn each record's target name
// too ("" when it has none).
func ReadNamed(r io.Reader, fn func(res *tare.Result, target string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrMalformed, line, err)
		}
		if rec.Scheduled == nil {
			return fmt.Errorf("%w: line %d: no scheduled time", ErrMalformed, line)
		}
		res := rec.Result()
		if err := fn(&res, rec.Target); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	return nil
}

func instant(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.Round(0) // the monotonic reading means nothing outside this process
	return &t
}

func at(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func msOf(d time.Duration) *float64 { return tare.Float(float64(d) / float64(time.Millisecond)) }
