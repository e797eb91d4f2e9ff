package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tare-dev/tare"
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
