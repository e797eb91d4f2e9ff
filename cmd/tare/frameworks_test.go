package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestRunFrameworkQueues: tare run --queue with a Celery (on Redis, on
// RabbitMQ with a Redis result backend and with rpc://) and an RQ URL, against real workers of Debian's python3-celery
// and python3-rq whose task calls the simulated model: every job ok, queue
// wait measured, the worker found as the system under test, tare check
// naming it, and cleanup removing what the run left.
func TestRunFrameworkQueues(t *testing.T) {
	for _, fw := range []struct {
		name, module string
		// start starts a worker on a private Redis (the broker, or the
		// result backend) and returns it and the queue's URL.
		start func(t *testing.T, r *testservice.PrivateRedis, model string) (*testservice.PyWorker, string)
	}{
		{"celery", "celery", func(t *testing.T, r *testservice.PrivateRedis, m string) (*testservice.PyWorker, string) {
			return testservice.CeleryWorker(t, r.URL(), m, true), fmt.Sprintf("celery+redis://127.0.0.1:%d/0?queue=celery&task=tasks.answer", r.Port)
		}},
		{"celery+amqp", "celery", func(t *testing.T, r *testservice.PrivateRedis, m string) (*testservice.PyWorker, string) {
			broker := testservice.RabbitMQ(t)
			q := fmt.Sprintf("test-%x", time.Now().UnixNano())
			testservice.DeleteQueueAtEnd(t, broker, q)
			w := testservice.StartCelery(t, testservice.Celery{Broker: broker, Backend: r.URL(), Model: m, Queue: q, TrackStarted: true})
			return w, "celery+" + broker + "?" + url.Values{"queue": {q}, "task": {"tasks.answer"}, "backend": {r.URL()}}.Encode()
		}},
		{"celery+amqp+rpc", "celery", func(t *testing.T, r *testservice.PrivateRedis, m string) (*testservice.PyWorker, string) {
			broker := testservice.RabbitMQ(t)
			q := fmt.Sprintf("test-%x", time.Now().UnixNano())
			testservice.DeleteQueueAtEnd(t, broker, q)
			w := testservice.StartCelery(t, testservice.Celery{Broker: broker, Backend: "rpc://", Model: m, Queue: q, TrackStarted: true})
			return w, "celery+" + broker + "?" + url.Values{"queue": {q}, "task": {"tasks.answer"}, "backend": {"rpc://"}}.Encode()
		}},
		{"rq", "rq", func(t *testing.T, r *testservice.PrivateRedis, m string) (*testservice.PyWorker, string) {
			return testservice.RQWorker(t, r.URL(), m), fmt.Sprintf("rq+redis://127.0.0.1:%d/0?queue=default&func=tasks.answer", r.Port)
		}},
	} {
		t.Run(fw.name, func(t *testing.T) {
			testservice.NeedPython(t, fw.module)
			r := testservice.NewPrivateRedis(t)
			model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4})
			w, u := fw.start(t, r, model.URL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const jobs = 40
			var out, errb bytes.Buffer
			err := run(ctx, []string{"run", "--queue", u, "--job-args", `["{{seq}}"]`, "--job-kwargs", `{"prompt": "{{prompt}}"}`,
				"--rate", "20/s", "--jobs", fmt.Sprint(jobs), "--arrival", "constant", "--json", "--quiet", "--no-store", "--tick", "200ms", "--wait-workers", "20s"},
				strings.NewReader(""), &out, &errb)
			if code := exitCode(err, &errb); code != 0 {
				t.Fatalf("tare run --queue %s: exit %d: %s", u, code, errb.String())
			}
			var s tare.Summary
			if err := json.Unmarshal(out.Bytes(), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, out.String())
			}
			if s.Requests.OK != jobs || len(s.ErrorKinds) != 0 {
				t.Errorf("requests %+v, kinds %v: want all %d ok", s.Requests, s.ErrorKinds, jobs)
			}
			if s.Queue == nil || s.Queue.Wait.P50 == nil || s.Queue.Depth.Max == nil {
				t.Fatalf("queue figures %+v: want the wait and the depth measured", s.Queue)
			}
			if s.SUT == nil || !slices.Contains(s.SUT.PIDs, w.PID()) {
				t.Errorf("system under test %+v: want the worker, pid %d", s.SUT, w.PID())
			}

			out.Reset()
			errb.Reset()
			err = run(ctx, []string{"check", "--for", "200ms", "--tick", "100ms", "--quiet", "--queue", u}, strings.NewReader(""), &out, &errb)
			if code := exitCode(err, &errb); code != 0 || !strings.Contains(errb.String(), fmt.Sprintf("(pid %d on ", w.PID())) {
				t.Errorf("tare check --queue %s: exit %d, stderr %q: want 0, naming the worker", u, code, errb.String())
			}

			out.Reset()
			errb.Reset()
			err = run(ctx, []string{"cleanup", "--queue", u}, strings.NewReader(""), &out, &errb)
			if code := exitCode(err, &errb); code != 0 || !strings.Contains(out.String(), "removed") {
				t.Errorf("tare cleanup --queue %s: exit %d: %s%s", u, code, out.String(), errb.String())
			}
		})
	}
}

