//go:build linux

package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/loopback"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/worker"
)

// childEnv, when set, makes the test binary a worker process named by its
// value (see TestMain). The other settings travel in the environment too:
// a child cannot see the parent's httptest server unless told its URL.
const (
	childEnv       = "TARE_TEST_WORKER_CHILD"
	childQueue     = "TARE_TEST_QUEUE"
	childModelURL  = "TARE_TEST_MODEL_URL"
	childClaimIdle = "TARE_TEST_CLAIM_IDLE"
)

// childMain is a worker process: the reference worker on Redis, calling the
// parent's simulated model, until SIGTERM, the queue's stop signal, or a
// minute has passed (an orphan cannot live on).
func childMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	claimIdle, err := time.ParseDuration(os.Getenv(childClaimIdle))
	if err != nil {
		log.Error("bad claim idle", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	u, _ := redisURL()
	if v := os.Getenv("TARE_TEST_REDIS_URL"); v != "" {
		u = v
	}
	b, err := queue.OpenRedis(ctx, u, os.Getenv(childQueue))
	if err != nil {
		log.Error("open queue", "err", err)
		return 2
	}
	defer b.Close()
	c, err := openai.New(openai.Config{URL: os.Getenv(childModelURL) + "/v1", Timeout: 20 * time.Second})
	if err != nil {
		log.Error("model client", "err", err)
		return 2
	}
	defer c.Close()
	w := worker.New(b, modelOf(c), worker.Config{
		Name:        os.Getenv(childEnv),
		Concurrency: 4,
		ClaimIdle:   claimIdle,
		Heartbeat:   claimIdle / 5,
		Block:       100 * time.Millisecond,
		Log:         log,
	})
	if err := w.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	log.Info("stats", "stats", fmt.Sprintf("%+v", w.Stats()))
	return 0
}

// process is a child process started by the test.
type process struct {
	name   string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{} // closed once the process has exited and err is set
	err    error
}

// spawn starts cmd, which dies with the test (Pdeathsig) and is killed at
// cleanup if still running.
func spawn(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{name: name, cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.stderr)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// startProcess re-executes the test binary as worker name.
func startProcess(t *testing.T, name string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childEnv+"="+name)...)
	return spawn(t, "worker process "+name, cmd)
}

// wait waits for the process to exit, limit at most.
func (p *process) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		t.Fatalf("%s still running after %v", p.name, limit)
		return nil
	}
}

// every is a constant-rate schedule of n arrivals.
type every struct {
	n, i int
	gap  time.Duration
}

func (s *every) Next() (time.Duration, bool) {
	if s.i >= s.n {
		return 0, false
	}
	s.i++
	return time.Duration(s.i-1) * s.gap, true
}

// runLoad drives tg with the open-loop engine and returns one result per
// arrival, by Seq.
func runLoad(ctx context.Context, tg *queue.Target, sched load.Schedule, n int) []tare.Result {
	out := make(chan *load.Batch, n)
	go load.New(tg, load.Config{}).Run(ctx, time.Now(), sched, out)
	results := make([]tare.Result, 0, n)
	for r := range load.All(out) {
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b tare.Result) int { return int(a.Seq) - int(b.Seq) })
	return results
}

