package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// DefaultStaleAfter is how old a running run's heartbeat may be before
// readers on another machine report the run as interrupted.
const DefaultStaleAfter = time.Minute

// querier is what the shared queries need from a database or a transaction.
// Queries are written with ? placeholders; a back end rewrites them to its
// own.
type querier interface {
	exec(ctx context.Context, q string, args ...any) (rowsAffected int64, err error)
	query(ctx context.Context, q string, args ...any) (rows, error)
	queryRow(ctx context.Context, q string, args ...any) row
}

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type row interface {
	Scan(dest ...any) error
}

// backend is one database: the queries, a transaction, and the few things
// the two dialects do differently.
type backend interface {
	querier
	// inTx runs fn in one transaction, committed when fn returns nil.
	inTx(ctx context.Context, fn func(q querier) error) error
	// insertTicks writes ticks numbered from first; q is inTx's.
	insertTicks(ctx context.Context, q querier, run int64, first int, ticks []tare.Tick) error
	// contains is an SQL condition true when column contains the next
	// argument, case-sensitively.
	contains(column string) string
	// isUnique reports whether err is a unique-constraint violation.
	isUnique(err error) bool
	close() error
}

// Settings are the knobs both stores share. Set them before using the
// store; the zero value means the defaults.
type Settings struct {
	// Now is the clock that stamps heartbeats and judges their age;
	// time.Now when nil.
	Now func() time.Time
	// StaleAfter is the heartbeat age after which a run still marked
	// running reads as interrupted; DefaultStaleAfter when zero.
	StaleAfter time.Duration
	// Processes names this process as the writer of the runs it creates,
	// and tells whether a run's writer still runs (host.Processes); nil
	// records no writer and judges liveness by the heartbeat alone.
	Processes tare.Processes
}

// core is the tare.Store both back ends share: the queries are the same
// SQL, and only how rows get in differs.
type core struct {
	set *Settings // the embedding store's
	b   backend
}

func (c *core) now() time.Time {
	if c.set.Now != nil {
		return c.set.Now()
	}
	return time.Now()
}

// me is this process, recorded as the writer of the runs it creates.
func (c *core) me() tare.ProcessID {
	if c.set.Processes == nil {
		return tare.ProcessID{}
	}
	return c.set.Processes.Self()
}

func (c *core) staleAfter() time.Duration {
	if c.set.StaleAfter > 0 {
		return c.set.StaleAfter
	}
	return DefaultStaleAfter
}

func notFound(runID string) error {
	return tare.Errorf(tare.ENOTFOUND, "run %q not found", runID)
}

