package bullmq

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests below load a real BullMQ worker (Node, bullmq pinned by
// internal/testkit/testservice/testdata/bullmq/package-lock.json) whose "answer"
// jobs call the simulated model over loopback. Each test has a
// redis-server of its own.

// bullRig is one test's private Redis and simulated model.
type bullRig struct {
	redis *testservice.PrivateRedis
	model string
	rdb   *redis.Client
}

func newBullRig(t *testing.T) bullRig {
	testservice.NeedBullMQ(t)
	r := testservice.NewPrivateRedis(t)
	model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4}).URL
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	t.Cleanup(func() { rdb.Close() })
	return bullRig{redis: r, model: model, rdb: rdb}
}

func (rig bullRig) start(t *testing.T, o testservice.BullMQOptions) *testservice.Worker {
	o.Queue = "agents"
	return testservice.BullMQWorker(t, rig.redis.URL(), rig.model, o)
}

func (rig bullRig) url(name string) string {
	return fmt.Sprintf("bullmq+redis://127.0.0.1:%d/0?queue=agents&name=%s", rig.redis.Port, name)
}

// testJobData is the test jobs' data: the worker returns their seq.
const testJobData = `{"seq": "{{seq}}", "prompt": "job {{id}}"}`

// open opens the rig's queue for job name with the test jobs' data, as a
// Target whose jobs time out after timeout, and waits for a worker.
func (rig bullRig) open(t *testing.T, name string, timeout time.Duration) (*queue.Target, *Source) {
	t.Helper()
	return rig.openWith(t, name, testJobData, timeout)
}

// openWith is open with the jobs' data given, --job-args.
func (rig bullRig) openWith(t *testing.T, name, jobData string, timeout time.Duration) (*queue.Target, *Source) {
	t.Helper()
	data, err := queue.ParseJobData(jobData, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := queuetest.Context(t)
	src, err := Open(ctx, rig.url(name), queue.FrameworkConfig{Args: data, Timeout: timeout})
	if err != nil {
		t.Fatalf("open %s: %v", rig.url(name), err)
	}
	tg, err := queue.NewTarget(src, queue.TargetConfig{RunID: fmt.Sprintf("%x", time.Now().UnixNano()), Timeout: timeout, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tg.Close()
		src.Close()
	})
	queuetest.Eventually(t, 20*time.Second, "a worker to show on "+rig.url(name), func() bool {
		ws, err := tg.Workers(ctx)
		return err == nil && len(ws) > 0
	})
	return tg, src
}

// bullReturned reads what job seq of run returned, from its hash: {"seq": …}.
func bullReturned(t *testing.T, rdb *redis.Client, runID string, seq int) int {
	t.Helper()
	raw, err := rdb.HGet(queuetest.Context(t), fmt.Sprintf("bull:agents:%s%s-%d", queue.JobIDPrefix, runID, seq), "returnvalue").Result()
	if err != nil {
		t.Fatalf("returnvalue of job %d: %v", seq, err)
	}
	var v struct{ Seq int }
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("job %d returned %s: %v", seq, raw, err)
	}
	return v.Seq
}

// TestBullMQJobs: 200 jobs at 20/s onto a real BullMQ worker: every job
// ok, with a queue wait and a service from the worker's own stamps, and
// each result the one of its own job.
func TestBullMQJobs(t *testing.T) {
	rig := newBullRig(t)
	rig.start(t, testservice.BullMQOptions{})
	tg, _ := rig.open(t, "answer", 30*time.Second)
	const jobs = 200
	results := queuetest.Drive(t, tg, jobs, 20, nil)
	if k := queuetest.Kinds(results); k[""] != jobs {
		t.Fatalf("outcomes %v: want all %d ok", k, jobs)
	}
	for seq, r := range results {
		switch {
		case r.Started.IsZero():
			t.Fatalf("job %d: no start time, so no queue wait", seq)
		case r.QueueWait() < 0 || r.Service() < 0 || r.Done.Before(r.Started):
			t.Fatalf("job %d: queue wait %v, service %v: want both measured", seq, r.QueueWait(), r.Service())
		case r.Deliveries != 1:
			t.Fatalf("job %d: %d deliveries, want 1", seq, r.Deliveries)
		}
		if got := bullReturned(t, rig.rdb, tg.RunID(), seq); got != seq {
			t.Fatalf("the result of job %d is job %d's", seq, got)
		}
	}
	st := tg.Stats()
	if st.Matched != jobs || st.Duplicates != 0 || st.Unknown != 0 || st.Late != 0 || st.Skewed != 0 {
		t.Errorf("stats %+v: want %d matched, nothing else", st, jobs)
	}
	if notes := tg.Notes(); len(notes) != 0 {
		t.Errorf("notes %q: want none", notes)
	}
	if n, _ := rig.rdb.Get(queuetest.Context(t), "bull:agents:id").Int(); n != jobs {
		t.Errorf("bull:agents:id is %d, want %d: one per job, as Queue.add counts", n, jobs)
	}
}

