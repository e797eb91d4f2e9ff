package testservice

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// bullmqDir is the BullMQ worker's folder under testdata: worker.js, and
// the package.json and package-lock.json that pin bullmq, installed into
// its node_modules by `npm ci` (scripts/test runs it).
const bullmqDir = "bullmq"

// NeedBullMQ skips the test under -short; unless node runs and loads
// bullmq from testdata/bullmq, BullMQ is Missing.
func NeedBullMQ(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real BullMQ workers")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed: install Node 20 or later (Debian's nodejs and npm; scripts/test does, as root)")
	}
	dir := filepath.Join(testdata(), bullmqDir)
	cmd := exec.Command(node, "-e", "require('bullmq')")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		Missing(t, "node cannot load bullmq in %s (%v: %s): run `npm ci` there (scripts/test does)", dir, err, bytes.TrimSpace(out))
	}
}

// BullMQOptions set up a test's BullMQ worker; the zero value is a worker
// with BullMQ's defaults on queue "agents".
type BullMQOptions struct {
	Queue string // the queue it consumes; "agents" when ""
	Name  string // the worker's name (its connection bull:<queue>:w:<name>); none when ""
	// LockDuration is BullMQ's lockDuration, with stalled jobs checked
	// every half of it: a killed worker's jobs go back to the queue that
	// soon. 0 leaves BullMQ's default, 30 s.
	LockDuration time.Duration
	// Remove makes the worker remove the jobs it finishes
	// (removeOnComplete and removeOnFail {count: 0}).
	Remove bool
}

// BullMQWorker starts a Node BullMQ worker (testdata/bullmq/worker.js,
// concurrency 2) on the Redis at redisURL: job name "answer" calls the
// model at modelURL (after sleeping the job's data.sleep_ms, when set) and
// returns {seq, tokens}; "boom" throws a TypeError;
// any other name throws Error("unknown job name …").
func BullMQWorker(t testing.TB, redisURL, modelURL string, o BullMQOptions) *Worker {
	t.Helper()
	env := []string{"TARE_TEST_REDIS=" + redisURL, "TARE_TEST_MODEL=" + modelURL, "TARE_TEST_QUEUE=" + o.Queue,
		"TARE_TEST_WORKER_NAME=" + o.Name, fmt.Sprintf("TARE_TEST_LOCK_MS=%d", o.LockDuration.Milliseconds()),
		"TARE_TEST_REMOVE=" + map[bool]string{true: "1", false: "0"}[o.Remove]}
	return startProgram(t, "node", bullmqDir, env, "worker.js")
}
