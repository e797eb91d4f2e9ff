package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tare-dev/tare"
)

// pgConnectTimeout bounds each connection attempt when the DSN does not.
const pgConnectTimeout = 10 * time.Second

// pgMigrationLock is the advisory lock key that serialises concurrent
// openers migrating one database ("tare" in ASCII).
const pgMigrationLock = 0x74617265

// Postgres is the store shared by a team, on PostgreSQL through a pgx
// connection pool. It implements tare.Store, and Heartbeat for
// Writer.
type Postgres struct {
	Settings
	core
	pool *pgxpool.Pool
}

var _ tare.Store = (*Postgres)(nil)

// OpenPostgres connects to the database named by dsn (a postgres:// URL or
// a key=value string; search_path and other run-time parameters may be
// given in it) and brings the schema up to date. A DSN that does not parse
// is EINVALID and a server that does not answer EUNAVAILABLE, both naming
// the DSN with its password redacted.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	// pgx knows the URL schemes in lower case only.
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && isPostgres(dsn) {
		dsn = strings.ToLower(scheme) + "://" + rest
	}
	shown := tare.RedactText(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn quotes the DSN in its errors, password redacted.
		return nil, tare.Errorf(tare.EINVALID, "postgres store %q: %w", shown, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "postgres store %q: %w", shown, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "postgres store %q does not answer: %w", shown, err)
	}
	p := &Postgres{pool: pool}
	p.core = core{set: &p.Settings, b: pgBackend{pool: pool}}
	lock := "SELECT pg_advisory_xact_lock(" + strconv.Itoa(pgMigrationLock) + ")"
	if err := p.migrate(ctx, "postgres", strconv.Quote(shown), lock); err != nil {
		pool.Close()
		var te *tare.Error
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, fmt.Errorf("open postgres store %q: %w", shown, err)
	}
	return p, nil
}

// pgBackend runs the shared queries on a pgx pool.
type pgBackend struct {
	pool *pgxpool.Pool
}

// pgQuerier is what *pgxpool.Pool and pgx.Tx have in common.
type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

type pgQ struct{ q pgQuerier }

func (p pgQ) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, rebind(q), args...)
	return tag.RowsAffected(), err
}

func (p pgQ) query(ctx context.Context, q string, args ...any) (rows, error) {
	return p.q.Query(ctx, rebind(q), args...)
}

func (p pgQ) queryRow(ctx context.Context, q string, args ...any) row {
	return p.q.QueryRow(ctx, rebind(q), args...)
}

// rebind numbers the ? placeholders of the shared queries: $1, $2, …. The
// shared SQL has no ? in a literal.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (b pgBackend) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return pgQ{b.pool}.exec(ctx, q, args...)
}

func (b pgBackend) query(ctx context.Context, q string, args ...any) (rows, error) {
	return pgQ{b.pool}.query(ctx, q, args...)
}

func (b pgBackend) queryRow(ctx context.Context, q string, args ...any) row {
	return pgQ{b.pool}.queryRow(ctx, q, args...)
}

func (b pgBackend) inTx(ctx context.Context, fn func(q querier) error) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return fn(pgQ{tx})
	})
}

var (
	pgTickColumns = append([]string{"run"}, splitColumns(tickColumns)...)
)

func splitColumns(list string) []string {
	cols := strings.Split(list, ",")
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	return cols
}

func (b pgBackend) insertTicks(ctx context.Context, q querier, run int64, first int, ticks []tare.Tick) error {
	buf := make([]any, 0, len(pgTickColumns))
	src := pgx.CopyFromSlice(len(ticks), func(i int) ([]any, error) {
		var err error
		buf, err = tickArgs(buf[:0], run, first+i, &ticks[i])
		return buf, err
	})
	_, err := q.(pgQ).q.CopyFrom(ctx, pgx.Identifier{"ticks"}, pgTickColumns, src)
	return err
}

func (pgBackend) contains(column string) string {
	return "strpos(" + column + ", ?) > 0"
}

func (pgBackend) isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (b pgBackend) close() error {
	b.pool.Close()
	return nil
}
