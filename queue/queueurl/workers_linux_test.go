package queueurl

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

// The tests below load real Celery and RQ workers, Debian's
// python3-celery and python3-rq run by /usr/bin/python3, whose tasks
// (testdata/celery/tasks.py, testdata/rq/tasks.py) call the simulated
// model over loopback. Each test has a redis-server of its own (the
// broker, or Celery's result backend beside RabbitMQ); Celery on RabbitMQ
// uses the shared server (scripts/test starts it), on a queue of the
// test's own, or a node of the test's own when the test restarts it.

// frameworkRig is what one test runs: a private Redis, the simulated
// model, and how to start the framework's worker on them.
type frameworkRig struct {
	redis   *testservice.PrivateRedis // the broker, or the result backend
	model   string
	start   func(t *testing.T) *testservice.PyWorker
	url     func(task string) string
	restart func(t *testing.T) // crashes the broker and starts it again
}

// The rigs by name: the protocol, and the broker when it is not Redis.
const protocolCeleryAMQP = queue.ProtocolCelery + "+amqp"

func rig(t *testing.T, name string) frameworkRig {
	switch name {
	case queue.ProtocolCelery:
		return celeryRig(t, true)
	case protocolCeleryAMQP:
		return celeryAMQPRig(t, false)
	case queue.ProtocolRQ:
		return rqRig(t)
	}
	t.Fatalf("no rig %q", name)
	return frameworkRig{}
}

func testModel(t *testing.T) string {
	return testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4}).URL
}

// restartRedis crashes r and starts it again, empty.
func restartRedis(r *testservice.PrivateRedis) func(t *testing.T) {
	return func(t *testing.T) {
		r.Stop()
		time.Sleep(500 * time.Millisecond)
		r.Start(t)
	}
}

func celeryRig(t *testing.T, trackStarted bool) frameworkRig {
	testservice.NeedPython(t, "celery")
	r := testservice.NewPrivateRedis(t)
	model := testModel(t)
	return frameworkRig{redis: r, model: model, restart: restartRedis(r),
		start: func(t *testing.T) *testservice.PyWorker {
			return testservice.CeleryWorker(t, r.URL(), model, trackStarted)
		},
		url: func(task string) string {
			return fmt.Sprintf("celery+redis://127.0.0.1:%d/0?queue=celery&task=%s", r.Port, task)
		}}
}

// celeryAMQPRig is Celery on RabbitMQ, its results in a private Redis:
// the shared RabbitMQ, or a node of the test's own when restartable.
func celeryAMQPRig(t *testing.T, restartable bool) frameworkRig {
	return celeryAMQPRigWith(t, restartable, false)
}

// celeryAMQPRigWith is celeryAMQPRig, its results sent back as messages
// (the rpc:// backend) when rpc.
func celeryAMQPRigWith(t *testing.T, restartable, rpc bool) frameworkRig {
	testservice.NeedPython(t, "celery")
	var broker string
	var node *testservice.PrivateRabbitMQ
	if restartable {
		node = testservice.NewPrivateRabbitMQ(t)
		broker = node.URL()
	} else {
		broker = testservice.RabbitMQ(t)
	}
	r := testservice.NewPrivateRedis(t)
	model := testModel(t)
	q := queuetest.QueueName()
	if node == nil {
		testservice.DeleteQueueAtEnd(t, broker, q)
	}
	backend := r.URL()
	if rpc {
		backend = "rpc://"
	}
	rig := frameworkRig{redis: r, model: model,
		start: func(t *testing.T) *testservice.PyWorker {
			return testservice.StartCelery(t, testservice.Celery{Broker: broker, Backend: backend, Model: model, Queue: q, TrackStarted: true})
		},
		url: func(task string) string {
			return "celery+" + broker + "?" + url.Values{"queue": {q}, "task": {task}, "backend": {backend}}.Encode()
		}}
	if node != nil {
		rig.restart = func(t *testing.T) {
			node.Stop()
			node.Start(t)
		}
	}
	return rig
}

