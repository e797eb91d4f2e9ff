package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/stats"
)

// The tests of issue 20's queue defects: each runs tare run --queue
// against the real Redis and real tare worker processes.

// testQueue is a queue name of the test's own, cleaned up when it ends.
func testQueue(t *testing.T, what string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", what, time.Now().UnixNano())
	t.Cleanup(func() { tareCmd(t, "cleanup", "--redis", redisURL(), "--queue", name, "--wait", "2s") })
	return name
}

// startWorker runs `tare worker` on queue name as a process of its own,
// killed when the test ends; args are extra flags.
func startWorker(t *testing.T, name, modelURL string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w := exec.CommandContext(ctx, os.Args[0], append([]string{"worker", "--redis", redisURL(), "--queue", name, "--model", modelURL + "/v1"}, args...)...)
	w.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
	var logs bytes.Buffer
	w.Stderr = &logs
	if err := w.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Process.Kill()
		w.Wait()
		cancel()
		if t.Failed() {
			t.Logf("worker on %s:\n%s", name, logs.String())
		}
	})
	return w
}

// hangingModel is a model endpoint that never answers: it holds each
// request until the caller gives up. (It reads the body first: only then
// does net/http notice a client that went away.)
func hangingModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// waitPending waits until n jobs of queue name are held by workers.
func waitPending(t *testing.T, rdb *redis.Client, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := rdb.XPending(t.Context(), queue.KeyPrefix(name)+"jobs", queue.Group).Result()
		if err == nil && p.Count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %d jobs pending on %s (%v, %v)", n, name, p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func parseSummary(t *testing.T, stdout string) tare.Summary {
	t.Helper()
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary json: %v\n%s", err, stdout)
	}
	return s
}

// TestQueueDrainAfterLastArrival (issue 20, defect 2): SIGINT after the
// last arrival, with every job held by a worker whose model does not
// answer: tare stops after --drain, not after --job-timeout, and counts the
// jobs still out as unfinished in the partial summary.
func TestQueueDrainAfterLastArrival(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tare and a worker as processes; skipped with -short")
	}
	rdb := redisClient(t)
	name := testQueue(t, "draintest")
	startWorker(t, name, hangingModel(t).URL, "--concurrency", "4")
	const drain, jobTimeout = time.Second, 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "3", "--rate", "50/s",
		"--drain", drain.String(), "--job-timeout", jobTimeout.String(), "--json", "--quiet", "--no-store", "--tick", "200ms")
	cmd.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPending(t, rdb, name, 3) // every arrival is out, held by the worker
	sigAt := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	took := time.Since(sigAt)
	if err != nil {
		t.Fatalf("tare run exited with %v after SIGINT; want 0\n%s", err, stderr.String())
	}
	t.Logf("returned %v after SIGINT (drain %v, job timeout %v)", took, drain, jobTimeout)
	// Before the job timeout is what the jobs' kind says below: unfinished
	// (the run ended first), not timed out.
	if took < drain {
		t.Errorf("tare run returned %v after SIGINT; want after the drain %v", took, drain)
	}
	s := parseSummary(t, stdout.String())
	if s.Run.Status != tare.StatusInterrupted || s.Requests.Total != 3 || s.ErrorKinds[queue.KindUnfinished] != 3 {
		t.Errorf("status %q requests %+v kinds %v; want interrupted, the 3 jobs unfinished", s.Run.Status, s.Requests, s.ErrorKinds)
	}
	if w := strings.Join(s.Verdict.Warnings, "\n"); !strings.Contains(w, "3 jobs had no result when the interrupted run's --drain was over") {
		t.Errorf("warnings %q: want the unfinished jobs explained", s.Verdict.Warnings)
	}
}

