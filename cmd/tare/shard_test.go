package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/store"
)

func TestShardFlags(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name                   string
		f                      shardFlags
		label                  string
		shards                 int // --shards
		wantRow, wantErrSubstr string
	}{
		{name: "unsharded", f: shardFlags{}, wantRow: ""},
		{name: "explicit id", f: shardFlags{shard: "2/4", runID: "abc"}, wantRow: "abc.shard-2-of-4"},
		{name: "derived id", f: shardFlags{shard: "1/2", startAt: "2026-11-29T14:00:05Z"}, label: "checkout",
			wantRow: groupID("checkout", now.Add(5*time.Second)) + ".shard-1-of-2"},
		{name: "unix start", f: shardFlags{shard: "1/2", startAt: fmt.Sprint(now.Unix() + 5)}, label: "checkout",
			wantRow: groupID("checkout", now.Add(5*time.Second)) + ".shard-1-of-2"},
		{name: "no id", f: shardFlags{shard: "1/2"}, wantErrSubstr: "--run-id"},
		{name: "past start", f: shardFlags{startAt: "2026-11-29T13:00:00Z"}, wantErrSubstr: "already past"},
		{name: "bad start", f: shardFlags{startAt: "tomorrow"}, wantErrSubstr: "RFC 3339"},
		{name: "bad shard", f: shardFlags{shard: "5/4", runID: "x"}, wantErrSubstr: "--shard must be i/N"},
		{name: "slash in id", f: shardFlags{shard: "1/2", runID: "a/b"}, wantErrSubstr: "--run-id"},
		{name: "indexed job", f: shardFlags{index: "0", runID: "uid"}, shards: 4, wantRow: "uid.shard-1-of-4"},
		{name: "last index", f: shardFlags{index: "3", runID: "uid"}, shards: 4, wantRow: "uid.shard-4-of-4"},
		{name: "index too high", f: shardFlags{index: "4", runID: "uid"}, shards: 4, wantErrSubstr: "below N"},
		{name: "index without count", f: shardFlags{index: "0", runID: "uid"}, wantErrSubstr: "--shards N"},
		{name: "index unexpanded", f: shardFlags{index: "$(JOB_COMPLETION_INDEX)", runID: "uid"}, shards: 4, wantErrSubstr: "completionMode: Indexed"},
		{name: "index negative", f: shardFlags{index: "-1", runID: "uid"}, shards: 4, wantErrSubstr: "from 0"},
		{name: "index and shard", f: shardFlags{index: "1", shard: "2/4", runID: "uid"}, shards: 4, wantErrSubstr: "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.f.plan(tt.label, now, false, tt.shards)
			if tt.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("err %v; want EINVALID mentioning %q", err, tt.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.rowID(); got != tt.wantRow {
				t.Errorf("row id %q, want %q", got, tt.wantRow)
			}
		})
	}
}

func FuzzParseInstant(f *testing.F) {
	for _, s := range []string{"2026-11-29T14:00:00Z", "1795960800", "1795960800.25", "", "-1", "1e300", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseInstant(s); err != nil && tare.ErrorCode(err) != tare.EINVALID {
			t.Fatalf("parseInstant(%q): %v is not EINVALID", s, err)
		}
	})
}

