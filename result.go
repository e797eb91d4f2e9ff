package tare

import (
	"context"
	"time"
)

// Result is one request or job as the load engine saw it. A failed request is
// a measurement, not an error: it is recorded in Err and counted by stats.
//
// The clocks of a request:
//
//	Scheduled ──send lag──▶ Sent ──────────service──────────▶ Done
//	    └───────────────────────latency─────────────────────────┘
//
// and of a queue job, whose Sent is its enqueue and whose service is the
// worker's own time:
//
//	Scheduled ──send lag──▶ Sent ──queue wait──▶ Started ──service──▶ Done
//	    └──────────────────────────end-to-end latency─────────────────┘
//
// Latency is measured from Scheduled, never from Sent, so a stalled target
// or a lagging generator cannot hide queueing delay (coordinated omission).
type Result struct {
	Seq       uint64    // arrival number, from 0
	Scheduled time.Time // when the arrival process said it should start
	Sent      time.Time // when the request actually left (job enqueued)
	FirstByte time.Time // first response byte, or first content token; zero if none
	Done      time.Time // when the response (or job result) was complete
	Dropped   bool      // never sent: the in-flight cap was reached

	Status int    // HTTP status code, 0 when there was none
	Err    string // error kind ("timeout", "refused", "http 503", …); "" when ok
	// Detail is the failure in words, the server's own message where it
	// gave one ("status 400: model is required"); never a credential.
	// Not stored: the summary keeps one per kind (Summary.ErrorMessages).
	Detail   string
	BytesIn  int64 // response body bytes read
	BytesOut int64 // request body bytes written

	// Redirects is how many redirects the request followed: the server
	// answered it Redirects + 1 times. Status is that of the last answer.
	Redirects int

	// Queue jobs only.
	Started    time.Time // when a worker began the job; zero otherwise
	Worker     string    // which worker did it
	Deliveries int       // how many times the job was delivered (1 = once)

	// TargetIndex is which request of a targets file the arrival took
	// (httptarget.Mix), from 0; 0 when there was one request.
	TargetIndex int
	// Conn is the connection the request was last sent on, numbered by
	// the target's ConnCounter from 1; 0 when it was sent on none (a
	// connect that failed) or its target does not count them. Not stored.
	Conn uint64

	// Model calls only.
	OutputTokens int    // generated tokens
	TokenSource  string // where OutputTokens came from: "usage" or "counted"
	// PromptTokens is the input's length in tokens, from the server's
	// usage; PromptTokenSource says so ("usage"), and is "" when the
	// server did not say.
	PromptTokens      int
	PromptTokenSource string
	// Class names the part of a model load the call belongs to, for
	// figures per class: a conversation's "turn 3", a shared prefix
	// group's "group first" or "group later"; "" for none. Not stored.
	Class string
	// Conversation numbers the conversation the call is a turn of, from
	// 1 (the arrival number of its first turn, plus 1); 0 for none. Not
	// stored.
	Conversation uint64
	// PromptWords is tare's own count of the prompt it sent: the words of
	// its messages, which is how tare's prompt lengths are counted (a
	// synthetic prompt of 512 tokens is 512 words); 0 when not counted.
	// Not stored: the summary compares it with PromptTokens.
	PromptWords int
}

// OK reports whether the request was sent and succeeded.
func (r *Result) OK() bool { return !r.Dropped && r.Err == "" }

// Latency is Done − Scheduled: what the user of the system waited.
func (r *Result) Latency() time.Duration { return r.Done.Sub(r.Scheduled) }

// Service is the time the target itself spent on the request: Done − Sent
// for a request, what a closed-loop tool would have reported; for a queue
// job a worker started, Done − Started, the worker's own time (the wait
// before it is QueueWait, and Done − Sent would count it twice). A job no
// worker reported (a timeout, a run that ended first) has no Started and
// counts from its enqueue, as a request that got no answer does.
func (r *Result) Service() time.Duration {
	if !r.Started.IsZero() {
		return r.Done.Sub(r.Started)
	}
	return r.Done.Sub(r.Sent)
}

// SendLag is Sent − Scheduled: how late the generator was. A lagging
// generator is itself a symptom of a starved host.
func (r *Result) SendLag() time.Duration { return r.Sent.Sub(r.Scheduled) }

// QueueWait is Started − Sent for queue jobs, and 0 for anything else.
func (r *Result) QueueWait() time.Duration {
	if r.Started.IsZero() {
		return 0
	}
	return r.Started.Sub(r.Sent)
}

// FirstIsToken reports whether FirstByte is the first content token of a
// model call (a model target, or the worker's call for a queue job) rather
// than the first response byte of a plain HTTP request: what tells a time
// to first token (TTFT) from a time to first byte (TTFB), both of them
// FirstByte − Sent.
func (r *Result) FirstIsToken() bool {
	return r.OutputTokens > 0 || r.TokenSource != "" || !r.Started.IsZero()
}

// TTFT is the time to the first byte or token from the start of the call:
// FirstByte − Sent, or for a queue job FirstByte − Started, since the model
// call begins when a worker takes the job (the wait before is QueueWait).
// It is 0 when the response had no first byte. FirstIsToken says which of
// the two it is.
func (r *Result) TTFT() time.Duration {
	switch {
	case r.FirstByte.IsZero():
		return 0
	case !r.Started.IsZero():
		return r.FirstByte.Sub(r.Started)
	}
	return r.FirstByte.Sub(r.Sent)
}

// TPOT is the time per output token after the first, vLLM's definition:
// (Done − FirstByte) / (OutputTokens − 1); 0 when there were fewer than two
// tokens or no first token.
func (r *Result) TPOT() time.Duration {
	if r.OutputTokens < 2 || r.FirstByte.IsZero() {
		return 0
	}
	return r.Done.Sub(r.FirstByte) / time.Duration(r.OutputTokens-1)
}

// Target is something tare sends load to: an HTTP endpoint, a model
// endpoint, a job queue.
type Target interface {
	// Do performs one request. The engine has set Seq, Scheduled and Sent;
	// Do sets Done and whatever else it measured. A failed request is
	// recorded in res.Err, never returned or panicked. Do must return
	// promptly once ctx is cancelled.
	Do(ctx context.Context, res *Result)
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, res *Result)

// Do calls f(ctx, res).
func (f TargetFunc) Do(ctx context.Context, res *Result) { f(ctx, res) }
