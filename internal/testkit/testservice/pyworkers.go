package testservice

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Python is the interpreter of Debian's python3-celery and python3-rq;
// the python3 first on PATH may be another, without them.
const Python = "/usr/bin/python3"

// NeedPython skips the test under -short; unless Python imports module
// ("celery", "rq"), the module is Missing.
func NeedPython(t testing.TB, module string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts real %s workers", module)
	}
	if out, err := exec.Command(Python, "-c", "import "+module).CombinedOutput(); err != nil {
		Missing(t, "%s cannot import %s (%v: %s): install Debian's python3-%s (apt-get install -y python3-%s; scripts/test does, as root)",
			Python, module, err, bytes.TrimSpace(out), module, module)
	}
}

// lockedBuffer is a worker's output, written by exec's copying goroutine.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Worker is a worker process of the test's own (Celery, RQ, BullMQ), in
// a process group of its own so its pool's children go with it.
type Worker struct {
	cmd *exec.Cmd
	log *lockedBuffer
}

// PyWorker is a Celery or RQ worker: a Worker.
type PyWorker = Worker

// testdata is this package's testdata folder: the task modules.
func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// startWorker runs Python args in testdata/dir with env added; the worker
// is killed when the test ends, and its output logged if the test failed.
func startWorker(t testing.TB, dir string, env []string, args ...string) *PyWorker {
	t.Helper()
	return startProgram(t, Python, dir, env, args...)
}

// startProgram runs prog args in testdata/dir, as startWorker.
func startProgram(t testing.TB, prog, dir string, env []string, args ...string) *Worker {
	t.Helper()
	w := &Worker{cmd: exec.Command(prog, args...), log: &lockedBuffer{}}
	w.cmd.Dir = filepath.Join(testdata(), dir)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", prog, args, err)
	}
	t.Cleanup(func() {
		w.Kill()
		if t.Failed() {
			t.Logf("%s worker output:\n%s", dir, w.log.String())
		}
	})
	return w
}

// Kill SIGKILLs the worker's process group (the worker and its pool) and
// waits for the worker; once killed, it is Gone.
func (w *Worker) Kill() {
	if w.Gone() {
		return
	}
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	w.cmd.Wait()
}

// Gone reports whether the worker was killed.
func (w *Worker) Gone() bool { return w.cmd.Process == nil || w.cmd.ProcessState != nil }

// PID is the worker's main process.
func (w *Worker) PID() int { return w.cmd.Process.Pid }

// CeleryWorker starts a Celery worker (prefork, 2 processes) on queue
// "celery" of the Redis at brokerURL, which is also its result backend,
// with the app of testdata/celery/tasks.py: tasks.answer(seq, prompt)
// calls the model at modelURL, tasks.boom raises ValueError.
// trackStarted sets task_track_started (Celery's default is off).
func CeleryWorker(t testing.TB, brokerURL, modelURL string, trackStarted bool) *PyWorker {
	return StartCelery(t, Celery{Broker: brokerURL, Model: modelURL, TrackStarted: trackStarted})
}

// Celery is a Celery worker of the app of testdata/celery/tasks.py.
type Celery struct {
	Broker  string // redis:// or amqp://
	Backend string // the result backend; "" for the broker
	Model   string // the simulated model tasks.answer calls
	Queue   string // the queue it consumes; "" for "celery"
	// TrackStarted sets task_track_started (Celery's default is off).
	TrackStarted bool
}

// StartCelery starts a Celery worker (prefork, 2 processes) as c says.
func StartCelery(t testing.TB, c Celery) *PyWorker {
	track := map[bool]string{true: "1", false: "0"}[c.TrackStarted]
	if c.Queue == "" {
		c.Queue = "celery"
	}
	return startWorker(t, "celery", []string{"TARE_TEST_BROKER=" + c.Broker, "TARE_TEST_BACKEND=" + c.Backend, "TARE_TEST_MODEL=" + c.Model, "TARE_TEST_TRACK_STARTED=" + track},
		"-m", "celery", "-A", "tasks", "worker", "-c", "2", "-Q", c.Queue, "--loglevel=warning",
		"--without-gossip", "--without-mingle", "-n", fmt.Sprintf("tare-test-%d@%%h", time.Now().UnixNano()))
}

// RQWorker starts an RQ worker with the JSON serializer on queue
// "default" of the Redis at redisURL, with the functions of
// testdata/rq/tasks.py (the same as CeleryWorker's).
func RQWorker(t testing.TB, redisURL, modelURL string) *PyWorker {
	return startWorker(t, "rq", []string{"TARE_TEST_MODEL=" + modelURL},
		"-m", "rq.cli", "worker", "-u", redisURL, "-S", "rq.serializers.JSONSerializer", "default")
}
