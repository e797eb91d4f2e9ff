package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestRunBullMQ: tare run --queue bullmq+redis://… against a real Node
// BullMQ worker whose processor calls the simulated model: every job ok,
// queue wait measured, the worker found as the system under test by its
// connection, tare check naming it, and cleanup removing what the run
// left.
func TestRunBullMQ(t *testing.T) {
	testservice.NeedBullMQ(t)
	r := testservice.NewPrivateRedis(t)
	model := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4})
	w := testservice.BullMQWorker(t, r.URL(), model.URL, testservice.BullMQOptions{})
	u := fmt.Sprintf("bullmq+redis://127.0.0.1:%d/0?queue=agents&name=answer", r.Port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const jobs = 40
	var out, errb bytes.Buffer
	err := run(ctx, []string{"run", "--queue", u, "--job-args", `{"seq": "{{seq}}", "prompt": "{{prompt}}"}`,
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
	// Each job's hash and its entry in the completed set, and the epoch.
	if code := exitCode(err, &errb); code != 0 || !strings.Contains(out.String(), fmt.Sprintf("removed %d of tare's keys", 2*jobs+1)) {
		t.Errorf("tare cleanup --queue %s: exit %d: %s%s: want the %d jobs, their completed entries and the epoch removed", u, code, out.String(), errb.String(), jobs)
	}
}

// TestRunBullMQNoWorker: a BullMQ queue nobody serves is an error (exit
// 2) before any load, saying how to start a worker.
func TestRunBullMQNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 1 s for a worker that never comes")
	}
	r := testservice.NewPrivateRedis(t)
	u := fmt.Sprintf("bullmq+redis://127.0.0.1:%d/0?queue=agents&name=answer", r.Port)
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"run", "--queue", u, "--jobs", "5", "--wait-workers", "1s", "--quiet", "--no-store"},
		strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 2 || !strings.Contains(errb.String(), "no worker serves") || !strings.Contains(errb.String(), `new Worker("agents"`) {
		t.Errorf("tare run --queue %s with no worker: exit %d, stderr %q: want 2, saying no worker serves it and how to start one", u, code, errb.String())
	}
}
