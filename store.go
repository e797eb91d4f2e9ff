package tare

import (
	"context"
	"time"
)

// Store keeps runs, their ticks and their raw records, and the hosts'
// calendars. Writes stream while a run goes, so a run killed mid-way is
// readable and marked interrupted.
type Store interface {
	// CreateRun records a new run with status running. The run's ID must be
	// set and unique.
	CreateRun(ctx context.Context, run Run, env Env) error
	// AppendResults adds raw records to a run. Appending to a finished run,
	// or a sequence number the run already has, is an *Error with code
	// EINVALID.
	AppendResults(ctx context.Context, runID string, results []Result) error
	// AppendTicks adds timeline ticks to a run.
	AppendTicks(ctx context.Context, runID string, ticks []Tick) error
	// Heartbeat says the run's writer is alive, so that a run whose
	// process died can be told from one still going.
	Heartbeat(ctx context.Context, runID string) error
	// FinishRun stores the run's final status and summary.
	FinishRun(ctx context.Context, summary Summary) error
	// FindRuns lists runs matching the filter, newest first.
	FindRuns(ctx context.Context, filter RunFilter) ([]Run, error)
	// FindSummary returns the stored summary of a run. A run that never
	// finished has a summary built from its run row with status
	// interrupted. An unknown id is an *Error with code ENOTFOUND.
	FindSummary(ctx context.Context, runID string) (Summary, error)
	// FindTicks returns a run's ticks in time order; an unknown id is an
	// *Error with code ENOTFOUND.
	FindTicks(ctx context.Context, runID string) ([]Tick, error)
	// StreamResults calls fn for each raw record of a run in arrival order,
	// without loading them all; it stops at fn's first error and returns it.
	// An unknown id is an *Error with code ENOTFOUND.
	StreamResults(ctx context.Context, runID string, fn func(*Result) error) error
	// DeleteRun removes a run and everything recorded for it. An unknown id
	// is an *Error with code ENOTFOUND.
	DeleteRun(ctx context.Context, runID string) error
	// Close releases the store.
	Close() error

	// The store keeps the hosts' calendars and the A/B runs too.
	CalendarStore
	ABStore
}

// ProcessID names one process of one machine for as long as it lives, so
// that a reader of a run may tell whether the run's writer still runs.
// Every part is needed: a PID means one process only within one boot and
// one PID namespace, and only until it is reused, which the start time
// tells. The zero ProcessID is a process nobody can name.
type ProcessID struct {
	Boot  string // /proc/sys/kernel/random/boot_id
	PIDNS string // the link /proc/self/ns/pid, e.g. "pid:[4026531836]"
	PID   int
	Start uint64 // clock ticks after boot, field 22 of /proc/<pid>/stat
}

// Processes is the process table as this process sees it: the store
// records Self as the writer of the runs it creates, and asks Alive of the
// writer of a run still marked running (host.Processes reads /proc).
type Processes interface {
	// Self is this process; the zero ProcessID when it cannot be named.
	Self() ProcessID
	// Alive reports whether p is a process still running; known is false
	// when p lives where this process cannot look (another machine, boot
	// or PID namespace).
	Alive(p ProcessID) (alive, known bool)
}

// RunFilter selects runs; zero fields match everything.
type RunFilter struct {
	ID       string
	Label    string
	Window   string
	Target   string // substring match
	Protocol string
	Since    time.Time
	Limit    int
}