// CreateRun records a new run with status running, owned by this process.
// Keys of run.Config that look like secrets are redacted again here, in
// case the caller missed one. A duplicate or empty id is a *tare.Error
// with code EINVALID.
func (c *core) CreateRun(ctx context.Context, run tare.Run, env tare.Env) error {
	if run.ID == "" {
		return tare.Errorf(tare.EINVALID, "create run: the run has no id (make one with store.NewRunID)")
	}
	cfg, err := encodeConfig(tare.RedactConfig(run.Config))
	if err != nil {
		return fmt.Errorf("create run %q: %w", run.ID, err)
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("create run %q: encode env: %w", run.ID, err)
	}
	now := c.now()
	started := run.StartedAt
	if started.IsZero() {
		started = now
	}
	_, err = c.b.exec(ctx, `INSERT INTO runs (id, label, window_name, target, arrival, protocol,
		version, config, env, status, started_at, heartbeat_at, owner)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, run.Label, run.Window, tare.RedactText(run.Target), run.Arrival, run.Protocol,
		run.Version, cfg, string(envJSON), string(tare.StatusRunning), started.UnixNano(),
		now.UnixNano(), formatOwner(c.me()))
	switch {
	case c.b.isUnique(err):
		return tare.Errorf(tare.EINVALID, "create run: run id %q already exists", run.ID)
	case err != nil:
		return fmt.Errorf("create run %q: %w", run.ID, err)
	}
	return nil
}

// openRun finds a running run for appending and bumps its heartbeat: an
// unknown id is ENOTFOUND, a finished run EINVALID.
func (c *core) openRun(ctx context.Context, q querier, runID string) (int64, error) {
	var pk int64
	var status string
	err := q.queryRow(ctx, `SELECT pk, status FROM runs WHERE id = ?`, runID).Scan(&pk, &status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, notFound(runID)
	case err != nil:
		return 0, err
	case status != string(tare.StatusRunning):
		return 0, tare.Errorf(tare.EINVALID, "run %q is %s: records can be added only while it runs", runID, status)
	}
	if _, err := q.exec(ctx, `UPDATE runs SET heartbeat_at = ? WHERE pk = ?`, c.now().UnixNano(), pk); err != nil {
		return 0, err
	}
	return pk, nil
}

// AppendResults adds raw records to a running run in one transaction and
// bumps its heartbeat. A seq already stored for the run is EINVALID.
func (c *core) AppendResults(ctx context.Context, runID string, results []tare.Result) error {
	err := c.b.inTx(ctx, func(q querier) error {
		pk, err := c.openRun(ctx, q, runID)
		if err != nil || len(results) == 0 {
			return err
		}
		return c.insertResults(ctx, q, pk, results)
	})
	switch {
	case c.b.isUnique(err):
		return tare.Errorf(tare.EINVALID, "append results to run %q: a result seq in the batch is already stored", runID)
	case err != nil:
		return fmt.Errorf("append %d results to run %q: %w", len(results), runID, err)
	}
	return nil
}

// AppendTicks adds timeline ticks to a running run in one transaction,
// after those already stored, and bumps its heartbeat.
func (c *core) AppendTicks(ctx context.Context, runID string, ticks []tare.Tick) error {
	err := c.b.inTx(ctx, func(q querier) error {
		pk, err := c.openRun(ctx, q, runID)
		if err != nil || len(ticks) == 0 {
			return err
		}
		var next int
		err = q.queryRow(ctx, `SELECT COALESCE(MAX(idx) + 1, 0) FROM ticks WHERE run = ?`, pk).Scan(&next)
		if err != nil {
			return err
		}
		return c.b.insertTicks(ctx, q, pk, next, ticks)
	})
	if err != nil {
		return fmt.Errorf("append %d ticks to run %q: %w", len(ticks), runID, err)
	}
	return nil
}

// Heartbeat tells readers the run's writer is alive when it has had
// nothing to write for a while; Writer calls it. An unknown id is
// ENOTFOUND.
func (c *core) Heartbeat(ctx context.Context, runID string) error {
	n, err := c.b.exec(ctx, `UPDATE runs SET heartbeat_at = ? WHERE id = ?`, c.now().UnixNano(), runID)
	switch {
	case err != nil:
		return fmt.Errorf("heartbeat of run %q: %w", runID, err)
	case n == 0:
		return notFound(runID)
	}
	return nil
}

// FinishRun stores the run's final status (complete when empty) and its
// summary, whose run config is redacted like CreateRun's. An unknown run id
// is ENOTFOUND; a status of running is EINVALID.
func (c *core) FinishRun(ctx context.Context, summary tare.Summary) error {
	id := summary.Run.ID
	switch summary.Run.Status {
	case "":
		summary.Run.Status = tare.StatusComplete
	case tare.StatusComplete, tare.StatusInterrupted, tare.StatusFailed:
	default:
		return tare.Errorf(tare.EINVALID, "finish run %q: status %q is not a final status (complete, interrupted or failed)",
			id, summary.Run.Status)
	}
	if id == "" {
		return tare.Errorf(tare.EINVALID, "finish run: the summary's run has no id")
	}
	now := c.now()
	if summary.Run.EndedAt.IsZero() {
		summary.Run.EndedAt = now
	}
	summary.Run.Config = tare.RedactConfig(summary.Run.Config)
	summary.Run.Target = tare.RedactText(summary.Run.Target)
	js, err := json.Marshal(summary)
	if err != nil {
		return fmt.Errorf("finish run %q: encode summary: %w", id, err)
	}
	n, err := c.b.exec(ctx, `UPDATE runs SET status = ?, ended_at = ?, heartbeat_at = ?, summary = ?
		WHERE id = ?`, string(summary.Run.Status), summary.Run.EndedAt.UnixNano(), now.UnixNano(), string(js), id)
	switch {
	case err != nil:
		return fmt.Errorf("finish run %q: %w", id, err)
	case n == 0:
		return notFound(id)
	}
	return nil
}

// live turns a run stored as running into an interrupted one when its
// writer is known to be gone or its heartbeat is stale (see the package
// documentation); the run then ended at its last heartbeat.
func (c *core) live(r *tare.Run, s *runScan) {
	if r.Status != tare.StatusRunning {
		return
	}
	dead := c.now().Sub(time.Unix(0, s.heartbeatAt)) > c.staleAfter()
	if o, ok := parseOwner(s.owner); ok && !dead && c.set.Processes != nil {
		alive, known := c.set.Processes.Alive(o)
		dead = known && !alive
	}
	if dead {
		r.Status = tare.StatusInterrupted
		r.EndedAt = time.Unix(0, s.heartbeatAt).UTC()
	}
}

// FindRuns lists runs matching the filter, newest first. A negative limit
// is EINVALID.
func (c *core) FindRuns(ctx context.Context, f tare.RunFilter) ([]tare.Run, error) {
	if f.Limit < 0 {
		return nil, tare.Errorf(tare.EINVALID, "find runs: limit %d is negative; use 0 for no limit", f.Limit)
	}
	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if f.ID != "" {
		add("id = ?", f.ID)
	}
	if f.Label != "" {
		add("label = ?", f.Label)
	}
	if f.Window != "" {
		add("window_name = ?", f.Window)
	}
	if f.Target != "" {
		add(c.b.contains("target"), f.Target)
	}
	if f.Protocol != "" {
		add("protocol = ?", f.Protocol)
	}
	if !f.Since.IsZero() {
		add("started_at >= ?", f.Since.UnixNano())
	}
	q := "SELECT " + runColumns + " FROM runs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, id DESC"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rs, err := c.b.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find runs: %w", err)
	}
	defer rs.Close()
	var runs []tare.Run
	s := newRunScan()
	for rs.Next() {
		if err := rs.Scan(s.dest...); err != nil {
			return nil, fmt.Errorf("find runs: %w", err)
		}
		r, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("find runs: %w", err)
		}
		c.live(&r, s)
		runs = append(runs, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("find runs: %w", err)
	}
	return runs, nil
}

// FindSummary returns the stored summary of a finished run. For a run that
// never finished it builds one from the run row and counts of what was
// stored: status interrupted (or running, while its writer lives), the
// request counts, the number of host ticks, every other figure null, and a
// warning saying so. An unknown id is ENOTFOUND.
func (c *core) FindSummary(ctx context.Context, runID string) (tare.Summary, error) {
	s := newRunScan()
	var pk int64
	var env string
	var stored sql.NullString
	dest := append([]any{&pk}, s.dest...)
	err := c.b.queryRow(ctx, "SELECT pk, "+runColumns+", env, summary FROM runs WHERE id = ?", runID).
		Scan(append(dest, &env, &stored)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return tare.Summary{}, notFound(runID)
	case err != nil:
		return tare.Summary{}, fmt.Errorf("find summary of run %q: %w", runID, err)
	}
	if stored.Valid {
		var sum tare.Summary
		if err := json.Unmarshal([]byte(stored.String), &sum); err != nil {
			return tare.Summary{}, fmt.Errorf("find summary of run %q: %w: summary %q: %w",
				runID, ErrDecode, clip(stored.String), err)
		}
		return sum, nil
	}
	run, err := s.run()
	if err != nil {
		return tare.Summary{}, fmt.Errorf("find summary: %w", err)
	}
	c.live(&run, s)
	sum := tare.Summary{Schema: tare.SummarySchema, Run: run}
	if err := json.Unmarshal([]byte(env), &sum.Env); err != nil {
		return tare.Summary{}, fmt.Errorf("find summary of run %q: %w: env %q: %w", runID, ErrDecode, clip(env), err)
	}
	req := &sum.Requests
	// Per-record rows are those of tare before schema version 3.
	err = c.b.queryRow(ctx, `SELECT COUNT(*),
		COALESCE(SUM(CASE WHEN dropped THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN NOT dropped AND err IS NOT NULL THEN 1 ELSE 0 END), 0)
		FROM results WHERE run = ?`, pk).Scan(&req.Total, &req.Dropped, &req.Errors)
	if err != nil {
		return tare.Summary{}, fmt.Errorf("find summary of run %q: count results: %w", runID, err)
	}
	var total, dropped, errs int
	err = c.b.queryRow(ctx, `SELECT COALESCE(SUM(records), 0), COALESCE(SUM(dropped), 0), COALESCE(SUM(errors), 0)
		FROM result_batches WHERE run = ?`, pk).Scan(&total, &dropped, &errs)
	if err != nil {
		return tare.Summary{}, fmt.Errorf("find summary of run %q: count result batches: %w", runID, err)
	}
	req.Total, req.Dropped, req.Errors = req.Total+total, req.Dropped+dropped, req.Errors+errs
	req.OK = req.Total - req.Dropped - req.Errors
	var ticks int
	err = c.b.queryRow(ctx, `SELECT COUNT(*), COUNT(cpu) FROM ticks WHERE run = ?`, pk).Scan(&ticks, &sum.Host.Ticks)
	if err != nil {
		return tare.Summary{}, fmt.Errorf("find summary of run %q: count ticks: %w", runID, err)
	}
	what := "was interrupted"
	if run.Status == tare.StatusRunning {
		what = "is still running"
	}
	sum.Verdict.Warnings = []string{fmt.Sprintf(
		"run %s: its figures were never computed; %d raw records and %d ticks were stored, up to %s",
		what, req.Total, ticks, time.Unix(0, s.heartbeatAt).UTC().Format(time.RFC3339))}
	return sum, nil
}

// runKey returns the integer key of a run; an unknown id is ENOTFOUND.
func runKey(ctx context.Context, q querier, runID string) (int64, error) {
	var pk int64
	err := q.queryRow(ctx, `SELECT pk FROM runs WHERE id = ?`, runID).Scan(&pk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound(runID)
	}
	return pk, err
}

// FindTicks returns a run's ticks in the order they were appended, which is
// time order. An unknown id is ENOTFOUND.
func (c *core) FindTicks(ctx context.Context, runID string) ([]tare.Tick, error) {
	pk, err := runKey(ctx, c.b, runID)
	if err != nil {
		return nil, fmt.Errorf("find ticks of run %q: %w", runID, err)
	}
	rs, err := c.b.query(ctx, "SELECT "+tickColumns+" FROM ticks WHERE run = ? ORDER BY idx", pk)
	if err != nil {
		return nil, fmt.Errorf("find ticks of run %q: %w", runID, err)
	}
	defer rs.Close()
	var ticks []tare.Tick
	s := newTickScan()
	for rs.Next() {
		if err := rs.Scan(s.dest...); err != nil {
			return nil, fmt.Errorf("find ticks of run %q: %w", runID, err)
		}
		t, err := s.tick()
		if err != nil {
			return nil, fmt.Errorf("find ticks of run %q: %w", runID, err)
		}
		ticks = append(ticks, t)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("find ticks of run %q: %w", runID, err)
	}
	return ticks, nil
}

// DeleteRun removes a run, its ticks and its raw records in one
// transaction. An unknown id is ENOTFOUND.
func (c *core) DeleteRun(ctx context.Context, runID string) error {
	err := c.b.inTx(ctx, func(q querier) error {
		pk, err := runKey(ctx, q, runID)
		if err != nil {
			return err
		}
		for _, stmt := range []string{
			`DELETE FROM results WHERE run = ?`,
			`DELETE FROM result_batches WHERE run = ?`,
			`DELETE FROM ticks WHERE run = ?`,
			`DELETE FROM runs WHERE pk = ?`,
		} {
			if _, err := q.exec(ctx, stmt, pk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete run %q: %w", runID, err)
	}
	return nil
}

// Close releases the store.
func (c *core) Close() error {
	return c.b.close()
}
