package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

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
	plan, err := (&session.ShardSpec{Shard: "1/4", StartAt: startAt.Format(time.RFC3339Nano)}).Plan(label, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	group := plan.Group // what every shard derives from the label and --start-at
	ctx := context.Background()
	st := shardStore(t, dsn, group)

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

	s := showRun(t, dsn, group)
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
// their clock offsets, and read back as one run. 300 jobs, 2 s: in 0.6 s
// (90 jobs) a shard on a busy fresh machine read no tick of the
// service's CPU, and its line said n/a, rightly.
func TestCoordinatedShards(t *testing.T) {
	redisURL := os.Getenv("TARE_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	dsn := postgresDSN()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx := context.Background()
	group := fmt.Sprintf("coord-%d", time.Now().UnixNano())
	st := shardStore(t, dsn, group)
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
			code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "150/s", "--jobs", "300",
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
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || s.Requests.Total != 300 {
		t.Fatalf("runs show: exit %d, %d requests: %s", code, s.Requests.Total, stderr)
	}
	// The merged run describes its whole schedule, and each shard's host
	// as that shard measured it; its verdict is the shards'.
	if want := "poisson 150/s for 300 jobs over 3 shards"; s.Run.Arrival != want {
		t.Errorf("merged run's arrival %q, want %q", s.Run.Arrival, want)
	}
	worst := tare.Clean
	for i, sh := range s.Shards {
		own, err := st.FindSummary(ctx, rows[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if sh.Host.Ticks == 0 || !reflect.DeepEqual(sh.Host, own.Host) || !reflect.DeepEqual(sh.Generator, own.Generator) ||
			!reflect.DeepEqual(sh.SUT, own.SUT) || sh.Arrival != own.Run.Arrival {
			t.Errorf("shard %s's line in the merged run: host %+v, generator %+v, sut %+v, arrival %q; its own row has %+v, %+v, %+v, %q",
				sh.Shard, sh.Host, sh.Generator, sh.SUT, sh.Arrival, own.Host, own.Generator, own.SUT, own.Run.Arrival)
		}
		worst = judge.Raise(worst, own.Verdict.Level)
	}
	if s.Verdict.Level != worst {
		t.Errorf("the merged run is %s, its worst shard %s", s.Verdict.Level, worst)
	}
	for _, w := range s.Verdict.Warnings {
		if strings.Contains(w, "was not sampled") {
			t.Errorf("the merged run says its host was not sampled: %q", w)
		}
	}
	code, text, stderr := tareCmd(t, "runs", "show", group, "--db", dsn)
	if code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"over 3 shards", "shard 1/3    on ", "shard 3/3    on ", "   generator   cpu "} {
		if !strings.Contains(text, want) {
			t.Errorf("the merged run's text does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "cpu n/a of a core") || strings.Contains(text, "polluted ticks n/a of 0") {
		t.Errorf("the merged run's text has host figures n/a that its shards measured:\n%s", text)
	}
}

// TestShardedRunMergesStagesAndTargets runs two shards of one run
// (--shards 2 --shard-index K, as an Indexed Job's pods) ramping through
// --stages over a --targets file of two requests, and reads the run back
// merged: its stages and its requests there, each counting the sum of the
// shards' own, and with the figures one generator's recorder gives of all
// the stored records.
func TestShardedRunMergesStagesAndTargets(t *testing.T) {
	dsn := postgresDSN()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := time.Duration(n.Add(1)%7) * time.Millisecond
		if r.URL.Path == "/slow" {
			d += 15 * time.Millisecond
		}
		time.Sleep(d)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "targets.jsonl")
	targets := `{"name": "home", "url": "` + srv.URL + `/", "weight": 2}
{"name": "slow", "url": "` + srv.URL + `/slow"}
`
	if err := os.WriteFile(file, []byte(targets), 0o644); err != nil {
		t.Fatal(err)
	}

	const shards = 2
	label := fmt.Sprintf("shard-stages-%d", time.Now().UnixNano())
	startAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	plan, err := (&session.ShardSpec{Index: "0", Shards: shards, StartAt: startAt.Format(time.RFC3339Nano)}).Plan(label, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	group := plan.Group
	ctx := context.Background()
	st := shardStore(t, dsn, group)

	var wg sync.WaitGroup
	errs := make([]string, shards)
	for k := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, stdout, stderr := tareCmd(t, "run", "--targets", file, "--stages", "1s:80/s,1s:80/s", "--arrival", "constant",
				"--shards", fmt.Sprint(shards), "--shard-index", fmt.Sprint(k), "--start-at", startAt.Format(time.RFC3339Nano),
				"--label", label, "--db", dsn, "--quiet", "--tick", "100ms")
			if code != 0 {
				errs[k] = fmt.Sprintf("shard index %d: exit %d:\n%s\n%s", k, code, stdout, stderr)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatal(e)
		}
	}

	s := showRun(t, dsn, group)
	rows, err := session.Shards(ctx, st, group)
	if err != nil || len(rows) != shards || len(s.Shards) != shards {
		t.Fatalf("%d shard rows (%v), %d in the merged run; want %d", len(rows), err, len(s.Shards), shards)
	}
	if len(s.Stages) != 2 || len(s.Targets) != 2 {
		t.Fatalf("merged run has %d stages and %d targets, want 2 and 2; warnings %q", len(s.Stages), len(s.Targets), s.Verdict.Warnings)
	}
	// One generator's figures of the same records: the shards started
	// together at --start-at.
	var names []string
	for _, tg := range s.Targets {
		names = append(names, tg.Name)
	}
	var spans []stats.Span
	for _, sg := range s.Stages {
		from := time.Duration(sg.StartS * float64(time.Second))
		spans = append(spans, stats.Span{From: from, To: from + time.Duration(sg.DurationS*float64(time.Second))})
	}
	one, err := stats.NewRecorder(stats.Config{Start: startAt, Targets: names, Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := stats.NewParts(stats.Config{Start: startAt, Grace: time.Minute}, spans)
	if err != nil {
		t.Fatal(err)
	}
	var stageSum, targetSum [2]int
	for _, r := range rows {
		own, err := st.FindSummary(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(own.Stages) != 2 || len(own.Targets) != 2 {
			t.Fatalf("%s has %d stages and %d targets, want 2 and 2", r.ID, len(own.Stages), len(own.Targets))
		}
		for k := range 2 {
			stageSum[k] += own.Stages[k].Requests
			targetSum[k] += own.Targets[k].Requests
		}
		err = st.StreamResults(ctx, r.ID, func(res *tare.Result) error {
			one.AddResult(res)
			parts.AddResult(res)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for k := range 2 {
		if got := s.Stages[k].Requests; got != stageSum[k] || got == 0 {
			t.Errorf("merged stage %d has %d requests, the shards' %d", k+1, got, stageSum[k])
		}
		if got := s.Targets[k].Requests; got != targetSum[k] || got == 0 {
			t.Errorf("merged target %s has %d requests, the shards' %d", s.Targets[k].Name, got, targetSum[k])
		}
		ps, _ := parts.Summary(k)
		if got, want := s.Stages[k].Latency, (tare.QuantilesMS{P50: ps.Latency.P50, P95: ps.Latency.P95, P99: ps.Latency.P99}); !reflect.DeepEqual(got, want) {
			t.Errorf("merged stage %d latency p50/p95/p99 %v, one generator's %v", k+1, msList(got), msList(want))
		}
	}
	if s.Stages[1].TargetPerS != 80 || s.Stages[1].FromPerS != 80 {
		t.Errorf("merged stage 2 from %v to %v/s, want the whole run's 80/s", s.Stages[1].FromPerS, s.Stages[1].TargetPerS)
	}
	for k, want := range one.Summary(time.Now(), 2*time.Second).Targets {
		if got := s.Targets[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("merged target %s: %d requests, %d ok, latency p50/p95/p99 %v; one generator's %s: %d, %d, %v",
				got.Name, got.Requests, got.OK, msList(got.Latency), want.Name, want.Requests, want.OK, msList(want.Latency))
		}
	}
}

// msList is q's percentiles for messages, -1 for none.
func msList(q tare.QuantilesMS) []float64 { return []float64{deref(q.P50), deref(q.P95), deref(q.P99)} }

// shardStore opens the store at dsn (a PostgreSQL that does not answer is
// testservice.Unavailable), and deletes the shards of run group at the end.
func shardStore(t *testing.T, dsn, group string) tare.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		testservice.Unavailable(t, testservice.PostgresExplicit(), "open the PostgreSQL store at %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		rows, _ := session.Shards(ctx, st, group)
		for _, r := range rows {
			st.DeleteRun(ctx, r.ID)
		}
		st.Close()
	})
	return st
}

// showRun is the summary of stored run id, merged when it was sharded, as
// tare runs show --json prints it.
func showRun(t *testing.T, dsn, id string) tare.Summary {
	t.Helper()
	code, stdout, stderr := tareCmd(t, "runs", "show", id, "--json", "--db", dsn)
	if code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("runs show: %v\n%s", err, stdout)
	}
	return s
}

// TestShardsOnOneHostAreTare runs two coordinated shards of one run as
// two processes on this host: each counts the other as tare (it records
// its pid), so neither ledger names the other as a neighbour, in any tick.
func TestShardsOnOneHostAreTare(t *testing.T) {
	dsn := postgresDSN()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx := context.Background()
	group := fmt.Sprintf("onehost-%d", time.Now().UnixNano())
	st := shardStore(t, dsn, group)
	redisURL := os.Getenv("TARE_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	const shards = 2
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, shards)
	outs := make([]strings.Builder, shards)
	for k := range shards {
		cmds[k] = exec.CommandContext(runCtx, os.Args[0], "run", "--url", srv.URL+"/", "--rate", "400/s", "--duration", "3s",
			"--coordinate", redisURL, "--shards", fmt.Sprint(shards), "--shard-index", fmt.Sprint(k), "--run-id", group,
			"--db", dsn, "--quiet", "--tick", "200ms")
		cmds[k].Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		cmds[k].Stdout, cmds[k].Stderr = &outs[k], &outs[k]
		if err := cmds[k].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for k, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("shard index %d: %v\n%s", k, err, outs[k].String())
		}
	}
	rows, err := session.Shards(ctx, st, group)
	if err != nil || len(rows) != shards {
		t.Fatalf("%d shard rows, %v", len(rows), err)
	}
	for k, r := range rows {
		other := cmds[1-k].Process.Pid
		s, err := st.FindSummary(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Run.Config[tare.ConfigShardPeers]; got != strconv.Itoa(other) {
			t.Errorf("%s counted %q as tare, want the other shard's pid %d", r.ID, got, other)
		}
		ticks, err := st.FindTicks(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, tk := range append(ticks, tare.Tick{Host: &tare.HostSample{CPUBy: s.Host.CPUBy}}) {
			if tk.Host != nil && tk.Host.CPUBy != nil {
				for _, p := range tk.Host.CPUBy.TopOthers {
					if p.PID == other {
						named++
					}
				}
			}
		}
		if named > 0 {
			t.Errorf("%s names the other shard (pid %d) among its busiest neighbours in %d ticks", r.ID, other, named)
		}
	}
}