// TestQueueServiceIsTheWorkers (issue 20, defect 3): with jobs queueing
// for one worker, the summary's service is the worker's own time (done −
// worker start), far below the end-to-end latency, and its maximum is the
// longest done − start in the results stream.
func TestQueueServiceIsTheWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process; skipped with -short")
	}
	rdb := redisClient(t)
	name := testQueue(t, "servicetest")
	model := testservice.Model(t, modelsim.Config{TokenCost: 2 * time.Millisecond, MeanTokens: 16})
	startWorker(t, name, model.URL, "--concurrency", "1")
	// 8 jobs in a burst for one worker that does one at a time: the k-th
	// waits for the k before it.
	code, stdout, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "8", "--rate", "400/s", "--arrival", "constant",
		"--max-tokens", "16", "--json", "--quiet", "--no-store", "--tick", "200ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	s := parseSummary(t, stdout)
	if s.Requests.OK != 8 || s.Service.P95 == nil || s.Latency.P95 == nil || s.Queue == nil || s.Queue.Wait.P95 == nil {
		t.Fatalf("requests %+v service %+v latency %+v queue %+v: want 8 ok with every figure", s.Requests, s.Service, s.Latency, s.Queue)
	}
	t.Logf("service p95 %.1fms, latency p95 %.1fms, queue wait p95 %.1fms", *s.Service.P95, *s.Latency.P95, *s.Queue.Wait.P95)
	if *s.Service.P95 > *s.Latency.P95/2 {
		t.Errorf("service p95 %.1fms is not well below latency p95 %.1fms: it still counts the queue wait", *s.Service.P95, *s.Latency.P95)
	}
	// The worker's own stamps.
	entries, err := rdb.XRange(t.Context(), queue.KeyPrefix(name)+"results", "-", "+").Result()
	if err != nil || len(entries) != 8 {
		t.Fatalf("results stream: %d entries, %v", len(entries), err)
	}
	longest := 0.0
	for _, e := range entries {
		start, _ := strconv.ParseInt(fmt.Sprint(e.Values["start"]), 10, 64)
		done, _ := strconv.ParseInt(fmt.Sprint(e.Values["done"]), 10, 64)
		longest = max(longest, float64(done-start)/1e6)
	}
	if got := *s.Service.Max; math.Abs(got-longest) > 0.01*longest+0.01 {
		t.Errorf("service max %.3fms; the worker's longest done − start was %.3fms", got, longest)
	}
	code, text, _ := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "2", "--rate", "20/s", "--max-tokens", "4", "--quiet", "--no-store")
	if code != 0 || !strings.Contains(text, "worker start → done") {
		t.Errorf("text summary: exit %d; want the service line to say it is the worker's time:\n%s", code, text)
	}
}

// TestQueueNoWorker (issue 20, defect 4): tare run on a queue nobody
// serves exits 2 after --wait-workers, naming the queue and how to start a
// worker, and sends nothing; a worker that registers during the wait is
// waited for.
func TestQueueNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process; skipped with -short")
	}
	rdb := redisClient(t)
	name := testQueue(t, "noworkertest")
	began := time.Now()
	code, _, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "3", "--job-timeout", "2s",
		"--wait-workers", "500ms", "--no-store", "--tick", "200ms")
	t.Logf("exit %d after %v: %s", code, time.Since(began), stderr)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{`no worker serves queue "` + name + `"`, "--wait-workers 500ms", "tare worker --queue " + redisURL() + " --queue-name " + name} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if n, _ := rdb.XLen(t.Context(), queue.KeyPrefix(name)+"jobs").Result(); n != 0 {
		t.Errorf("%d jobs enqueued on a queue nobody serves; want none", n)
	}

	// A worker that comes up while tare waits.
	model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4})
	time.AfterFunc(300*time.Millisecond, func() { startWorker(t, name, model.URL) })
	code, stdout, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "3", "--rate", "20/s",
		"--wait-workers", "30s", "--json", "--no-store", "--tick", "200ms")
	if code != 0 {
		t.Fatalf("run with a worker starting during the wait: exit %d: %s", code, stderr)
	}
	if s := parseSummary(t, stdout); s.Requests.OK != 3 || s.Queue == nil || s.Queue.Workers == nil || s.Queue.Workers.Max != 1 {
		t.Errorf("requests %+v queue %+v: want all 3 done by the one worker", s.Requests, s.Queue)
	}
	if !strings.Contains(stderr, "waiting up to 30s for a worker") {
		t.Errorf("stderr %q: want it to say it waits", stderr)
	}
}

// TestQueueWorkersLost (issue 20, defects 4 and 5): the only worker is
// killed holding a job; the run says every worker left, and the summary
// shows the dead worker's job pending, the workers gone.
func TestQueueWorkersLost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process for a few seconds; skipped with -short")
	}
	rdb := redisClient(t)
	name := testQueue(t, "losttest")
	// A short claim idle: the dead worker's registration lapses in 600ms.
	w := startWorker(t, name, hangingModel(t).URL, "--claim-idle", "600ms")
	go func() {
		waitPending(t, rdb, name, 1)
		w.Process.Signal(syscall.SIGKILL)
	}()
	code, stdout, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "4", "--rate", "2/s", "--arrival", "constant",
		"--job-timeout", "3s", "--json", "--quiet", "--no-store", "--tick", "200ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	s := parseSummary(t, stdout)
	t.Logf("requests %+v kinds %v queue %+v warnings %q", s.Requests, s.ErrorKinds, s.Queue, s.Verdict.Warnings)
	if s.Requests.Errors != 4 {
		t.Errorf("requests %+v: want every job failed, no worker left to do them", s.Requests)
	}
	q := s.Queue
	if q == nil || q.Workers == nil || q.Workers.Max != 1 || q.Workers.End != 0 || q.Workers.Lost != 1 {
		t.Fatalf("queue %+v: want workers 1 at most, 0 at the end, lost once", q)
	}
	if q.OldestPending == nil || q.OldestPending.Max == nil || *q.OldestPending.Max < 1000 {
		t.Errorf("oldest pending %+v: want the dead worker's job seen pending for a second or more", q.OldestPending)
	}
	if w := strings.Join(s.Verdict.Warnings, "\n"); !strings.Contains(w, fmt.Sprintf("every worker of queue %q left", name)) || !strings.Contains(w, "none came back") {
		t.Errorf("warnings %q: want one saying every worker left", s.Verdict.Warnings)
	}
}

