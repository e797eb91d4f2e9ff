package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// ErrLost is returned by Broker.Results when the queue's state was lost since
// the previous call (a Redis server restarted without persistence, or the
// queue was cleaned up): jobs enqueued before are gone, and the caller should
// count them as failed and read results again from the start.
var ErrLost = errors.New("queue state lost")

// ErrClosed is returned by a closed broker.
var ErrClosed = errors.New("queue broker closed")

// ErrNotPending is returned by Broker.Complete when the delivery is no
// longer pending: another consumer claimed the job and completed it first,
// or the queue's state was lost. Nothing was published; retrying is
// pointless.
var ErrNotPending = errors.New("job no longer pending")

// Broker is a job queue with consumer-group semantics, shared by the
// generator (Target) and the workers. A job is delivered to one consumer at
// a time; it stays pending until completed, and a job pending for longer
// than an idle limit can be claimed by another consumer, which counts a new
// delivery. Memory and Redis implement it with the same semantics.
//
// A consumer is one worker (its name), however many jobs it runs at once.
type Broker interface {
	// Queue returns the queue's name.
	Queue() string

	// Enqueue adds a job at the tail of the queue.
	Enqueue(ctx context.Context, job Job) error
	// Fetch delivers up to limit jobs never delivered before to consumer,
	// waiting up to block for one to arrive (0 returns at once). No job is
	// not an error: it returns none. A job entry that cannot be decoded is
	// delivered with Delivery.Err set, so the consumer can acknowledge it.
	Fetch(ctx context.Context, consumer string, limit int, block time.Duration) ([]Delivery, error)
	// Claim takes over up to limit jobs pending on any consumer (this one
	// included) that have not been delivered or touched for minIdle: their
	// consumer is presumed dead. Each claim counts a delivery.
	Claim(ctx context.Context, consumer string, minIdle time.Duration, limit int) ([]Delivery, error)
	// Touch resets the idle time of jobs consumer is still working on, so
	// a slow job is not claimed by another consumer. It does not count a
	// delivery.
	Touch(ctx context.Context, consumer string, ids ...string) error
	// Complete acknowledges the delivery and publishes the job's result,
	// both or neither: a worker that dies in between leaves the job
	// pending. Only the first completion of a job publishes; a later one
	// (a worker that was slow, not dead, after its job was claimed and
	// done elsewhere) returns ErrNotPending.
	Complete(ctx context.Context, d Delivery, res Result) error
	// Ack acknowledges deliveries without a result (entries that could not
	// be decoded, so no result can name them).
	Ack(ctx context.Context, ids ...string) error

	// Results returns up to limit results published after cursor ("" is the
	// beginning), waiting up to block for one (0 returns at once), and the
	// cursor to pass next. It returns ErrLost when the queue's state was
	// lost since the previous call; read again from "".
	Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]Result, string, error)
	// Depth returns the queue's backlog now.
	Depth(ctx context.Context) (Depth, error)
	// Time reads the broker's clock, the one clock every host of a run
	// shares: workers and generators measure their offsets against it.
	Time(ctx context.Context) (time.Time, error)

	// Stop tells the queue's workers to stop: they finish what they hold
	// and exit. The signal stays until Cleanup.
	Stop(ctx context.Context) error
	// Stopped reports whether Stop was called.
	Stopped(ctx context.Context) (bool, error)

	// Register records a live worker, or refreshes it; it is forgotten when
	// ttl passes without another Register, so a killed worker goes away
	// by itself.
	Register(ctx context.Context, w WorkerInfo, ttl time.Duration) error
	// Unregister forgets a worker at once.
	Unregister(ctx context.Context, name string) error
	// Workers lists the live workers, by name.
	Workers(ctx context.Context) ([]WorkerInfo, error)

	// Cleanup deletes all of the queue's state (jobs, results, stop signal,
	// registrations) and nothing else, and returns the names of the keys
	// it deleted, sorted.
	Cleanup(ctx context.Context) ([]string, error)
	// Close releases the broker's connections; it does not delete anything.
	Close() error
}

// Delivery is a job handed to a consumer.
type Delivery struct {
	ID    string // the delivery's id (the stream entry id): what Complete, Touch and Ack take
	Job   Job
	Count int   // deliveries so far, this one included (1 = first)
	Err   error // the entry could not be decoded (wraps ErrParse); Job holds what could be read
}