func rqRig(t *testing.T) frameworkRig {
	testservice.NeedPython(t, "rq")
	r := testservice.NewPrivateRedis(t)
	model := testModel(t)
	return frameworkRig{redis: r, model: model, restart: restartRedis(r),
		start: func(t *testing.T) *testservice.PyWorker { return testservice.RQWorker(t, r.URL(), model) },
		url: func(task string) string {
			return fmt.Sprintf("rq+redis://127.0.0.1:%d/0?queue=default&func=%s", r.Port, task)
		}}
}

// open opens the rig's queue for task with the test jobs' arguments, as
// a Target whose jobs time out after timeout, and waits for a worker.
func (rig frameworkRig) open(t *testing.T, task string, timeout time.Duration) (*queue.Target, queue.Source) {
	t.Helper()
	args, err := queue.ParseJobArgs(`["{{seq}}"]`, `{"prompt": "job {{id}}"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := queuetest.Context(t)
	src, err := Open(ctx, rig.url(task), "", queue.FrameworkConfig{Args: args, Timeout: timeout})
	if err != nil {
		t.Fatalf("open %s: %v", rig.url(task), err)
	}
	tg, err := queue.NewTarget(src, queue.TargetConfig{RunID: fmt.Sprintf("%x", time.Now().UnixNano()), Timeout: timeout, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tg.Close()
		src.Close()
	})
	queuetest.Eventually(t, 20*time.Second, "a worker to show on "+rig.url(task), func() bool {
		ws, err := tg.Workers(ctx)
		return err == nil && len(ws) > 0
	})
	return tg, src
}

// returned reads what the task returned for job seq of tg's run, from
// the framework's own result keys: {"seq": …}.
func returned(t *testing.T, rdb *redis.Client, protocol, runID string, seq int) int {
	t.Helper()
	ctx := queuetest.Context(t)
	id := fmt.Sprintf("%s%s-%d", queue.JobIDPrefix, runID, seq)
	var value []byte
	switch protocol {
	case queue.ProtocolCelery:
		raw, err := rdb.Get(ctx, "celery-task-meta-"+id).Bytes()
		if err != nil {
			t.Fatalf("celery result of job %d: %v", seq, err)
		}
		var meta struct{ Result json.RawMessage }
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		value = meta.Result
	case queue.ProtocolRQ:
		msgs, err := rdb.XRevRangeN(ctx, "rq:results:"+id, "+", "-", 1).Result()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("rq result of job %d: %v (%d entries)", seq, err, len(msgs))
		}
		s, _ := msgs[0].Values["return_value"].(string)
		if value, err = base64.StdEncoding.DecodeString(s); err != nil {
			t.Fatal(err)
		}
	}
	var v struct{ Seq int }
	if err := json.Unmarshal(value, &v); err != nil {
		t.Fatalf("job %d returned %s: %v", seq, value, err)
	}
	return v.Seq
}

// TestFrameworkJobs: 200 jobs at 20/s onto a real worker of each
// framework (Celery on Redis and on RabbitMQ): every job ok, with a queue
// wait and a service, and each result the one of its own job.
func TestFrameworkJobs(t *testing.T) {
	for _, name := range []string{queue.ProtocolCelery, protocolCeleryAMQP, queue.ProtocolRQ} {
		t.Run(name, func(t *testing.T) {
			protocol, _, _ := strings.Cut(name, "+")
			rig := rig(t, name)
			rig.start(t)
			tg, _ := rig.open(t, "tasks.answer", 30*time.Second)
			const jobs = 200
			results := queuetest.Drive(t, tg, jobs, 20, nil)
			if k := queuetest.Kinds(results); k[""] != jobs {
				t.Fatalf("outcomes %v: want all %d ok", k, jobs)
			}
			rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rig.redis.Port)})
			defer rdb.Close()
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
				if got := returned(t, rdb, protocol, tg.RunID(), seq); got != seq {
					t.Fatalf("the result of job %d is job %d's", seq, got)
				}
			}
			// Celery's start is when tare hears the STARTED state; a
			// 1 ms task whose STARTED reached tare after its date_done (a
			// loaded host) has its start put at its end: service 0. Not
			// more than a few.
			if noService > jobs/20 {
				t.Errorf("%d of %d jobs with a service of 0: want at most %d", noService, jobs, jobs/20)
			} else if noService > 0 {
				t.Logf("%d of %d jobs with a service of 0 (their start heard after their end)", noService, jobs)
			}
			st := tg.Stats()
			if st.Matched != jobs || st.Duplicates != 0 || st.Unknown != 0 || st.Late != 0 {
				t.Errorf("stats %+v: want %d matched, nothing else", st, jobs)
			}
			if notes := tg.Notes(); len(notes) != 0 {
				t.Errorf("notes %q: want none from a worker that says when jobs start", notes)
			}
		})
	}
}

// TestFrameworkFaults: each framework's worker, and its broker, failing
// mid-run, and tasks that fail: every job is accounted for once, ok or an
// error of its kind.
func TestFrameworkFaults(t *testing.T) {
	for _, name := range []string{queue.ProtocolCelery, protocolCeleryAMQP, queue.ProtocolRQ} {
		t.Run(name+"/worker killed", func(t *testing.T) {
			rig := rig(t, name)
			w := rig.start(t)
			// Long enough for the next worker to boot on a busy machine:
			// the jobs sent after the restart wait for it, and must not
			// time out meanwhile.
			const timeout = 20 * time.Second
			tg, _ := rig.open(t, "tasks.answer", timeout)
			var restartedAt time.Time
			results := queuetest.Drive(t, tg, 80, 20, func(at time.Duration) {
				switch {
				case at > 1500*time.Millisecond && !w.Gone():
					w.Kill()
				case at > 2500*time.Millisecond && restartedAt.IsZero():
					rig.start(t)
					restartedAt = time.Now()
				}
			})
			k := queuetest.Kinds(results)
			t.Logf("outcomes %v, stats %+v", k, tg.Stats())
			if k[""]+k[queue.KindTimeout]+k[queue.KindTaskFailed] != 80 {
				t.Errorf("outcomes %v: want every job ok, or timed out or failed with the worker", k)
			}
			queuetest.ServedAfter(t, results, restartedAt)
			// RabbitMQ puts back what the dead worker had prefetched, at
			// once: only the tasks it was running (2 at most) are lost.
			if name == protocolCeleryAMQP && k[queue.KindTimeout] > 2 {
				t.Errorf("outcomes %v: want at most the 2 tasks the killed worker ran to time out", k)
			}
		})
		t.Run(name+"/broker restarted", func(t *testing.T) {
			var rg frameworkRig
			timeout, outage := 4*time.Second, []string{queue.KindUnavailable}
			if name == protocolCeleryAMQP {
				// A node of its own, killed and booted again: the boot
				// takes seconds, and publishes cut by the crash are not
				// confirmed.
				rg, timeout, outage = celeryAMQPRig(t, true), 20*time.Second, []string{queue.KindUnavailable, queue.KindUnconfirmed}
			} else {
				rg = rig(t, name)
			}
			rg.start(t)
			tg, _ := rg.open(t, "tasks.answer", timeout)
			restarted := false
			results := queuetest.Drive(t, tg, 80, 20, func(at time.Duration) {
				if at > 1500*time.Millisecond && !restarted {
					rg.restart(t)
					restarted = true
				}
			})
			k := queuetest.Kinds(results)
			t.Logf("outcomes %v, stats %+v", k, tg.Stats())
			cut := 0
			for _, kind := range outage {
				cut += k[kind]
			}
			if k[""] == 0 || cut == 0 || k[""]+cut+k[queue.KindTimeout] != 80 {
				t.Errorf("outcomes %v: want some ok, some of %q, and no other kind but %q", k, outage, queue.KindTimeout)
			}
		})
		t.Run(name+"/task raises", func(t *testing.T) {
			rig := rig(t, name)
			rig.start(t)
			tg, _ := rig.open(t, "tasks.boom", 10*time.Second)
			if k := queuetest.Kinds(queuetest.Drive(t, tg, 10, 20, nil)); k["task raised ValueError"] != 10 {
				t.Errorf("outcomes %v: want all 10 %q", k, "task raised ValueError")
			}
		})
		t.Run(name+"/unknown task", func(t *testing.T) {
			rig := rig(t, name)
			rig.start(t)
			tg, _ := rig.open(t, "tasks.nope", 10*time.Second)
			if k := queuetest.Kinds(queuetest.Drive(t, tg, 5, 20, nil)); k[queue.KindUnknownTask] != 5 {
				t.Errorf("outcomes %v: want all 5 %q", k, queue.KindUnknownTask)
			}
		})
	}
}

// TestCeleryWithoutTrackStarted: a worker with Celery's defaults does not
// say when jobs start: they are ok, without a queue wait, and the notes
// say what to turn on.
func TestCeleryWithoutTrackStarted(t *testing.T) {
	rig := celeryRig(t, false)
	rig.start(t)
	tg, _ := rig.open(t, "tasks.answer", 10*time.Second)
	results := queuetest.Drive(t, tg, 10, 20, nil)
	if k := queuetest.Kinds(results); k[""] != 10 {
		t.Fatalf("outcomes %v: want all ok", k)
	}
	for seq, r := range results {
		if !r.Started.IsZero() {
			t.Errorf("job %d: started %v, want unknown", seq, r.Started)
		}
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "task_track_started = True") {
		t.Errorf("notes %q: want them to say to set task_track_started", notes)
	}
}

// TestFrameworkCleanup: cleanup after a run removes what the run put in
// Redis, and leaves the keys and jobs that are not tare's.
func TestFrameworkCleanup(t *testing.T) {
	testservice.NeedPython(t, "celery")
	testservice.NeedPython(t, "rq")
	r := testservice.NewPrivateRedis(t)
	ctx := queuetest.Context(t)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	defer rdb.Close()
	// A user's own keys, which must stay: another task's state, a job of
	// theirs waiting on the same queue, and the queue's registration.
	userKeys := []string{"celery-task-meta-5a8a9881-7963-4772-95cf-0c98de7aa3cf", "rq:job:fb88bf54-47ce-4a03-891a-7b45ac3fa8cd", "app:settings"}
	for _, k := range userKeys {
		rdb.Set(ctx, k, "theirs", 0)
	}
	rdb.RPush(ctx, "rq:queue:default", "fb88bf54-47ce-4a03-891a-7b45ac3fa8cd")
	rdb.SAdd(ctx, "rq:queues", "rq:queue:default")

	for _, u := range []string{
		fmt.Sprintf("celery+redis://127.0.0.1:%d/0?queue=celery&task=tasks.answer", r.Port),
		fmt.Sprintf("rq+redis://127.0.0.1:%d/0?queue=default&func=tasks.answer", r.Port),
	} {
		src, err := Open(ctx, u, "", queue.FrameworkConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // no worker: the jobs wait in the queue
			if err := src.Enqueue(ctx, queue.Job{ID: fmt.Sprint(i), RunID: "run-1", Enqueued: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		src.Close()
		removed, err := Cleanup(ctx, u)
		if err != nil {
			t.Fatalf("cleanup %s: %v", u, err)
		}
		t.Logf("%s: removed %q", u, removed)
		if len(removed) < 3 {
			t.Errorf("cleanup %s removed %q: want at least the 3 jobs", u, removed)
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, userKeys...), "rq:queue:default", "rq:queues")
	if strings.Join(slices.Sorted(slices.Values(keys)), " ") != strings.Join(slices.Sorted(slices.Values(want)), " ") {
		t.Errorf("keys left %q, want exactly the user's %q", keys, want)
	}
	if ids := rdb.LRange(ctx, "rq:queue:default", 0, -1).Val(); len(ids) != 1 {
		t.Errorf("rq:queue:default holds %q: want only the user's job", ids)
	}
}

// TestCeleryBacklogExpires: tasks a run left on the queue (its worker
// gone) expire with the job timeout: the worker that comes back revokes
// them instead of running them into the next run's measurement.
func TestCeleryBacklogExpires(t *testing.T) {
	const timeout = time.Second
	rig, _, ids := leaveBacklog(t, celeryRig(t, true), timeout)
	ctx := queuetest.Context(t)
	time.Sleep(timeout + 500*time.Millisecond)
	rig.start(t)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rig.redis.Port)})
	defer rdb.Close()
	states := map[string]string{}
	queuetest.Eventually(t, 30*time.Second, "a state for every left-over task", func() bool {
		for _, id := range ids {
			var meta struct{ Status string }
			if b, err := rdb.Get(ctx, "celery-task-meta-"+id).Bytes(); err == nil && json.Unmarshal(b, &meta) == nil {
				states[id] = meta.Status
			}
		}
		return len(states) == len(ids)
	})
	for id, state := range states {
		if state != "REVOKED" {
			t.Errorf("left-over task %s: %s; want REVOKED, expired before a worker took it", id, state)
		}
	}
}

// TestRQBacklogExpires: jobs a run left on the queue (its worker gone)
// expire with the job timeout, RQ's queued-job TTL: the worker that comes
// back finds nothing behind their ids and skips them, instead of running
// them into the next run's measurement.
func TestRQBacklogExpires(t *testing.T) {
	const timeout = time.Second
	rig, _, ids := leaveBacklog(t, rqRig(t), timeout)
	ctx := queuetest.Context(t)
	time.Sleep(timeout + 1500*time.Millisecond) // Redis expires keys to the millisecond
	rig.start(t)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rig.redis.Port)})
	defer rdb.Close()
	// The worker takes every id off the queue, job or not.
	queuetest.Eventually(t, 30*time.Second, "the left-over ids taken off the queue", func() bool {
		n, err := rdb.LLen(ctx, "rq:queue:default").Result()
		return err == nil && n == 0
	})
	time.Sleep(time.Second) // a job it ran would be finished by now
	for _, id := range ids {
		if status, err := rdb.HGet(ctx, "rq:job:"+id, "status").Result(); err != redis.Nil {
			t.Errorf("left-over job %s: status %q (%v); want no job, expired before a worker took it", id, status, err)
		}
		if n, _ := rdb.ZCard(ctx, "rq:finished:default").Result(); n > 0 {
			t.Errorf("%d jobs finished: the left-over backlog ran", n)
			break
		}
	}
}

// leaveBacklog enqueues 5 jobs with the job timeout onto the rig's queue
// once its worker is gone, as a run whose worker died leaves them, and
// returns their framework ids and the queue they are on.
func leaveBacklog(t *testing.T, rig frameworkRig, timeout time.Duration) (frameworkRig, queue.Source, []string) {
	t.Helper()
	w := rig.start(t)
	_, src := rig.open(t, "tasks.answer", timeout)
	w.Kill()
	runID := fmt.Sprintf("%x", time.Now().UnixNano())
	var ids []string
	for i := range 5 {
		job := queue.Job{ID: fmt.Sprint(i), RunID: runID, Enqueued: time.Now(), Prompt: "left over"}
		if err := src.Enqueue(queuetest.Context(t), job); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, queue.FrameworkJobID(job))
	}
	return rig, src, ids
}
