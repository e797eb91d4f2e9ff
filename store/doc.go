// Package store keeps runs, their timeline ticks and their raw records: the
// tare.Store interface twice, on SQLite (embedded, pure Go; the default) and
// on PostgreSQL (a store shared by a team).
//
// # Layout
//
// One row per run in runs, one per tick in ticks, and the raw records in
// result_batches: one row per batch of up to 4,096 records of a run, in seq
// order, encoded into one compact blob (batch.go: columns of varint
// differences, about 25 bytes for an HTTP record). Batches of one run may
// overlap in seq, as requests complete out of order; StreamResults merges
// them. Stores made before schema version 3 keep their runs' records in
// results, one row each, read beside the batches. Instants are int64
// nanoseconds since the Unix epoch (the monotonic reading a tare.Result
// carries is lost in storage), a zero time.Time is absent (NULL in a
// column), and times read back are in UTC. Child rows point at the run's
// integer key, not at its 36-byte id. The hosts' calendars are apart from
// the runs: one row per sample in calendar_samples, keyed by host, and the
// windows each protocol chose from a calendar in protocol_windows. An A/B
// run (tare ab) is one row of ab_runs, its tare.ab/v1 as JSON; its trials,
// which that JSON names, are runs.
// The schema is versioned by embedded migrations applied on open.
//
// # Writes stream
//
// A Writer buffers results and ticks off the load engine's hot path and
// writes them in batches from one goroutine; every batch is one transaction
// and bumps the run's heartbeat. A run killed mid-way keeps every batch
// written before it died.
//
// # Live or dead
//
// A run is written with status running and finished by FinishRun. Readers
// (FindRuns, FindSummary) report a run still marked running as interrupted
// when either
//
//   - its writer ran on this machine, in this PID namespace, and that process
//     (same PID and start time) is gone, which is known at once where the
//     store has Settings.Processes to ask (tare gives it host.Processes);
//     or
//   - its heartbeat is older than StaleAfter (DefaultStaleAfter, a minute),
//     which is how a run written from another machine is judged. A Writer
//     beats every DefaultHeartbeat even when there is nothing to write.
//
// Otherwise it reads as running. The stored status is not changed by a
// read: a writer that was only stalled can still finish its run, and an
// interrupted run's EndedAt is its last heartbeat, the last instant it was
// known to be alive.
package store