// TestShardedRunMerges runs four shards of one run at 50/s each into one
// PostgreSQL store, starting together at --start-at, and reads the run
// back merged: every record counted once, and the merged p99 that of all
// records pooled.
func TestShardedRunMerges(t *testing.T) {
	dsn := postgresDSN()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(n.Add(1)%20) * time.Millisecond) // a spread of latencies
	}))
	defer srv.Close()

	const shards, jobs = 4, 200
	label := fmt.Sprintf("shards-%d", time.Now().UnixNano())
	startAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	group := groupID(label, startAt)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Skipf("PostgreSQL at %s does not answer: %v", dsn, err)
	}
	defer st.Close()
	t.Cleanup(func() {
		rows, _ := session.Shards(ctx, st, group)
		for _, r := range rows {
			st.DeleteRun(ctx, r.ID)
		}
	})

	var wg sync.WaitGroup
	errs := make([]string, shards)
	for i := 1; i <= shards; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "200/s", "--jobs", fmt.Sprint(jobs),
				"--shard", fmt.Sprintf("%d/%d", i, shards), "--start-at", startAt.Format(time.RFC3339Nano),
				"--label", label, "--db", dsn, "--quiet", "--tick", "100ms")
			if want := fmt.Sprintf("%s.shard-%d-of-%d", group, i, shards); code != 0 || !strings.Contains(stdout, want) {
				errs[i-1] = fmt.Sprintf("shard %d: exit %d, want run %s in\n%s\n%s", i, code, want, stdout, stderr)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatal(e)
		}
	}

	code, stdout, stderr := tareCmd(t, "runs", "show", group, "--json", "--db", dsn)
	if code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Run.ID != group || s.Requests.Total != jobs || len(s.Shards) != shards {
		t.Fatalf("merged run %s: %d requests over %d shards; want %s, %d over %d", s.Run.ID, s.Requests.Total, len(s.Shards), group, jobs, shards)
	}
	var lat []float64
	rows, err := session.Shards(ctx, st, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.StartedAt.Sub(startAt).Abs() > time.Millisecond {
			t.Errorf("%s started at %v, not at --start-at %v", r.ID, r.StartedAt, startAt)
		}
		st.StreamResults(ctx, r.ID, func(res *tare.Result) error {
			lat = append(lat, float64(res.Latency())/1e6)
			return nil
		})
	}
	slices.Sort(lat)
	// The nearest-rank p99 of the pooled records, against the merged
	// figure: equal within the histogram's resolution (3 significant
	// digits, so within 0.2% with the rounding of both, and a microsecond unit).
	pooled := lat[int(math.Ceil(0.99*float64(len(lat))))-1]
	if s.Latency.P99 == nil || math.Abs(*s.Latency.P99-pooled) > pooled*0.002+0.001 {
		t.Errorf("merged p99 %v ms, pooled p99 %.3f ms", s.Latency.P99, pooled)
	}
	t.Logf("merged p99 %.3f ms, pooled p99 %.3f ms over %d records", *s.Latency.P99, pooled, len(lat))

	// compare and report read the merged run too.
	if code, _, stderr := tareCmd(t, "compare", group, group, "--db", dsn); code == 2 {
		t.Errorf("compare of a sharded run: exit %d: %s", code, stderr)
	}
	// Deleting the run deletes every shard's row.
	if code, stdout, stderr := tareCmd(t, "runs", "delete", "--yes", group, "--db", dsn); code != 0 || !strings.Contains(stdout, "4 shards") {
		t.Errorf("delete of a sharded run: exit %d: %s%s", code, stdout, stderr)
	}
	if rows, err := session.Shards(ctx, st, group); err != nil || len(rows) != 0 {
		t.Errorf("after delete, %d shard rows remain (%v)", len(rows), err)
	}
}

// TestCoordinatedShards: three shards started with the same command meet
// at a Redis barrier, take indexes 1..3, start at one instant, record
// their clock offsets, and read back as one run.
func TestCoordinatedShards(t *testing.T) {
	redisURL := os.Getenv("TARE_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	dsn := postgresDSN()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Skipf("PostgreSQL at %s does not answer: %v", dsn, err)
	}
	defer st.Close()
	group := fmt.Sprintf("coord-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		rows, _ := session.Shards(ctx, st, group)
		for _, r := range rows {
			st.DeleteRun(ctx, r.ID)
		}
	})
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	t.Cleanup(func() {
		k := "tare:barrier:" + group
		rdb.Del(ctx, k+":joined", k+":start", k+":next")
	})
	const shards = 3
	var wg sync.WaitGroup
	errs := make([]string, shards)
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "150/s", "--jobs", "90",
				"--coordinate", redisURL, "--shards", fmt.Sprint(shards), "--run-id", group,
				"--db", dsn, "--quiet", "--tick", "100ms")
			if code != 0 {
				errs[i] = fmt.Sprintf("exit %d:\n%s\n%s", code, stdout, stderr)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatal(e)
		}
	}
	rows, err := session.Shards(ctx, st, group)
	if err != nil || len(rows) != shards {
		t.Fatalf("%d shard rows, %v", len(rows), err)
	}
	// Each shard starts at the agreed Redis instant less its own measured
	// offset: the starts agree within the offsets' error bounds, RTT/2
	// each, plus the microsecond they are recorded to.
	var bound time.Duration
	for _, r := range rows {
		s, err := st.FindSummary(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.Run.ClockOffset(); !ok || s.Run.Config[tare.ConfigClockEnd] == "" {
			t.Fatalf("%s recorded no clock offsets: %v", r.ID, s.Run.Config)
		}
		rtt, _ := strconv.ParseFloat(s.Run.Config[tare.ConfigClockRTT], 64)
		bound += time.Duration(rtt*float64(time.Millisecond))/2 + time.Microsecond
	}
	for _, r := range rows {
		if d := r.StartedAt.Sub(rows[0].StartedAt).Abs(); d > bound {
			t.Errorf("%s started %v apart from %s; the clock readings bound it to %v", r.ID, d, rows[0].ID, bound)
		}
	}
	code, stdout, stderr := tareCmd(t, "runs", "show", group, "--json", "--db", dsn)
	var s tare.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || s.Requests.Total != 90 {
		t.Fatalf("runs show: exit %d, %d requests: %s", code, s.Requests.Total, stderr)
	}
}