func TestCrashedWorkerProcess(t *testing.T) {
	// 240 jobs, three worker processes, one SIGKILLed while it holds jobs:
	// every job completes exactly once, its lost jobs are redelivered.
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	const (
		jobs      = 240
		claimIdle = 2 * time.Second
	)
	rdb := redisClient(t)
	u, _ := redisURL()
	q := uniqueQueue(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// One generation slot at ~8 ms of CPU a job: the 200/s arrivals outrun
	// it, so every worker holds its four jobs when the victim is killed.
	sim := testservice.Model(t, modelsim.Config{TokenCost: time.Millisecond, MeanTokens: 8, Parallel: 1, Seed: 1})
	b, err := queue.OpenRedis(ctx, u, q)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tg := newTarget(t, b, queue.TargetConfig{MaxTokens: 8, Timeout: 25 * time.Second})

	env := []string{childQueue + "=" + q, childModelURL + "=" + sim.URL, childClaimIdle + "=" + claimIdle.String(), "TARE_TEST_REDIS_URL=" + u}
	var procs []*process
	for i := range 3 {
		procs = append(procs, startProcess(t, fmt.Sprint("proc", i), env...))
	}
	eventually(t, "three worker processes to register", func() bool {
		ws, _ := b.Workers(ctx)
		return len(ws) == 3
	})

	victim := procs[1]
	victimName := "proc1"
	jobsKey := queue.KeyPrefix(q) + "jobs"
	killed := make(chan int64, 1) // jobs the victim held when it died
	go func() {
		for ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			if tg.Stats().Matched < jobs/5 {
				continue
			}
			p, err := rdb.XPending(ctx, jobsKey, queue.Group).Result()
			if err != nil || p.Consumers[victimName] < 2 {
				continue
			}
			victim.kill()
			held, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
				Stream: jobsKey, Group: queue.Group, Start: "-", End: "+", Count: 100, Consumer: victimName,
			}).Result()
			killed <- int64(len(held))
			return
		}
		killed <- -1
	}()

	results := runLoad(ctx, tg, &every{n: jobs, gap: 5 * time.Millisecond}, jobs)
	held := <-killed
	if held <= 0 {
		t.Fatalf("the victim was never caught holding jobs (held %d); the run ended first", held)
	}

	if len(results) != jobs {
		t.Fatalf("%d results, want %d", len(results), jobs)
	}
	redelivered, byVictim := 0, 0
	for i, r := range results {
		if r.Seq != uint64(i) {
			t.Fatalf("result %d has seq %d: a job reported twice or missing", i, r.Seq)
		}
		if !r.OK() {
			t.Errorf("job %d failed: %q (worker %q, %d deliveries)", r.Seq, r.Err, r.Worker, r.Deliveries)
		}
		if r.Deliveries > 1 {
			redelivered++
		}
		if r.Worker == victimName {
			byVictim++
		}
		if r.QueueWait() < 0 || r.Started.Before(r.Sent.Round(0)) || r.Done.Before(r.Started) {
			t.Errorf("job %d: sent %v, started %v, done %v: out of order", r.Seq, r.Sent, r.Started, r.Done)
		}
	}
	t.Logf("victim held %d jobs when killed and had completed %d; %d jobs redelivered; target stats %+v",
		held, byVictim, redelivered, tg.Stats())
	if int64(redelivered) < held {
		t.Errorf("%d jobs redelivered, want at least the %d the victim held", redelivered, held)
	}
	if st := tg.Stats(); st.Matched != jobs || st.Duplicates != 0 || st.Unfinished+st.Timeouts+st.Unavailable != 0 {
		t.Errorf("target stats %+v: want %d matched, no duplicates, nothing unfinished", st, jobs)
	}

	// The results stream holds one result per job: none was done twice.
	entries, err := rdb.XRange(ctx, queue.KeyPrefix(q)+"results", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	for _, e := range entries {
		if e.Values["run"] == tg.RunID() {
			perJob[fmt.Sprint(e.Values["id"])]++
		}
	}
	for i := range jobs {
		if n := perJob[fmt.Sprint(i)]; n != 1 {
			t.Errorf("job %d has %d results in the stream, want exactly 1", i, n)
		}
	}
	if d, err := b.Depth(ctx); err != nil || d != (queue.Depth{}) {
		t.Errorf("depth after the run = %+v, %v; want nothing waiting or pending", d, err)
	}

	// Cleanup's story: stop the workers, wait for them to go away (the
	// victim's registration expires by itself), delete the keys.
	if err := queue.Stop(ctx, rdb, q); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p == victim {
			continue
		}
		if err := p.wait(t, 10*time.Second); err != nil {
			t.Errorf("%s exited with %v after the stop signal, want 0", p.name, err)
		}
	}
	wctx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	if err := queue.WaitWorkers(wctx, b, 50*time.Millisecond); err != nil {
		t.Error(err)
	}
}

