package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
)

// The per-record way results were stored before schema version 3, kept
// here to make stores as older tare versions left them and to benchmark
// the batches against.

// Zero values are bound as NULL: free in PostgreSQL's null bitmap, and the
// same zero bytes as an integer 0 in SQLite.
func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// resultArgs appends the values of r, in resultColumns order after the run
// key, to dst.
func resultArgs(dst []any, run int64, r *tare.Result) ([]any, error) {
	if r.Seq > math.MaxInt64 {
		return dst, fmt.Errorf("result seq %d does not fit a signed 64-bit column", r.Seq)
	}
	return append(dst,
		run,
		int64(r.Seq),
		nsOf(r.Scheduled),
		nsOf(r.Sent),
		nsOf(r.FirstByte),
		nsOf(r.Done),
		r.Dropped,
		nullInt(int64(r.Status)),
		nullString(r.Err),
		nullInt(r.BytesIn),
		nullInt(r.BytesOut),
		nsOf(r.Started),
		nullString(r.Worker),
		nullInt(int64(r.Deliveries)),
		nullInt(int64(r.OutputTokens)),
		nullString(r.TokenSource),
	), nil
}

var (
	legacyInsertResult  = "INSERT INTO results (run, " + resultColumns + ") VALUES (" + placeholders(16) + ")"
	legacyRowsPerInsert = 24
	legacyInsertResults = "INSERT INTO results (run, " + resultColumns + ") VALUES " +
		strings.TrimSuffix(strings.Repeat("("+placeholders(16)+"), ", legacyRowsPerInsert), ", ")
	legacyPgResultColumns = append([]string{"run"}, splitColumns(resultColumns)...)
)

// legacyInsertSQLite is the SQLite insert of tare before batches: 24 rows a
// statement, yielding between statements.
func legacyInsertSQLite(ctx context.Context, tx sqlQuerier, run int64, results []tare.Result) error {
	var many, one *sql.Stmt
	defer func() {
		for _, st := range []*sql.Stmt{many, one} {
			if st != nil {
				_ = st.Close()
			}
		}
	}()
	args := make([]any, 0, 16*legacyRowsPerInsert)
	var err error
	for len(results) > 0 {
		n, stmt := 1, &one
		text := legacyInsertResult
		if len(results) >= legacyRowsPerInsert {
			n, stmt, text = legacyRowsPerInsert, &many, legacyInsertResults
		}
		if *stmt == nil {
			if *stmt, err = tx.PrepareContext(ctx, text); err != nil {
				return err
			}
		}
		args = args[:0]
		for i := range results[:n] {
			if args, err = resultArgs(args, run, &results[i]); err != nil {
				return err
			}
		}
		if _, err := (*stmt).ExecContext(ctx, args...); err != nil {
			return err
		}
		results = results[n:]
		runtime.Gosched()
	}
	return nil
}

// legacyInsertPostgres is the PostgreSQL insert of tare before batches.
func legacyInsertPostgres(ctx context.Context, q pgQuerier, run int64, results []tare.Result) error {
	buf := make([]any, 0, len(legacyPgResultColumns))
	src := pgx.CopyFromSlice(len(results), func(i int) ([]any, error) {
		var err error
		buf, err = resultArgs(buf[:0], run, &results[i])
		return buf, err
	})
	_, err := q.CopyFrom(ctx, pgx.Identifier{"results"}, legacyPgResultColumns, src)
	return err
}

// legacyAppend appends results to a run the old way, in one transaction.
func legacyAppend(ctx context.Context, s testStore, runID string, results []tare.Result) error {
	return s.c.b.inTx(ctx, func(q querier) error {
		pk, err := s.c.openRun(ctx, q, runID)
		if err != nil {
			return err
		}
		switch q := q.(type) {
		case sqliteQ:
			return legacyInsertSQLite(ctx, q.q, pk, results)
		case pgQ:
			return legacyInsertPostgres(ctx, q.q, pk, results)
		}
		return fmt.Errorf("no legacy insert for %T", q)
	})
}

// The runs of store/testdata/schema2.db, a store made by tare at schema
// version 2 (fillSchema2, run with that version's AppendResults).
const (
	schema2Complete   = "0195f000-0000-7000-8000-000000000002"
	schema2Unfinished = "0195f000-0000-7000-8000-000000000003"
)

