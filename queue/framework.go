package queue

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// Kinds a framework's job fails with, beside KindTimeout and
// KindUnavailable.
const (
	// KindUnknownTask: the worker does not know the task (Celery's
	// NotRegistered) or could not import the function (RQ).
	KindUnknownTask = "unknown task"
	// KindRaisedPrefix starts the kind of a job whose task raised: "task
	// raised ValueError".
	KindRaisedPrefix = "task raised "
	// KindTaskFailed: the job failed without an exception type (an RQ
	// work horse that was killed).
	KindTaskFailed = "task failed"
	// KindRevoked: the job was revoked (Celery), stopped or canceled (RQ).
	KindRevoked = "task revoked"
	// KindUnconfirmed: the broker did not confirm the job's message (an
	// AMQP nack, or the connection closed before the confirm): it may or
	// may not be in the queue, so it is neither waited for nor counted as
	// never sent.
	KindUnconfirmed = "publish not confirmed"
	// KindUnroutable: the broker had no queue to put the job's message in
	// (AMQP: the queue does not exist, and returned the message).
	KindUnroutable = "no such queue"
)

// ErrUnconfirmed is what Source.Enqueue returns, wrapped, when the broker
// did not confirm the job's message; the Target counts the job
// KindUnconfirmed.
var ErrUnconfirmed = errors.New("publish not confirmed by the broker")

// RaisedKind is the kind of a job whose task raised exception type exc.
func RaisedKind(exc string) string {
	if exc == "" {
		return KindTaskFailed
	}
	return KindRaisedPrefix + exc
}

// FrameworkConfig is what a job of a Celery or RQ queue carries: the
// task's arguments, in which "{{seq}}", "{{id}}" and "{{prompt}}" are
// replaced per job (see JobArgs).
type FrameworkConfig struct {
	Args JobArgs
	// Timeout is the job's time limit, told to RQ as the job's timeout and
	// its queued-job TTL, and to Celery as the task's expiry; 0 leaves the
	// framework's default.
	Timeout time.Duration
}

// FrameworkJobID is the framework's id of job j: "tare-<run>-<seq>", so
// tare cleanup finds exactly the jobs tare made by their prefix.
func FrameworkJobID(j Job) string { return JobIDPrefix + j.RunID + "-" + j.ID }

// JobIDPrefix starts the framework id of every job tare enqueues.
const JobIDPrefix = "tare-"

// SortWorkers sorts workers by name.
func SortWorkers(ws []WorkerInfo) {
	slices.SortFunc(ws, func(a, b WorkerInfo) int { return cmp.Compare(a.Name, b.Name) })
}
