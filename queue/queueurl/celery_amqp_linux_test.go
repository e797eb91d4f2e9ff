package queueurl

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/celery"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests below are what only Celery on RabbitMQ does: the broker
// confirms each message or says why not, returns those no queue takes,
// and drops those that expire; TestFrameworkJobs and TestFrameworkFaults
// run the rest against it as against the other brokers.

// amqpSource opens the Celery queue q of the shared RabbitMQ, its results
// in a private Redis, with no worker, and a Target on it whose jobs time
// out after timeout.
func amqpSource(t *testing.T, q string, timeout time.Duration) (*queue.Target, *celery.Source, *testservice.PrivateRedis) {
	t.Helper()
	broker := testservice.RabbitMQ(t)
	r := testservice.NewPrivateRedis(t)
	u := "celery+" + broker + "?" + url.Values{"queue": {q}, "task": {"tasks.answer"}, "backend": {r.URL()}}.Encode()
	c, err := celery.Open(queuetest.Context(t), u, queue.FrameworkConfig{Timeout: timeout})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	tg, err := queue.NewTarget(c, queue.TargetConfig{RunID: fmt.Sprintf("%x", time.Now().UnixNano()), Timeout: timeout, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tg.Close()
		c.Close()
	})
	return tg, c, r
}

// TestCeleryAMQPNoQueue: jobs published to a queue that does not exist
// (no worker declared it: a wrong name) come back from the broker and
// fail at once as "no such queue", rather than timing out; and no worker
// serves it.
func TestCeleryAMQPNoQueue(t *testing.T) {
	testservice.NeedPython(t, "celery") // the rig of every Celery test
	tg, _, _ := amqpSource(t, queuetest.QueueName(), 20*time.Second)
	ctx := queuetest.Context(t)
	// A job whose timeout ends it is a timeout (the kind says so): all 5
	// unroutable is all 5 failed from the broker's return, before it.
	if k := queuetest.Kinds(queuetest.DoAll(ctx, tg, 5)); k[queue.KindUnroutable] != 5 {
		t.Fatalf("outcomes %v: want all 5 %q, not %q", k, queue.KindUnroutable, queue.KindTimeout)
	}
	if ws, err := tg.Workers(ctx); err != nil || len(ws) != 0 {
		t.Errorf("workers %v, %v: want none for a queue that does not exist", ws, err)
	}
	if d, err := tg.Depth(ctx); err != nil || d.Waiting != 0 {
		t.Errorf("depth %+v, %v: want 0 waiting", d, err)
	}
}

// TestCeleryAMQPUnconfirmed: a broker that refuses a message (a full
// queue that rejects publishes) nacks it: that job fails as "publish not
// confirmed", counted apart, while the one it took waits for a worker.
func TestCeleryAMQPUnconfirmed(t *testing.T) {
	testservice.NeedPython(t, "celery")
	q := queuetest.QueueName()
	broker := testservice.RabbitMQ(t)
	testservice.DeclareQueue(t, broker, q, map[string]any{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	tg, _, _ := amqpSource(t, q, 4*time.Second)
	ctx := queuetest.Context(t)
	done := make(chan []tare.Result)
	go func() { done <- queuetest.DoAll(ctx, tg, 3) }()
	// Before the job it holds times out (and its message expires with it).
	queuetest.Eventually(t, 3*time.Second, "the queue to hold the 1 message it took", func() bool {
		d, err := tg.Depth(ctx)
		return err == nil && d.Waiting == 1
	})
	k := queuetest.Kinds(<-done)
	if k[queue.KindUnconfirmed] != 2 || k[queue.KindTimeout] != 1 {
		t.Errorf("outcomes %v: want 2 %q (the queue was full) and the one it took %q", k, queue.KindUnconfirmed, queue.KindTimeout)
	}
	if st := tg.Stats(); st.Unconfirmed != 2 || st.Enqueued != 1 {
		t.Errorf("stats %+v: want 2 unconfirmed, 1 enqueued", st)
	}
}

// TestCeleryAMQPBacklogExpires: messages a run left on the queue (its
// worker gone) expire in the broker with the job timeout: the worker that
// comes back never sees them, and stores no state for them.
func TestCeleryAMQPBacklogExpires(t *testing.T) {
	const timeout = time.Second
	rig, src, ids := leaveBacklog(t, celeryAMQPRig(t, false), timeout)
	ctx := queuetest.Context(t)
	queuetest.Eventually(t, 10*time.Second, "the left-over messages to expire", func() bool {
		d, err := src.Depth(ctx)
		return err == nil && d.Waiting == 0
	})
	rig.start(t)
	queuetest.Eventually(t, 20*time.Second, "the worker back", func() bool {
		ws, err := src.Workers(ctx)
		return err == nil && len(ws) > 0
	})
	time.Sleep(time.Second) // a task it ran would have a state by now
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rig.redis.Port)})
	defer rdb.Close()
	for _, id := range ids {
		if s, err := rdb.Get(ctx, "celery-task-meta-"+id).Result(); err != redis.Nil {
			t.Errorf("left-over task %s: state %q (%v); want none, expired before a worker took it", id, s, err)
		}
	}
}

