package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
)

// newPrivateRedis is a redis-server of the test's own, which it may
// restart.
func newPrivateRedis(t *testing.T) *testservice.PrivateRedis { return testservice.NewPrivateRedis(t) }

// TestRedisRestartMidRun: the Redis of `tare demo --redis` is killed in the
// middle of the run and started again a second later, empty. The run
// completes, every job is accounted for (ok or "queue unavailable", none
// lost), and the verdict says how many jobs the outage touched.
func TestRedisRestartMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a private redis-server during a ~6 s run")
	}
	r := newPrivateRedis(t)
	const jobs = 120
	type outcome struct {
		code           int
		stdout, stderr string
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		var out, errb bytes.Buffer
		err := run(ctx, []string{"demo", "--queue", r.URL(), "--json", "--quiet", "--no-store", "--tick", "200ms",
			"--token-cost", "200us", "--mean-tokens", "8", "--rate", "25/s", "--jobs", fmt.Sprint(jobs), "--arrival", "constant"},
			strings.NewReader(""), &out, &errb)
		done <- outcome{exitCode(err, &errb), out.String(), errb.String()}
	}()
	time.Sleep(1500 * time.Millisecond)
	r.Stop()
	time.Sleep(time.Second)
	r.Start(t)

	var o outcome
	select {
	case o = <-done:
	case <-time.After(50 * time.Second):
		t.Fatal("the run did not end within 50 s of the restart")
	}
	if o.code != 0 {
		t.Fatalf("demo across a redis restart: exit %d: %s", o.code, o.stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(o.stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, o.stdout)
	}
	unavailable := s.ErrorKinds[queue.KindUnavailable]
	t.Logf("requests %+v, kinds %v, warnings %q", s.Requests, s.ErrorKinds, s.Verdict.Warnings)
	if s.Requests.Total != jobs {
		t.Errorf("%d jobs in the summary, want all %d: a job was lost", s.Requests.Total, jobs)
	}
	if s.Run.Status != tare.StatusComplete {
		t.Errorf("status %q, want complete", s.Run.Status)
	}
	if unavailable == 0 || s.Requests.OK == 0 || s.Requests.OK+s.Requests.Errors != jobs {
		t.Errorf("requests %+v kinds %v: want some ok, some %q, summing to %d", s.Requests, s.ErrorKinds, queue.KindUnavailable, jobs)
	}
	if other := s.Requests.Errors - unavailable; other != 0 {
		t.Errorf("%d errors of other kinds %v: want only %q", other, s.ErrorKinds, queue.KindUnavailable)
	}
	want := fmt.Sprintf("%d jobs were touched by a queue outage (queue unavailable)", unavailable)
	if !strings.Contains(strings.Join(s.Verdict.Warnings, "\n"), want) {
		t.Errorf("warnings %q: want one saying %q", s.Verdict.Warnings, want)
	}
}

// TestRedisRestartUnderRunQueue: the reference topology as separate
// processes, tare run --queue and two tare worker processes, with their
// private Redis killed and started again, empty, mid-run. The run
// completes with every job accounted for; the workers reconnect by
// themselves: a second run afterwards completes every job.
func TestRedisRestartUnderRunQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a private redis-server under ~8 s of load")
	}
	r := newPrivateRedis(t)
	model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var workers []*exec.Cmd
	for i := range 2 {
		w := exec.CommandContext(ctx, os.Args[0], "worker", "--redis", r.URL(), "--queue", "restart", "--model", model.URL+"/v1",
			"--concurrency", "2", "--claim-idle", "1s", "--name", fmt.Sprintf("w%d", i))
		w.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		var logs bytes.Buffer
		w.Stderr = &logs
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
		defer func() {
			w.Process.Kill()
			w.Wait()
			if t.Failed() {
				t.Logf("worker %d:\n%s", i, logs.String())
			}
		}()
	}
	type outcome struct {
		code           int
		stdout, stderr string
	}
	start := func(jobs int) <-chan outcome {
		done := make(chan outcome, 1)
		go func() {
			var out, errb bytes.Buffer
			err := run(ctx, []string{"run", "--queue", r.URL(), "--queue-name", "restart", "--rate", "25/s", "--jobs", fmt.Sprint(jobs),
				"--arrival", "constant", "--job-timeout", "20s", "--max-tokens", "8", "--json", "--quiet", "--no-store", "--tick", "200ms"},
				strings.NewReader(""), &out, &errb)
			done <- outcome{exitCode(err, &errb), out.String(), errb.String()}
		}()
		return done
	}
	summary := func(done <-chan outcome) tare.Summary {
		t.Helper()
		o := <-done
		if o.code != 0 {
			t.Fatalf("run --queue: exit %d: %s", o.code, o.stderr)
		}
		var s tare.Summary
		if err := json.Unmarshal([]byte(o.stdout), &s); err != nil {
			t.Fatalf("summary: %v\n%s", err, o.stdout)
		}
		return s
	}
	const jobs = 120
	running := start(jobs)
	time.Sleep(1500 * time.Millisecond)
	r.Stop()
	time.Sleep(time.Second)
	r.Start(t)
	s := summary(running)
	unavailable := s.ErrorKinds[queue.KindUnavailable]
	t.Logf("across the restart: requests %+v, kinds %v, warnings %q", s.Requests, s.ErrorKinds, s.Verdict.Warnings)
	if s.Requests.Total != jobs || s.Requests.OK+s.Requests.Errors != jobs {
		t.Errorf("requests %+v: want all %d accounted for", s.Requests, jobs)
	}
	if unavailable == 0 || s.Requests.OK == 0 {
		t.Errorf("requests %+v kinds %v: want some ok and some %q", s.Requests, s.ErrorKinds, queue.KindUnavailable)
	}
	if !strings.Contains(strings.Join(s.Verdict.Warnings, "\n"), fmt.Sprintf("%d jobs were touched by a queue outage", unavailable)) {
		t.Errorf("warnings %q: want the outage counted", s.Verdict.Warnings)
	}
	after := summary(start(20))
	if after.Requests.OK != 20 {
		t.Errorf("after the restart: requests %+v kinds %v; want all 20 ok: the workers did not reconnect", after.Requests, after.ErrorKinds)
	}
	for i, w := range workers {
		if w.ProcessState != nil {
			t.Errorf("worker %d exited during the restart: %v", i, w.ProcessState)
		}
	}
}