// TestQueueProgressShowsTrouble (issue 20, defects 4 and 5): the live line
// of a queue run shows the jobs workers hold and the oldest one's age, the
// redeliveries, and the workers all gone.
func TestQueueProgressShowsTrouble(t *testing.T) {
	rdb := redisClient(t)
	name := testQueue(t, "progresstest")
	ctx := t.Context()
	b, err := queue.NewRedis(ctx, rdb, name)
	if err != nil {
		t.Fatal(err)
	}
	built, err := session.QueueTarget(b, queue.TargetConfig{Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer built.Release()
	if err := b.Register(ctx, queue.WorkerInfo{Name: "doomed"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := built.Depth()(ctx); err != nil { // the first look counts the worker
		t.Fatal(err)
	}
	res := make(chan tare.Result, 1)
	go func() {
		r := tare.Result{Sent: time.Now()}
		jctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		defer cancel()
		built.Target.Do(jctx, &r)
		res <- r
	}()
	// The worker takes the job and dies: its registration goes.
	waitFetch := time.Now().Add(5 * time.Second)
	for {
		ds, err := b.Fetch(ctx, "doomed", 1, 100*time.Millisecond)
		if err != nil || len(ds) == 1 || time.Now().After(waitFetch) {
			break
		}
	}
	b.Unregister(ctx, "doomed")
	time.Sleep(1100 * time.Millisecond) // the depth sampler counts workers once a second
	if _, err := built.Depth()(ctx); err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	p := &progress{w: &line}
	p.show(stats.Progress{}, load.Progress{Sent: 1, InFlight: 1}, built.Target)
	out := line.String()
	for _, want := range []string{"in flight 1", "pending 1 (oldest 1.", "redelivered 0", "workers 0: ALL GONE"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress line %q does not say %q", out, want)
		}
	}
	<-res
}

// TestQueueRunIDAndStrayResults (issue 20, defects 5 and 11): the jobs'
// run field is the printed (and stored) run id, and a result published
// twice or for an id the run never used is counted in the summary, not
// hidden.
func TestQueueRunIDAndStrayResults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process; skipped with -short")
	}
	rdb := redisClient(t)
	name := testQueue(t, "straytest")
	model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4})
	startWorker(t, name, model.URL)
	results := queue.KeyPrefix(name) + "results"
	runField := make(chan string, 1)
	go func() {
		// A copy of the first result, and one for a job number never used.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			es, err := rdb.XRangeN(context.Background(), results, "-", "+", 1).Result()
			if err != nil || len(es) == 0 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			first := es[0].Values
			rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: results, Values: first})
			stray := map[string]any{}
			for k, v := range first {
				stray[k] = v
			}
			stray["id"] = "99999"
			rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: results, Values: stray})
			runField <- fmt.Sprint(first["run"])
			return
		}
		runField <- ""
	}()
	code, stdout, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--jobs", "10", "--rate", "5/s", "--arrival", "constant",
		"--max-tokens", "4", "--json", "--quiet", "--tick", "200ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	s := parseSummary(t, stdout)
	if run := <-runField; run == "" || run != s.Run.ID {
		t.Errorf("the jobs' run field is %q, the printed run id %q: want the same", run, s.Run.ID)
	}
	q := s.Queue
	if s.Requests.OK != 10 || q == nil || q.DuplicateResults == nil || *q.DuplicateResults != 1 || *q.UnknownResults != 1 || *q.LateResults != 0 || *q.Redelivered != 0 {
		t.Fatalf("requests %+v queue %+v: want 10 ok, 1 duplicate and 1 unknown result", s.Requests, q)
	}
	if code, out, _ := tareCmd(t, "runs", "show", s.Run.ID, "--json"); code != 0 || parseSummary(t, out).Run.ID != s.Run.ID {
		t.Errorf("runs show %s: exit %d: the printed id is not the stored one", s.Run.ID, code)
	}
}

// TestQueueProtocolDocWaitWorkers: the wait docs/job-protocol.md promises
// a worker's registration is tare run's default.
func TestQueueProtocolDocWaitWorkers(t *testing.T) {
	raw, err := os.ReadFile("../../docs/job-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("`--wait-workers` (%d s)", int(session.DefaultWaitWorkers.Seconds()))
	if doc := strings.Join(strings.Fields(string(raw)), " "); !strings.Contains(doc, want) {
		t.Errorf("docs/job-protocol.md does not say %q", want)
	}
}