// TestCeleryAMQPCleanup: cleanup removes tare's task states and keys
// from the result backend, and nothing else.
func TestCeleryAMQPCleanup(t *testing.T) {
	testservice.NeedPython(t, "celery")
	q := queuetest.QueueName()
	tg, _, r := amqpSource(t, q, 5*time.Second)
	ctx := queuetest.Context(t)
	queuetest.DoAll(ctx, tg, 2) // no queue: both fail at once, the epoch key stays
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	defer rdb.Close()
	userKeys := []string{"celery-task-meta-5a8a9881-7963-4772-95cf-0c98de7aa3cf", "app:settings"}
	for _, k := range append([]string{"celery-task-meta-" + "tare-run-1-0"}, userKeys...) {
		rdb.Set(ctx, k, "x", 0)
	}
	removed, err := Cleanup(ctx, "celery+"+testservice.RabbitMQ(t)+"?"+url.Values{"queue": {q}, "backend": {r.URL()}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(removed, " "); got != "celery-task-meta-tare-run-1-0 tare:celery:"+q+":epoch" {
		t.Errorf("removed %q: want tare's task state and its epoch key", removed)
	}
	keys, _ := rdb.Keys(ctx, "*").Result()
	if strings.Join(slices.Sorted(slices.Values(keys)), " ") != strings.Join(slices.Sorted(slices.Values(userKeys)), " ") {
		t.Errorf("keys left %q, want exactly the user's %q", keys, userKeys)
	}
}

// TestCeleryAMQPBadURL: a broker that refuses the login is unavailable,
// naming the broker without its password.
func TestCeleryAMQPBadURL(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("nobody", "s3cret")
	r := testservice.NewPrivateRedis(t)
	raw := "celery+" + u.String() + "?" + url.Values{"task": {"tasks.answer"}, "backend": {r.URL()}}.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = celery.Open(ctx, raw, queue.FrameworkConfig{})
	if tare.ErrorCode(err) != tare.EUNAVAILABLE || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "nobody:xxxxx@") {
		t.Errorf("error %v: want EUNAVAILABLE naming the broker, password hidden", err)
	}
}

// TestCeleryAMQPCheckTask: before the load, the workers are asked which
// tasks they register: a task none of them knows is an error (exit 2)
// naming the ones they do; a task they know passes.
func TestCeleryAMQPCheckTask(t *testing.T) {
	rig := celeryAMQPRig(t, false)
	rig.start(t)
	ctx := queuetest.Context(t)
	for _, tt := range []struct{ task, err string }{
		{"tasks.answer", ""},
		{"tasks.nope", `unknown task "tasks.nope": the Celery worker of queue`},
	} {
		tg, _ := rig.open(t, tt.task, 10*time.Second)
		err := tg.CheckTask(ctx)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v, want no error", tt.task, err)
		case tt.err != "" && (tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "tasks.answer, tasks.boom")):
			t.Errorf("%s: %v, want EINVALID with %q, naming tasks.answer and tasks.boom", tt.task, err, tt.err)
		}
	}
}

// TestCeleryAMQPRPC: a worker whose result backend is rpc:// sends each
// task's states back as messages to the queue the task message names, a
// queue of tare's own: 100 jobs at 20/s all ok, with a queue wait and a
// service, each result matched to its job by its id; a task that raises
// and an unknown task fail with their kinds; the notes say where the
// ends come from.
func TestCeleryAMQPRPC(t *testing.T) {
	rig := celeryAMQPRigWith(t, false, true)
	rig.start(t)
	tg, _ := rig.open(t, "tasks.answer", 30*time.Second)
	const jobs = 100
	results := queuetest.Drive(t, tg, jobs, 20, nil)
	if k := queuetest.Kinds(results); k[""] != jobs {
		t.Fatalf("outcomes %v: want all %d ok", k, jobs)
	}
	noService := 0
	for seq, r := range results {
		switch {
		case r.Started.IsZero():
			t.Fatalf("job %d: no start time, so no queue wait", seq)
		case r.QueueWait() < 0 || r.Service() < 0:
			t.Fatalf("job %d: queue wait %v, service %v: want both measured", seq, r.QueueWait(), r.Service())
		case r.Service() == 0:
			noService++
		}
	}
	if noService > jobs/20 {
		t.Errorf("%d of %d jobs with a service of 0: want at most %d", noService, jobs, jobs/20)
	}
	if st := tg.Stats(); st.Matched != jobs || st.Duplicates != 0 || st.Unknown != 0 || st.Late != 0 {
		t.Errorf("stats %+v: want %d matched, nothing else", st, jobs)
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "rpc://") {
		t.Errorf("notes %q: want them to say the ends are when tare received the replies", notes)
	}
	for task, want := range map[string]string{"tasks.boom": "task raised ValueError", "tasks.nope": queue.KindUnknownTask} {
		tg, _ := rig.open(t, task, 10*time.Second)
		if k := queuetest.Kinds(queuetest.Drive(t, tg, 5, 20, nil)); k[want] != 5 {
			t.Errorf("%s: outcomes %v, want all 5 %q", task, k, want)
		}
	}
}