// bullmqScript runs a Node script of testdata/bullmq with args and
// returns its output.
func bullmqScript(t *testing.T, script string, args ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "internal", "testkit", "testservice", "testdata", "bullmq")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s %v: %v\n%s", script, args, err, out)
	}
	return string(out)
}

// TestBullMQAddsAsQueueAdd: a job tare adds and one BullMQ's own
// Queue.add adds (testdata/bullmq/add.js) have the same hash fields and
// options, the same place in the queue, and the same events; BullMQ's
// Job.fromId reads tare's job back with its name and data.
func TestBullMQAddsAsQueueAdd(t *testing.T) {
	rig := newBullRig(t)
	ctx := queuetest.Context(t)
	data, err := queue.ParseJobData(`{"seq": "{{seq}}", "prompt": "{{prompt}}"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open(ctx, rig.url("answer"), queue.FrameworkConfig{Args: data})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	job := queue.Job{ID: "4", RunID: "r1", Enqueued: time.Now(), Prompt: "hello"}
	if err := src.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	theirs := strings.TrimSpace(bullmqScript(t, "add.js", rig.redis.URL(), "agents", "answer", `{"prompt":"hello","seq":4}`, "their-1"))

	read := func(id string) map[string]string {
		h, err := rig.rdb.HGetAll(ctx, "bull:agents:"+id).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ours, want := read(queue.FrameworkJobID(job)), read(theirs)
	if ours["timestamp"] == "" || want["timestamp"] == "" {
		t.Fatalf("timestamps %q, %q: want both set", ours["timestamp"], want["timestamp"])
	}
	delete(ours, "timestamp")
	delete(want, "timestamp")
	var ourOpts, theirOpts map[string]any
	if json.Unmarshal([]byte(ours["opts"]), &ourOpts) != nil || json.Unmarshal([]byte(want["opts"]), &theirOpts) != nil {
		t.Fatalf("opts %q, %q: want JSON", ours["opts"], want["opts"])
	}
	ourOpts["jobId"], ours["opts"], want["opts"] = theirOpts["jobId"], "", "" // the ids differ, and cjson orders keys as it likes
	if fmt.Sprint(ourOpts) != fmt.Sprint(theirOpts) || fmt.Sprint(ours) != fmt.Sprint(want) {
		t.Errorf("tare's job %v opts %v\nQueue.add's %v opts %v", ours, ourOpts, want, theirOpts)
	}
	if wait := rig.rdb.LRange(ctx, "bull:agents:wait", 0, -1).Val(); !slices.Equal(wait, []string{theirs, queue.FrameworkJobID(job)}) {
		t.Errorf("wait list %q: want both jobs, newest first", wait)
	}
	if n := rig.rdb.ZCard(ctx, "bull:agents:marker").Val(); n != 1 {
		t.Errorf("marker holds %d entries, want 1", n)
	}
	var events []string
	for _, m := range rig.rdb.XRange(ctx, "bull:agents:events", "-", "+").Val() {
		events = append(events, fmt.Sprint(m.Values["event"], " ", m.Values["jobId"] != nil))
	}
	if want := []string{"added true", "waiting true", "added true", "waiting true"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
	got := strings.TrimSpace(bullmqScript(t, "read.js", rig.redis.URL(), "agents", queue.FrameworkJobID(job)))
	if want := `answer {"prompt":"hello","seq":4}`; got != want {
		t.Errorf("BullMQ's Job.fromId reads tare's job as %q, want %q", got, want)
	}
}

// TestBullMQPaused: on a paused queue tare's jobs wait in the paused list,
// with no marker, as BullMQ 5 puts them, and are served once it resumes.
func TestBullMQPaused(t *testing.T) {
	rig := newBullRig(t)
	ctx := queuetest.Context(t)
	rig.rdb.HSet(ctx, "bull:agents:meta", "paused", 1)
	src, err := Open(ctx, rig.url("answer"), queue.FrameworkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	job := queue.Job{ID: "0", RunID: "r1", Enqueued: time.Now()}
	if err := src.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	if p, w, m := rig.rdb.LLen(ctx, "bull:agents:paused").Val(), rig.rdb.LLen(ctx, "bull:agents:wait").Val(), rig.rdb.Exists(ctx, "bull:agents:marker").Val(); p != 1 || w != 0 || m != 0 {
		t.Errorf("paused %d, wait %d, marker %d: want the job paused, no marker", p, w, m)
	}
	if d, err := src.Depth(ctx); err != nil || d.Waiting != 1 {
		t.Errorf("depth %+v, %v: want the paused job waiting", d, err)
	}
}

// TestBullMQFaults: the worker and its Redis failing mid-run, and jobs
// that fail: every job is accounted for once, ok or an error of its kind.
func TestBullMQFaults(t *testing.T) {
	t.Run("worker killed", func(t *testing.T) {
		rig := newBullRig(t)
		o := testservice.BullMQOptions{LockDuration: 2 * time.Second}
		w := rig.start(t, o)
		// 80 ms a job, a job every 50 ms: the worker holds one or two
		// when it is killed.
		// The job timeout is long enough for the next worker to boot on a
		// busy machine: the jobs sent after the restart wait for it.
		tg, _ := rig.openWith(t, "answer", `{"seq": "{{seq}}", "sleep_ms": 80}`, 20*time.Second)
		var restartedAt time.Time
		results := queuetest.Drive(t, tg, 80, 20, func(at time.Duration) {
			switch {
			case at > 1500*time.Millisecond && !w.Gone():
				w.Kill()
			case at > 2500*time.Millisecond && restartedAt.IsZero():
				rig.start(t, o)
				restartedAt = time.Now()
			}
		})
		k := queuetest.Kinds(results)
		redelivered := 0
		for _, r := range results {
			if r.Err == "" && r.Deliveries > 1 {
				redelivered++
			}
		}
		t.Logf("outcomes %v, %d ok after a second delivery, stats %+v, notes %q", k, redelivered, tg.Stats(), tg.Notes())
		if k[""]+k[queue.KindTimeout]+k[queue.KindTaskFailed] != 80 {
			t.Errorf("outcomes %v: want every job ok, or timed out or failed with the worker", k)
		}
		queuetest.ServedAfter(t, results, restartedAt)
		if redelivered+k[queue.KindTimeout]+k[queue.KindTaskFailed] == 0 {
			t.Errorf("outcomes %v, none delivered twice: want the jobs the killed worker held run again, or counted lost", k)
		}
	})
	t.Run("redis restarted", func(t *testing.T) {
		rig := newBullRig(t)
		rig.start(t, testservice.BullMQOptions{})
		tg, _ := rig.open(t, "answer", 4*time.Second)
		restarted := false
		results := queuetest.Drive(t, tg, 80, 20, func(at time.Duration) {
			if at > 1500*time.Millisecond && !restarted {
				rig.redis.Stop()
				time.Sleep(500 * time.Millisecond)
				rig.redis.Start(t)
				restarted = true
			}
		})
		k := queuetest.Kinds(results)
		t.Logf("outcomes %v, stats %+v", k, tg.Stats())
		if k[""] == 0 || k[queue.KindUnavailable] == 0 || k[""]+k[queue.KindUnavailable]+k[queue.KindTimeout] != 80 {
			t.Errorf("outcomes %v: want some ok, some %q, and no other kind but %q", k, queue.KindUnavailable, queue.KindTimeout)
		}
		if k[""] < 20 {
			t.Errorf("outcomes %v: want the worker back serving after the restart", k)
		}
	})
	t.Run("job throws", func(t *testing.T) {
		rig := newBullRig(t)
		rig.start(t, testservice.BullMQOptions{})
		tg, _ := rig.open(t, "boom", 10*time.Second)
		if k := queuetest.Kinds(queuetest.Drive(t, tg, 10, 20, nil)); k["task raised TypeError"] != 10 {
			t.Errorf("outcomes %v: want all 10 %q", k, "task raised TypeError")
		}
		if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "10 BullMQ jobs failed") || !strings.Contains(notes, `"boom `) {
			t.Errorf("notes %q: want the 10 failures and their reasons", notes)
		}
	})
	t.Run("unknown job name", func(t *testing.T) {
		rig := newBullRig(t)
		rig.start(t, testservice.BullMQOptions{})
		tg, _ := rig.open(t, "nope", 10*time.Second)
		if k := queuetest.Kinds(queuetest.Drive(t, tg, 5, 20, nil)); k["task raised Error"] != 5 {
			t.Errorf("outcomes %v: want all 5 %q", k, "task raised Error")
		}
		if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, `"unknown job name nope" (5)`) {
			t.Errorf("notes %q: want the worker's reason for all 5", notes)
		}
	})
}