// fillSchema2 stores what schema2.db holds, the old way.
func fillSchema2(t *testing.T, s testStore) {
	ctx := testContext(t)
	mustCreate(t, s, newRun(schema2Complete, base))
	rs := makeResults(0, 300)
	for i := 0; i < len(rs); i += 100 {
		if err := legacyAppend(ctx, s, schema2Complete, rs[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendTicks(ctx, schema2Complete, makeTicks(0, 3)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newRun(schema2Unfinished, base))
	if err := legacyAppend(ctx, s, schema2Unfinished, makeResults(0, 40)); err != nil {
		t.Fatal(err)
	}
	done := tare.Summary{Schema: tare.SummarySchema,
		Run: tare.Run{ID: schema2Complete, Status: tare.StatusComplete, EndedAt: base.Add(time.Minute)}}
	if err := s.FinishRun(ctx, done); err != nil {
		t.Fatal(err)
	}
}

// schema2Results is what the per-record rows keep of makeResults: all but
// Redirects.
func schema2Results(first, n int) []tare.Result {
	rs := makeResults(first, n)
	for i := range rs {
		rs[i].Redirects = 0
	}
	return rs
}

// TestSchema2Store opens stores left by tare at schema version 2: the
// per-record rows read as before, beside batches appended since.
func TestSchema2Store(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tare.db")
		b, err := os.ReadFile(filepath.Join("testdata", "schema2.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenSQLite(testContext(t), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		checkSchema2(t, testStore{Store: s, c: &s.core, dsn: path})
	})
	t.Run("postgres", func(t *testing.T) {
		ctx := testContext(t)
		fresh := openPostgresT(t) // a schema of its own, dropped at the end
		fresh.Close()
		pool, err := pgxpool.New(ctx, fresh.dsn)
		if err != nil {
			t.Fatal(err)
		}
		// Back to version 2, as an older tare made it.
		for _, stmt := range []string{"DROP TABLE result_batches", "DROP TABLE calendar_samples", "DROP TABLE protocol_windows", "DROP TABLE ab_runs",
			"DELETE FROM schema_migrations WHERE version > 2"} {
			if _, err := pool.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		old := &core{set: &Settings{Processes: host.Processes{}}, b: pgBackend{pool: pool}}
		fillSchema2(t, testStore{c: old, Store: &Postgres{core: *old, pool: pool}})
		// The ticks' blame column came later too (its values written above
		// go with it), and the I/O evidence columns.
		for _, col := range []string{"blame", "psi_io_some", "io_by", "fixed_work_us"} {
			if _, err := pool.Exec(ctx, "ALTER TABLE ticks DROP COLUMN "+col); err != nil {
				t.Fatal(err)
			}
		}
		pool.Close()
		s, err := OpenPostgres(ctx, fresh.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		checkSchema2(t, testStore{Store: s, c: &s.core, dsn: fresh.dsn})
	})
}

func checkSchema2(t *testing.T, s testStore) {
	ctx := testContext(t)
	ms, err := loadMigrations(migrationFS, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	var version int
	if err := s.c.b.queryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil || version != len(ms) {
		t.Fatalf("schema version %d, %v; want %d, the latest", version, err, len(ms))
	}
	if got, want := streamAll(t, s, schema2Complete), schema2Results(0, 300); !reflect.DeepEqual(got, want) {
		t.Fatalf("the complete run streamed %d records, not the %d stored", len(got), len(want))
	}
	sum, err := s.FindSummary(ctx, schema2Unfinished)
	if err != nil || sum.Requests.Total != 40 {
		t.Fatalf("FindSummary of the unfinished run: %d records, %v; want 40", sum.Requests.Total, err)
	}

	// Records appended since go in batches, streamed after the old rows.
	late := makeResults(40, 20)
	late = append(late, makeResults(1000, 5)...)
	if err := s.AppendResults(ctx, schema2Unfinished, late); err != nil {
		t.Fatal(err)
	}
	want := append(schema2Results(0, 40), late...)
	if got := streamAll(t, s, schema2Unfinished); !reflect.DeepEqual(got, want) {
		t.Fatalf("the unfinished run streamed %d records, want the %d old and new in seq order", len(got), len(want))
	}
	sum, err = s.FindSummary(ctx, schema2Unfinished)
	wantReq := tare.Requests{Total: 65}
	for _, r := range want {
		switch {
		case r.Dropped:
			wantReq.Dropped++
		case r.Err != "":
			wantReq.Errors++
		}
	}
	wantReq.OK = wantReq.Total - wantReq.Dropped - wantReq.Errors
	if err != nil || !reflect.DeepEqual(sum.Requests, wantReq) {
		t.Fatalf("FindSummary = %+v, %v; want %+v", sum.Requests, err, wantReq)
	}

	if err := s.DeleteRun(ctx, schema2Unfinished); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.c.b.queryRow(ctx, `SELECT (SELECT COUNT(*) FROM results) + (SELECT COUNT(*) FROM result_batches)`).
		Scan(&left); err != nil || left != 300 {
		t.Errorf("after deleting the unfinished run %d rows are left, %v; want the complete run's 300", left, err)
	}
}