// startRedis runs a private redis-server on port, for tests that restart
// it; the shared server must never be restarted.
func startRedis(t *testing.T, bin string, port int) *process {
	t.Helper()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	p := spawn(t, "redis-server", cmd)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer rdb.Close()
	eventually(t, "the private redis-server to answer", func() bool {
		return rdb.Ping(context.Background()).Err() == nil
	})
	return p
}

func TestRedisRestart(t *testing.T) {
	// The server restarts (without persistence) in the middle of a run:
	// the jobs it lost and those sent while it was down are counted as
	// "queue unavailable", nothing hangs, and jobs after the restart work.
	if testing.Short() {
		t.Skip("restarts a private redis-server")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testservice.Missing(t, "redis-server is not installed: install Debian's redis-server (scripts/test does, as root)")
	}
	port := loopback.FreePort(t)
	server := startRedis(t, bin, port)
	u := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sim := testservice.Model(t, modelsim.Config{TokenCost: 2 * time.Millisecond, MeanTokens: 10, Parallel: 1, Seed: 2})
	gen, err := queue.OpenRedis(ctx, u, "restart")
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	wb, err := queue.OpenRedis(ctx, u, "restart")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	tg := newTarget(t, gen, queue.TargetConfig{MaxTokens: 10, Timeout: 20 * time.Second})
	cfg := fast("w")
	cfg.ClaimIdle, cfg.Heartbeat = time.Second, 200*time.Millisecond
	r := start(t, wb, openaiModel(t, sim.URL), cfg)

	before := doFrom(ctx, tg, 0, 30)
	eventually(t, "a few jobs to complete", func() bool { return tg.Stats().Matched >= 3 })
	server.kill()
	during := doFrom(ctx, tg, 100, 5)
	for _, res := range <-during {
		if res.Err != queue.KindUnavailable {
			t.Errorf("job %d sent while redis was down: %q, want %q", res.Seq, res.Err, queue.KindUnavailable)
		}
	}
	startRedis(t, bin, port)

	lost := 0
	for _, res := range <-before {
		switch res.Err {
		case "":
		case queue.KindUnavailable:
			lost++
		default:
			t.Errorf("job %d across the restart: %q, want ok or %q", res.Seq, res.Err, queue.KindUnavailable)
		}
	}
	if lost == 0 {
		t.Errorf("no job was lost in the restart; the test did not restart under load")
	}
	// go-redis fails fast for a while after many failed dials, then
	// reconnects in the background: wait until the generator's client is
	// back before sending more.
	eventually(t, "the generator's client to reconnect", func() bool {
		_, err := gen.Depth(ctx)
		return err == nil
	})
	for _, res := range <-doFrom(ctx, tg, 200, 10) {
		if !res.OK() {
			t.Errorf("job %d after the restart: %q, want ok", res.Seq, res.Err)
		}
	}
	st := tg.Stats()
	t.Logf("target stats %+v; worker stats %+v", st, r.w.Stats())
	if st.Lost == 0 {
		t.Errorf("target stats %+v: the loss was not seen", st)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(server.stderr.String(), "FATAL") {
		t.Logf("redis-server log:\n%s", server.stderr)
	}
}

// doFrom runs n jobs with seqs from first, in the background.
func doFrom(ctx context.Context, tg *queue.Target, first uint64, n int) <-chan []tare.Result {
	ch := make(chan []tare.Result, 1)
	go func() {
		out := make([]tare.Result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = tare.Result{Seq: first + uint64(i), Sent: time.Now()}
				tg.Do(ctx, &out[i])
			}()
		}
		wg.Wait()
		ch <- out
	}()
	return ch
}