// Depth is a queue's backlog at one instant.
type Depth struct {
	Waiting int64 // enqueued and not yet delivered: the consumer group's lag, the queue depth
	Pending int64 // delivered and not yet completed
	// OldestPending is the age of the oldest pending job since it was
	// enqueued, by the broker's clock; 0 when none is pending.
	OldestPending time.Duration
}

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	Name        string    `json:"name"` // consumer name, unique among live workers
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Started     time.Time `json:"started"`
	Concurrency int       `json:"concurrency"`
	// ClientAddr and ServerAddr are the two ends of the worker's
	// connection to the broker, as the broker sees them (CLIENT LIST's
	// addr and laddr), for a worker that registers no pid (BullMQ): the
	// process holding that connection on this host is the worker. Empty
	// for the others.
	ClientAddr string `json:"client_addr,omitempty"`
	ServerAddr string `json:"server_addr,omitempty"`
}

// KeyPrefix is the prefix of every key of queue q: "tare:" + q + ":".
func KeyPrefix(q string) string { return "tare:" + q + ":" }

// The keys and names of a queue, after KeyPrefix.
const (
	keyJobs    = "jobs"    // stream of jobs, read by consumer group Group
	keyResults = "results" // stream of results, read by the generator
	keyStop    = "stop"    // string: present once Stop was called
	keyEpoch   = "epoch"   // string: a random token; gone means the state was lost
	keyWorker  = "worker:" // string per worker, JSON WorkerInfo, with a TTL
)

// Group is the consumer group of every jobs stream.
const Group = "workers"

// DefaultMaxResults bounds the results stream: publishing trims it to about
// this many entries, so a long run cannot fill the server's memory. A
// generator further behind than this loses results (its jobs end
// "unfinished").
const DefaultMaxResults = 100000

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateName checks a queue name: 1 to 64 letters, digits, '.', '_' or
// '-'. The restriction keeps key prefixes unambiguous (no ':') and safe in
// a SCAN pattern (no glob characters). A bad name is a *tare.Error with
// code EINVALID.
func ValidateName(q string) error {
	if !nameRE.MatchString(q) {
		return tare.Errorf(tare.EINVALID, "queue name %q: want 1 to 64 letters, digits, '.', '_' or '-'", q)
	}
	return nil
}

// validateConsumer checks a worker or consumer name: not empty, no control
// characters, at most 128 bytes.
func validateConsumer(name string) error {
	if name == "" || len(name) > 128 {
		return tare.Errorf(tare.EINVALID, "worker name %q: want 1 to 128 characters", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return tare.Errorf(tare.EINVALID, "worker name %q: want no control characters", name)
		}
	}
	return nil
}

// WaitWorkers polls b every poll until no worker is registered, as cleanup
// does before deleting a queue's keys: live workers leave when stopped, and
// a killed worker's registration expires by itself. When ctx ends first it
// returns an error naming the workers still there.
func WaitWorkers(ctx context.Context, b Broker, poll time.Duration) error {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var last []WorkerInfo // the last successful listing
	var lastErr error
	for {
		ws, err := b.Workers(ctx)
		switch {
		case err == nil && len(ws) == 0:
			return nil
		case err == nil:
			last, lastErr = ws, nil
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil || last == nil {
				return fmt.Errorf("wait for the workers of queue %q to leave: %w", b.Queue(), errors.Join(lastErr, ctx.Err()))
			}
			names := make([]string, len(last))
			for i, w := range last {
				names[i] = fmt.Sprintf("%s (pid %d on %s)", w.Name, w.PID, w.Host)
			}
			return fmt.Errorf("wait for the workers of queue %q to leave: still there: %s: %w",
				b.Queue(), strings.Join(names, ", "), ctx.Err())
		case <-t.C:
		}
	}
}

// ClockOffset measures the broker's clock minus the local one (now),
// best of n round trips (tare.MeasureOffset).
func ClockOffset(ctx context.Context, b Source, now func() time.Time, n int) (offset, rtt time.Duration, err error) {
	offset, rtt, _, err = tare.MeasureOffset(now, func() (time.Time, error) { return b.Time(ctx) }, n)
	if err != nil {
		return 0, 0, fmt.Errorf("read the clock of queue %q: %w", b.Queue(), err)
	}
	return offset, rtt, nil
}