// TestRunFrameworkNoWorker: a Celery or RQ queue nobody serves is an error
// (exit 2) before any load, saying how to start a worker.
func TestRunFrameworkNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 1 s for a worker that never comes")
	}
	r := testservice.NewPrivateRedis(t)
	noWorker(t, []struct{ url, want string }{
		{fmt.Sprintf("celery+redis://127.0.0.1:%d/0?queue=celery&task=tasks.answer", r.Port), "celery -A tasks worker -Q celery"},
		{fmt.Sprintf("rq+redis://127.0.0.1:%d/0?func=tasks.answer", r.Port), "rq worker -u redis://127.0.0.1"},
	})
}

// TestRunCeleryAMQPNoWorker: so for a Celery queue on RabbitMQ that no
// worker consumes (here, that none declared: a wrong name), whatever else
// heartbeats on the virtual host.
func TestRunCeleryAMQPNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 1 s for a worker that never comes")
	}
	broker := testservice.RabbitMQ(t)
	r := testservice.NewPrivateRedis(t)
	q := fmt.Sprintf("test-%x", time.Now().UnixNano())
	noWorker(t, []struct{ url, want string }{
		{"celery+" + broker + "?" + url.Values{"queue": {q}, "task": {"tasks.answer"}, "backend": {r.URL()}}.Encode(), "celery -A tasks worker -Q " + q},
	})
}

func noWorker(t *testing.T, cases []struct{ url, want string }) {
	t.Helper()
	for _, c := range cases {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"run", "--queue", c.url, "--jobs", "5", "--wait-workers", "1s", "--quiet", "--no-store"},
			strings.NewReader(""), &out, &errb)
		if code := exitCode(err, &errb); code != 2 || !strings.Contains(errb.String(), "no worker serves") || !strings.Contains(errb.String(), c.want) {
			t.Errorf("tare run --queue %s with no worker: exit %d, stderr %q: want 2, saying no worker serves it and %q", c.url, code, errb.String(), c.want)
		}
	}
}

// TestRunCeleryAMQPUnknownTask: a task the workers of a Celery queue on
// RabbitMQ do not register is an error (exit 2) before any load, naming
// the tasks they do; tare check says so too.
func TestRunCeleryAMQPUnknownTask(t *testing.T) {
	testservice.NeedPython(t, "celery")
	broker := testservice.RabbitMQ(t)
	r := testservice.NewPrivateRedis(t)
	q := fmt.Sprintf("test-%x", time.Now().UnixNano())
	testservice.DeleteQueueAtEnd(t, broker, q)
	testservice.StartCelery(t, testservice.Celery{Broker: broker, Backend: r.URL(), Queue: q, TrackStarted: true})
	u := "celery+" + broker + "?" + url.Values{"queue": {q}, "task": {"tasks.nope"}, "backend": {r.URL()}}.Encode()
	for _, args := range [][]string{
		{"run", "--queue", u, "--jobs", "5", "--wait-workers", "30s", "--quiet", "--no-store"},
		{"check", "--for", "200ms", "--tick", "100ms", "--quiet", "--queue", u},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if code := exitCode(err, &errb); code != 2 || !strings.Contains(errb.String(), `unknown task "tasks.nope"`) || !strings.Contains(errb.String(), "tasks.answer, tasks.boom") {
			t.Errorf("tare %s with an unknown task: exit %d, stderr %q: want 2, naming the task and those the worker knows", args[0], code, errb.String())
		}
	}
}
