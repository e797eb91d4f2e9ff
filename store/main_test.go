package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

func TestMain(m *testing.M) {
	// The interrupted-run test re-executes this binary as the writer it
	// then kills.
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// testStore is one back end under test, with its shared core exposed so
// tests can set the clock and the process table.
type testStore struct {
	tare.Store
	c   *core
	dsn string // what Open takes to reach the same data
}

type opener struct {
	name string
	open func(t testing.TB) testStore
}

var openers = []opener{
	{"sqlite", openSQLiteT},
	{"postgres", openPostgresT},
}

// eachStore runs fn against a fresh store of every back end, as subtests
// named "sqlite" and "postgres".
func eachStore(t *testing.T, fn func(t *testing.T, s testStore)) {
	t.Helper()
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			fn(t, o.open(t))
		})
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openSQLiteT(t testing.TB) testStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "tare.db")
	s, err := OpenSQLite(testContext(t), path)
	if err != nil {
		t.Fatalf("OpenSQLite(%q): %v", path, err)
	}
	s.Processes = host.Processes{}
	t.Cleanup(func() { _ = s.Close() })
	return testStore{Store: s, c: &s.core, dsn: path}
}

// openPostgresT opens a store in a schema of its own, dropped at the end,
// so tests and packages running at the same time never see each other.
func openPostgresT(t testing.TB) testStore {
	t.Helper()
	ctx := testContext(t)
	admin, err := pgx.Connect(ctx, postgresDSN())
	if err != nil {
		t.Fatalf("PostgreSQL does not answer at %s (start one, or set TARE_POSTGRES_DSN): %v",
			tare.RedactText(postgresDSN()), err)
	}
	defer admin.Close(ctx)
	schema := "tare_store_test_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, postgresDSN())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	dsn := withSearchPath(t, postgresDSN(), schema)
	s, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	s.Processes = host.Processes{}
	t.Cleanup(func() { _ = s.Close() })
	return testStore{Store: s, c: &s.core, dsn: dsn}
}

