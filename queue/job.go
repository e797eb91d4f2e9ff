package queue

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// ErrParse is wrapped by every error about a malformed job or result entry,
// so errors.Is(err, queue.ErrParse) works; the message names the field and
// quotes the bad value.
var ErrParse = errors.New("malformed queue entry")

// Status values of a Result.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Token sources of a Result: where TokensOut came from.
const (
	TokensUsage   = "usage"   // the model server's usage report
	TokensCounted = "counted" // counted from the streamed chunks
)

// Job is one unit of work, as the generator enqueues it. On the wire it is
// a stream entry whose fields are all strings (see docs/job-protocol.md).
type Job struct {
	ID        string    // unique within its run; (RunID, ID) is unique
	RunID     string    // the run that enqueued it
	Enqueued  time.Time // when it was enqueued, generator clock (unix ns on the wire)
	Prompt    string    // the user message to send to the model
	MaxTokens int       // output cap; 0 leaves it to the model server
}

// Result is what a worker reports for one job. Start, FirstToken and Done
// are stamped with the worker's clock.
type Result struct {
	ID          string    // the job's ID
	RunID       string    // the job's RunID
	Worker      string    // the worker that did it
	Start       time.Time // worker began the job
	FirstToken  time.Time // first output token arrived; zero if none
	Done        time.Time // worker finished the job
	TokensIn    int       // prompt tokens, 0 when unknown
	TokensOut   int       // output tokens
	TokenSource string    // TokensUsage, TokensCounted, or "" when unknown
	Status      string    // StatusOK or StatusError
	Error       string    // the failure kind when Status is StatusError ("timeout", "http 503", …)
	Deliveries  int       // how many times the job was delivered (1 = once)
	// ClockOffset is the broker's clock minus the worker's, as the worker
	// measured it (Broker.Time, best of a few round trips); 0 when unknown.
	// The generator moves the worker's stamps onto its own clock with it.
	ClockOffset time.Duration
}

// OK reports whether the job succeeded.
func (r *Result) OK() bool { return r.Status == StatusOK }

// The wire field names, shared by the Redis broker, the docs and the tests.
const (
	fieldID          = "id"
	fieldRun         = "run"
	fieldEnqueued    = "enqueued"
	fieldPrompt      = "prompt"
	fieldMaxTokens   = "max_tokens"
	fieldWorker      = "worker"
	fieldStart       = "start"
	fieldFirstToken  = "first_token"
	fieldDone        = "done"
	fieldTokensIn    = "tokens_in"
	fieldTokensOut   = "tokens_out"
	fieldTokenSource = "token_source"
	fieldStatus      = "status"
	fieldError       = "error"
	fieldDeliveries  = "deliveries"
	fieldClockOffset = "clock_offset"
)

// fields encodes a job as stream entry fields.
func (j Job) fields() map[string]string {
	return map[string]string{
		fieldID:        j.ID,
		fieldRun:       j.RunID,
		fieldEnqueued:  unixNano(j.Enqueued),
		fieldPrompt:    j.Prompt,
		fieldMaxTokens: strconv.Itoa(j.MaxTokens),
	}
}

// fields encodes a result as stream entry fields.
func (r Result) fields() map[string]string {
	return map[string]string{
		fieldID:          r.ID,
		fieldRun:         r.RunID,
		fieldWorker:      r.Worker,
		fieldStart:       unixNano(r.Start),
		fieldFirstToken:  unixNano(r.FirstToken),
		fieldDone:        unixNano(r.Done),
		fieldTokensIn:    strconv.Itoa(r.TokensIn),
		fieldTokensOut:   strconv.Itoa(r.TokensOut),
		fieldTokenSource: r.TokenSource,
		fieldStatus:      r.Status,
		fieldError:       r.Error,
		fieldDeliveries:  strconv.Itoa(r.Deliveries),
		fieldClockOffset: strconv.FormatInt(int64(r.ClockOffset), 10),
	}
}

// parseJob decodes a job entry. Unknown fields are ignored, so the protocol
// can grow; id, run and enqueued are required.
func parseJob(f map[string]string) (Job, error) {
	p := fieldParser{entry: "job", f: f}
	j := Job{
		ID:        p.required(fieldID),
		RunID:     p.required(fieldRun),
		Enqueued:  p.time(fieldEnqueued, true),
		Prompt:    f[fieldPrompt],
		MaxTokens: p.count(fieldMaxTokens, 0),
	}
	return j, p.err
}

