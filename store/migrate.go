package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// migrationFS holds the schema, one directory per dialect and one file per
// version: migrations/<dialect>/NNNN_name.sql.
//
//go:embed migrations
var migrationFS embed.FS

// ErrMigration is wrapped by errors about the embedded migration files.
var ErrMigration = errors.New("bad migration")

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the migrations of a dialect in version order.
func loadMigrations(fsys fs.FS, dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations of %s: %w", dialect, err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := parseMigrationName(e.Name())
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("%w: %s migrations skip or repeat a version at %q", ErrMigration, dialect, m.name)
		}
	}
	return ms, nil
}

// parseMigrationName reads the version of "0001_init.sql".
func parseMigrationName(name string) (int, error) {
	num, _, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
	if !ok || num == "" {
		return 0, fmt.Errorf("%w: name %q is not NNNN_name.sql", ErrMigration, name)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v <= 0 || num[0] == '+' || num[0] == '-' {
		return 0, fmt.Errorf("%w: name %q does not start with a positive version", ErrMigration, name)
	}
	return v, nil
}

// migrate brings the schema up to date in one transaction. lock, when not
// empty, is run first to serialise concurrent openers (SQLite's immediate
// transaction already does).
func (c *core) migrate(ctx context.Context, dialect, where, lock string) error {
	ms, err := loadMigrations(migrationFS, dialect)
	if err != nil {
		return err
	}
	return c.b.inTx(ctx, func(q querier) error {
		if lock != "" {
			if _, err := q.exec(ctx, lock); err != nil {
				return fmt.Errorf("lock schema: %w", err)
			}
		}
		if _, err := q.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at BIGINT  NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var current int
		if err := q.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > len(ms) {
			return tare.Errorf(tare.EINVALID,
				"store %s has schema version %d, newer than this tare knows (%d): upgrade tare", where, current, len(ms))
		}
		for _, m := range ms[current:] {
			if _, err := q.exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := q.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, c.now().UnixNano()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
