package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tare-dev/tare"
)

// DefaultMinFree is the free space below which OpenSQLite refuses a store:
// a run that starts on a full disk would lose its records mid-way.
const DefaultMinFree = 1 << 20

// sqliteBusyTimeout is how long, in milliseconds, a writer waits for
// another to finish (a second tare process on the same file).
const sqliteBusyTimeout = 10000

// SQLite is the embedded store: one file in WAL mode, so readers never
// block the writer. It implements tare.Store, and Heartbeat for
// Writer.
type SQLite struct {
	Settings
	core
	db   *sql.DB
	path string
}

var _ tare.Store = (*SQLite)(nil)

// OpenSQLite opens (creating it and its directory when needed) the store at
// path and brings its schema up to date. It fails at once, with a
// *tare.Error naming the path, when the store cannot be written: EINVALID
// for a path that is not a writable file, EUNAVAILABLE for a full disk or a
// store locked by another process.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if path == "" {
		return nil, tare.Errorf(tare.EINVALID, "open sqlite store: empty path (set TARE_DB to a file path)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "open sqlite store %q: %w", path, err)
	}
	if err := preflight(abs); err != nil {
		return nil, err
	}
	// The path goes in a file: URI, escaped, so that a '?' or '#' in it is
	// part of the name. An immediate transaction takes the write lock at
	// BEGIN: in WAL mode a deferred one that later upgrades can fail with
	// SQLITE_BUSY without waiting for the busy timeout.
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() +
		"?_pragma=busy_timeout(" + strconv.Itoa(sqliteBusyTimeout) + ")" +
		"&_pragma=journal_mode(WAL)" +
		// NORMAL loses nothing when the process dies, only the last
		// transactions if the machine does: fine for measurements.
		"&_pragma=synchronous(NORMAL)" +
		"&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %q: %w", abs, err)
	}
	s := &SQLite{db: db, path: abs}
	s.core = core{set: &s.Settings, b: sqliteBackend{db: db}}
	if err := s.open(ctx); err != nil {
		_ = db.Close()
		return nil, describeSQLite(abs, err)
	}
	return s, nil
}

// open migrates the schema and proves the store takes writes.
func (s *SQLite) open(ctx context.Context) error {
	if err := s.migrate(ctx, "sqlite", strconv.Quote(s.path), ""); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO store_meta (key, value) VALUES ('opened_at', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.FormatInt(s.now().UnixNano(), 10))
	return err
}

// Path is the absolute path of the store's file.
func (s *SQLite) Path() string { return s.path }

// preflight checks, before SQLite sees it, that path can be a store: its
// directory exists or can be made, the file and its -wal and -shm siblings
// can be written, and the disk is not full. The OS says why far more
// precisely than SQLite's "unable to open database file".
func preflight(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return unwritable(path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return tare.Errorf(tare.EINVALID, "store %q is a directory: give the path of a file, such as %q",
			path, filepath.Join(path, "tare.db"))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return unwritable(path, err)
	}
	if err := f.Close(); err != nil {
		return unwritable(path, err)
	}
	probe, err := os.CreateTemp(dir, ".tare-probe-*")
	if err != nil {
		return unwritable(path, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	if free, ok := freeBytes(dir); ok && free < DefaultMinFree {
		return tare.Errorf(tare.EUNAVAILABLE,
			"store %q: disk full (%d bytes free, need at least %d): free some space or set TARE_DB to another disk",
			path, free, DefaultMinFree)
	}
	return nil
}

// unwritable describes an OS error met while preparing the store's path.
func unwritable(path string, err error) error {
	cause := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return tare.Errorf(tare.EUNAVAILABLE, "store %q: disk full (%w): free some space or set TARE_DB to another disk",
			path, cause)
	}
	return tare.Errorf(tare.EINVALID, "store %q cannot be written: %w: set TARE_DB to a writable file", path, cause)
}

// describeSQLite turns SQLite's result codes into errors a user can act on.
func describeSQLite(path string, err error) error {
	var te *tare.Error
	if errors.As(err, &te) {
		return err
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("open sqlite store %q: %w", path, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return tare.Errorf(tare.EUNAVAILABLE, "store %q: disk full: free some space or set TARE_DB to another disk", path)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return tare.Errorf(tare.EUNAVAILABLE, "store %q is locked by another process: try again when it is done", path)
	case sqlite3.SQLITE_IOERR:
		return tare.Errorf(tare.EUNAVAILABLE, "store %q: I/O error: %w", path, se)
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return tare.Errorf(tare.EINVALID, "store %q cannot be written: %w: set TARE_DB to a writable file", path, se)
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return tare.Errorf(tare.EINVALID, "store %q is not a tare store (not a SQLite database): %w", path, se)
	}
	return fmt.Errorf("open sqlite store %q: %w", path, err)
}

// sqliteBackend runs the shared queries on database/sql.
type sqliteBackend struct {
	db *sql.DB
}

// sqlQuerier is what *sql.DB and *sql.Tx have in common.
type sqlQuerier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, q string) (*sql.Stmt, error)
}

type sqliteQ struct{ q sqlQuerier }

func (s sqliteQ) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s sqliteQ) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := s.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

func (s sqliteQ) queryRow(ctx context.Context, q string, args ...any) row {
	return s.q.QueryRowContext(ctx, q, args...)
}

// sqlRows adapts *sql.Rows; its Close error is also reported by Err.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func (b sqliteBackend) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return sqliteQ{b.db}.exec(ctx, q, args...)
}

func (b sqliteBackend) query(ctx context.Context, q string, args ...any) (rows, error) {
	return sqliteQ{b.db}.query(ctx, q, args...)
}

func (b sqliteBackend) queryRow(ctx context.Context, q string, args ...any) row {
	return sqliteQ{b.db}.queryRow(ctx, q, args...)
}

func (b sqliteBackend) inTx(ctx context.Context, fn func(q querier) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(sqliteQ{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

var sqliteInsertTick = "INSERT INTO ticks (run, " + tickColumns + ") VALUES (" + placeholders(31) + ")"

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (b sqliteBackend) insertTicks(ctx context.Context, q querier, run int64, first int, ticks []tare.Tick) error {
	stmt, err := q.(sqliteQ).q.PrepareContext(ctx, sqliteInsertTick)
	if err != nil {
		return err
	}
	defer stmt.Close()
	args := make([]any, 0, 24)
	for i := range ticks {
		args, err = tickArgs(args[:0], run, first+i, &ticks[i])
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (sqliteBackend) contains(column string) string {
	return "instr(" + column + ", ?) > 0"
}

func (sqliteBackend) isUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true
	}
	return false
}

func (b sqliteBackend) close() error {
	return b.db.Close()
}