func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("TARE_POSTGRES_DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// base is the instant test data starts at: fixed, so output never drifts.
var base = time.Date(2025, 3, 4, 14, 0, 0, 0, time.UTC)

// at is base plus d, as the store gives times back (UTC, no monotonic
// reading), so results compare with reflect.DeepEqual.
func at(d time.Duration) time.Time {
	return time.Unix(0, base.Add(d).UnixNano()).UTC()
}

// makeResults returns n results with seq from first, covering every kind
// of record: ok, failed, dropped, queue jobs and model calls.
func makeResults(first, n int) []tare.Result {
	out := make([]tare.Result, n)
	for i := range out {
		seq := first + i
		sched := time.Duration(seq) * 5 * time.Millisecond
		r := tare.Result{Seq: uint64(seq), Scheduled: at(sched)}
		switch {
		case seq%10 == 9:
			r.Dropped = true
		case seq%7 == 3:
			r.Sent = at(sched + time.Millisecond)
			r.Done = at(sched + 3*time.Second)
			r.Err = "timeout"
			r.BytesOut = 64
		default:
			r.Sent = at(sched + 100*time.Microsecond)
			r.FirstByte = at(sched + time.Duration(seq%13+1)*time.Millisecond)
			r.Done = at(sched + time.Duration(seq%29+20)*time.Millisecond)
			r.Status = 200
			r.BytesIn = int64(100 + seq%50)
			r.BytesOut = 64
		}
		if seq%3 == 0 && !r.Dropped {
			r.Started = r.Sent.Add(2 * time.Millisecond)
			r.Worker = fmt.Sprintf("worker-%d", seq%4)
			r.Deliveries = 1 + seq%2
		}
		if seq%11 == 4 && r.OK() {
			r.Redirects = 1 + seq%3
		}
		if seq%5 == 0 && r.OK() {
			r.OutputTokens = 50 + seq%100
			r.TokenSource = "usage"
		}
		out[i] = r
	}
	return out
}

// withMix sets on rs what a run of a targets file against a model adds:
// which request each arrival took, and the prompt's tokens of those that
// had an answer with usage.
func withMix(rs []tare.Result) []tare.Result {
	for i := range rs {
		r := &rs[i]
		r.TargetIndex = int(r.Seq % 3)
		if r.TokenSource != "" {
			r.PromptTokens, r.PromptTokenSource = 200+int(r.Seq%40), "usage"
		}
	}
	return rs
}

func makeTicks(first, n int) []tare.Tick {
	out := make([]tare.Tick, n)
	for i := range out {
		k := first + i
		t := tare.Tick{
			Start:       at(time.Duration(k) * time.Second),
			End:         at(time.Duration(k+1) * time.Second),
			Arrivals:    200 + k,
			Completions: 198 + k,
			Errors:      k % 3,
			Dropped:     k % 2,
			InFlight:    4,
			P50:         20 * time.Millisecond,
			P95:         time.Duration(40+k) * time.Millisecond,
			P99:         time.Duration(90+k) * time.Millisecond,
		}
		switch k % 3 {
		case 0: // not sampled
		case 1: // sampled, every optional source missing
			t.QueueDepth = tare.Float(3.5)
			t.Host = &tare.HostSample{
				Start: t.Start, End: t.End,
				CPU: tare.CPUShares{CPU: -1, User: 40, System: 10, Steal: 12.5, Idle: 37.5},
			}
		case 2: // everything
			t.QueueDepth = tare.Float(0)
			t.Host = &tare.HostSample{
				Start: t.Start, End: t.End,
				CPU: tare.CPUShares{CPU: -1, User: 30.25, Nice: 1, System: 9, IOWait: 0.5,
					IRQ: 0.125, SoftIRQ: 0.125, Steal: 4, Idle: 55},
				PerCPU: []tare.CPUShares{
					{CPU: 0, User: 50, Steal: 8, Idle: 42},
					{CPU: 1, User: 10.5, Steal: 0, Idle: 89.5},
				},
				PSISome:   tare.Float(7.25),
				PSIFull:   tare.Float(0),
				Throttled: tare.Float(1.5),
				RunDelay:  tare.Float(3),
				Blame: &tare.Blame{Source: tare.BlameMeasured, WaitPct: 3.1, DroppedEvents: 2,
					Behind: []tare.Behind{
						{Owner: tare.OwnerOther, Name: "batch", PIDs: []int{4121}, WaitPct: 2.5},
						{Owner: tare.OwnerWakeup, PIDs: []int{}, WaitPct: 0.6},
					},
					OthersByCPU: []tare.CPUWait{{CPU: 0, WaitPct: 2.5}}},
				PSIIOSome: tare.Float(12.5),
				IOBy: []tare.ProcessIO{
					{Name: "pg_dump", PID: 5120, Bytes: 96 << 20},
					{Name: "postgres", PID: 880, Bytes: 4096},
				},
				FixedWorkUS: tare.Float(17.25),
			}
		}
		out[i] = t
	}
	return out
}

// newRun returns a run as the CLI would create it.
func newRun(id string, started time.Time) tare.Run {
	return tare.Run{
		ID:        id,
		Label:     "checkout",
		Window:    "peak",
		Target:    "http://127.0.0.1:8080/checkout",
		Arrival:   "poisson 200/s",
		StartedAt: started,
		Status:    tare.StatusRunning,
		Version:   "v0.1.0",
		Config:    map[string]string{"rate": "200/s", "jobs": "500"},
	}
}

var testEnv = tare.Env{Hostname: "box", VCPUs: 2, Kernel: "6.1.0", ClkTck: 100, Cgroup: "v2", PSI: true}

// wantCode fails t unless err is a *tare.Error with the code.
func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := tare.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
	var te *tare.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a *tare.Error", err)
	}
}

func mustCreate(t testing.TB, s tare.Store, run tare.Run) {
	t.Helper()
	if err := s.CreateRun(testContext(t), run, testEnv); err != nil {
		t.Fatalf("CreateRun(%q): %v", run.ID, err)
	}
}

func streamAll(t testing.TB, s tare.Store, runID string) []tare.Result {
	t.Helper()
	var got []tare.Result
	err := s.StreamResults(testContext(t), runID, func(r *tare.Result) error {
		got = append(got, *r)
		return nil
	})
	if err != nil {
		t.Fatalf("StreamResults(%q): %v", runID, err)
	}
	return got
}

var postgresDSN = testservice.PostgresDSN
