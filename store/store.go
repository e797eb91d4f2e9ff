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
// DefaultPath().
func Open(ctx context.Context, dsn string) (tare.Store, error) {
	if dsn == "" {
		dsn = DefaultPath() // $TARE_DB may name a PostgreSQL too (a pod's, from a Secret)
	}
	if isPostgres(dsn) {
		return OpenPostgres(ctx, dsn)
	}
	return OpenSQLite(ctx, dsn)
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
