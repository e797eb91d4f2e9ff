package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
)

// Open opens the store named by dsn: a "postgres://" or "postgresql://" URL
// opens PostgreSQL, anything else is the path of a SQLite file, and "" is
// DefaultPath(). Its Settings are the defaults: it names no writer, so a
// run's liveness is judged by its heartbeat alone (see OpenWith).
func Open(ctx context.Context, dsn string) (tare.Store, error) {
	return OpenWith(ctx, dsn, Settings{})
}

// OpenWith is Open with the store's Settings set; tare opens its stores
// with host.Processes, so that a run whose writer died on this machine
// reads as interrupted at once.
func OpenWith(ctx context.Context, dsn string, set Settings) (tare.Store, error) {
	if dsn == "" {
		dsn = DefaultPath() // $TARE_DB may name a PostgreSQL too (a pod's, from a Secret)
	}
	if isPostgres(dsn) {
		p, err := OpenPostgres(ctx, dsn)
		if err != nil {
			return nil, err
		}
		p.Settings = set
		return p, nil
	}
	s, err := OpenSQLite(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s.Settings = set
	return s, nil
}

func isPostgres(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return false
	}
	scheme = strings.ToLower(scheme)
	return scheme == "postgres" || scheme == "postgresql"
}

// DefaultPath is where the SQLite store lives unless told otherwise:
// $TARE_DB, else $XDG_DATA_HOME/tare/tare.db, else
// ~/.local/share/tare/tare.db, and tare.db in the working directory when
// there is no home directory either.
func DefaultPath() string {
	if p := os.Getenv("TARE_DB"); p != "" {
		return p
	}
	// The XDG spec says a relative XDG_DATA_HOME is invalid and is ignored.
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "tare", "tare.db")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "tare.db"
	}
	return filepath.Join(home, ".local", "share", "tare", "tare.db")
}

// NewRunID returns a new run id, a UUIDv7 in its usual text form: ids sort
// by creation time, to the millisecond across processes and strictly within
// one.
func NewRunID() string {
	return uuid.Must(uuid.NewV7()).String()
}