// TestBullMQRemovedOnFinish: a worker that removes the jobs it finishes
// (removeOnComplete, removeOnFail) leaves no hash to read: the start and
// end come from the events stream, and the notes say so.
func TestBullMQRemovedOnFinish(t *testing.T) {
	rig := newBullRig(t)
	rig.start(t, testservice.BullMQOptions{Remove: true})
	tg, _ := rig.open(t, "answer", 10*time.Second)
	results := queuetest.Drive(t, tg, 20, 20, nil)
	if k := queuetest.Kinds(results); k[""] != 20 {
		t.Fatalf("outcomes %v: want all ok", k)
	}
	for seq, r := range results {
		if r.Started.IsZero() || r.Done.Before(r.Started) {
			t.Errorf("job %d: started %v, done %v: want both from the events", seq, r.Started, r.Done)
		}
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "20 BullMQ jobs were removed by the worker") {
		t.Errorf("notes %q: want them to say the stamps came from the events", notes)
	}
	if n := rig.rdb.Exists(queuetest.Context(t), fmt.Sprintf("bull:agents:%s%s-0", queue.JobIDPrefix, tg.RunID())).Val(); n != 0 {
		t.Errorf("job 0's hash exists: the worker was to remove it")
	}
}

// TestBullMQNamedWorker: a worker with a name shows by it.
func TestBullMQNamedWorker(t *testing.T) {
	rig := newBullRig(t)
	rig.start(t, testservice.BullMQOptions{Name: "gpu-1"})
	tg, _ := rig.open(t, "answer", 10*time.Second)
	ws, err := tg.Workers(queuetest.Context(t))
	if err != nil || len(ws) != 1 || ws[0].Name != "gpu-1" || ws[0].ClientAddr == "" || ws[0].ServerAddr == "" {
		t.Fatalf("workers %+v, %v: want gpu-1 with its connection's addresses", ws, err)
	}
}