// parseResult decodes a result entry. id, run, start, done and status are
// required; deliveries defaults to 1.
func parseResult(f map[string]string) (Result, error) {
	p := fieldParser{entry: "result", f: f}
	r := Result{
		ID:          p.required(fieldID),
		RunID:       p.required(fieldRun),
		Worker:      f[fieldWorker],
		Start:       p.time(fieldStart, true),
		FirstToken:  p.time(fieldFirstToken, false),
		Done:        p.time(fieldDone, true),
		TokensIn:    p.count(fieldTokensIn, 0),
		TokensOut:   p.count(fieldTokensOut, 0),
		TokenSource: f[fieldTokenSource],
		Status:      p.required(fieldStatus),
		Error:       f[fieldError],
		Deliveries:  p.count(fieldDeliveries, 1),
		ClockOffset: p.offset(fieldClockOffset),
	}
	switch r.TokenSource {
	case "", TokensUsage, TokensCounted:
	default:
		p.fail(fieldTokenSource, r.TokenSource, fmt.Errorf("want %q, %q or empty", TokensUsage, TokensCounted))
	}
	switch {
	case p.err != nil:
	case r.Status == StatusOK && r.Error != "":
		p.fail(fieldError, r.Error, fmt.Errorf("status is %q: want no error kind", StatusOK))
	case r.Status == StatusError && r.Error == "":
		p.fail(fieldError, r.Error, fmt.Errorf("status is %q: want an error kind", StatusError))
	case r.Status != StatusOK && r.Status != StatusError:
		p.fail(fieldStatus, r.Status, fmt.Errorf("want %q or %q", StatusOK, StatusError))
	case r.Deliveries < 1:
		p.fail(fieldDeliveries, f[fieldDeliveries], errors.New("want 1 or more"))
	}
	return r, p.err
}

// fieldParser decodes fields, keeping the first error.
type fieldParser struct {
	entry string
	f     map[string]string
	err   error
}

func (p *fieldParser) fail(field, value string, cause error) {
	if p.err == nil {
		p.err = fmt.Errorf("%s field %q = %q: %w: %w", p.entry, field, value, ErrParse, cause)
	}
}

func (p *fieldParser) required(field string) string {
	v, ok := p.f[field]
	if !ok || v == "" {
		p.fail(field, v, errors.New("missing"))
	}
	return v
}

// time decodes unix nanoseconds; "0" and, when optional, a missing field
// are the zero time.
func (p *fieldParser) time(field string, required bool) time.Time {
	v, ok := p.f[field]
	if !ok && !required {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		p.fail(field, v, errors.New("want unix nanoseconds"))
	case n < 0:
		p.fail(field, v, errors.New("want unix nanoseconds, 0 or more"))
	case n == 0 && required:
		p.fail(field, v, errors.New("want a time, not 0"))
	case n == 0:
		return time.Time{}
	}
	return time.Unix(0, n)
}

// count decodes a non-negative integer, def when the field is missing or
// empty.
func (p *fieldParser) count(field string, def int) int {
	v := p.f[field]
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		p.fail(field, v, errors.New("want an integer, 0 or more"))
		return def
	}
	return n
}

// offset decodes a signed count of nanoseconds, 0 when the field is
// missing or empty.
func (p *fieldParser) offset(field string) time.Duration {
	v := p.f[field]
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail(field, v, errors.New("want an integer of nanoseconds, signed"))
		return 0
	}
	return time.Duration(n)
}

// unixNano encodes t as unix nanoseconds, "0" for the zero time.
func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// stringFields converts go-redis's field values, which are strings for
// stream entries, to a string map.
func stringFields(values map[string]any) map[string]string {
	f := make(map[string]string, len(values))
	for k, v := range values {
		if s, ok := v.(string); ok {
			f[k] = s
		} else {
			f[k] = fmt.Sprint(v)
		}
	}
	return f
}

// fieldArgs flattens fields into XADD's name value … arguments, sorted by
// name so entries are stable on the wire.
func fieldArgs(f map[string]string) []any {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	args := make([]any, 0, 2*len(f))
	for _, k := range names {
		args = append(args, k, f[k])
	}
	return args
}
