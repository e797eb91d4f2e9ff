package queue

import (
	"context"
	"time"
)

// Source is the generator's side of a job queue: what a Target needs. A
// Broker is one (tare's own job protocol); Celery and RQ are the others,
// the queues of the job frameworks users already run, whose workers tare
// loads unchanged.
type Source interface {
	// Queue returns the queue's name.
	Queue() string
	// Enqueue adds a job at the tail of the queue.
	Enqueue(ctx context.Context, job Job) error
	// Results returns up to limit results published after cursor ("" is
	// the beginning), waiting up to block for one, and the cursor to pass
	// next; ErrLost when the queue's state was lost since the last call.
	Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]Result, string, error)
	// Depth returns the queue's backlog now.
	Depth(ctx context.Context) (Depth, error)
	// Time reads the clock the queue's hosts share.
	Time(ctx context.Context) (time.Time, error)
	// Workers lists the live workers.
	Workers(ctx context.Context) ([]WorkerInfo, error)
	// Close releases the connections; it deletes nothing.
	Close() error
}

// noter is a Source with notes for the run's verdict (see Target.Notes).
type noter interface{ Notes() []string }

// hinter is a Source that says how to start a worker of its queue.
type hinter interface{ WorkerHint() string }

// taskChecker is a Source that can check, before the load, that its
// workers know the task its jobs name (see Celery.CheckTask).
type taskChecker interface {
	CheckTask(ctx context.Context) error
}