// TestBullMQCleanup: cleanup after a run removes tare's jobs and keys,
// and leaves the user's job and the queue's own keys.
func TestBullMQCleanup(t *testing.T) {
	rig := newBullRig(t)
	ctx := queuetest.Context(t)
	theirs := strings.TrimSpace(bullmqScript(t, "add.js", rig.redis.URL(), "agents", "answer", `{"seq":1}`, "their-1"))
	u := rig.url("answer")
	src, err := Open(ctx, u, queue.FrameworkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // no worker: the jobs wait in the queue
		if err := src.Enqueue(ctx, queue.Job{ID: fmt.Sprint(i), RunID: "run-1", Enqueued: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// One of tare's jobs as a worker leaves it: finished, in the completed set.
	rig.rdb.LRem(ctx, "bull:agents:wait", 0, "tare-run-1-2")
	rig.rdb.ZAdd(ctx, "bull:agents:completed", redis.Z{Score: 1, Member: "tare-run-1-2"})
	rig.rdb.Set(ctx, "bull:agents:tare-run-1-2:lock", "x", 0)
	src.Close()
	removed, err := Cleanup(ctx, strings.Replace(u, "&name=answer", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %q", removed)
	want := []string{`"bull:agents:completed" entry tare-run-1-2`, `"bull:agents:wait" entry tare-run-1-0`, `"bull:agents:wait" entry tare-run-1-1`,
		"bull:agents:tare-run-1-0", "bull:agents:tare-run-1-1", "bull:agents:tare-run-1-2", "bull:agents:tare-run-1-2:lock", "tare:bullmq:bull:agents:epoch"}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q\nwant %q", removed, want)
	}
	keys := slices.Sorted(slices.Values(rig.rdb.Keys(ctx, "*").Val()))
	if want := slices.Sorted(slices.Values([]string{"bull:agents:" + theirs, "bull:agents:events", "bull:agents:id", "bull:agents:marker", "bull:agents:meta", "bull:agents:wait"})); !slices.Equal(keys, want) {
		t.Errorf("keys left %q, want the user's job and the queue's own keys %q", keys, want)
	}
	if ids := rig.rdb.LRange(ctx, "bull:agents:wait", 0, -1).Val(); !slices.Equal(ids, []string{theirs}) {
		t.Errorf("wait holds %q: want only the user's job", ids)
	}
}
