package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/worker"
)

// These tests check the worker's own logic around the Model interface with
// small model functions; e2e_test.go and crash_linux_test.go run it against
// the simulated model over HTTP.

// quick answers at once: maxTokens tokens, counted.
var quick = worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
	return worker.Completion{FirstToken: time.Now(), OutputTokens: maxTokens, PromptTokens: 2, TokenSource: queue.TokensCounted}, nil
})

// fast is a config for tests: short waits everywhere.
func fast(name string) worker.Config {
	return worker.Config{Name: name, Concurrency: 2, ClaimIdle: 400 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Block: 50 * time.Millisecond}
}

func newTarget(t *testing.T, b queue.Broker, cfg queue.TargetConfig) *queue.Target {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	tg, err := queue.NewTarget(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg
}

// doAll runs n jobs at once and returns their results by Seq.
func doAll(ctx context.Context, tg *queue.Target, n int) []tare.Result {
	out := make([]tare.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = tare.Result{Seq: uint64(i), Scheduled: time.Now(), Sent: time.Now()}
			tg.Do(ctx, &out[i])
		}()
	}
	wg.Wait()
	return out
}

// doAsync runs n jobs in the background.
func doAsync(ctx context.Context, tg *queue.Target, n int) <-chan []tare.Result {
	ch := make(chan []tare.Result, 1)
	go func() { ch <- doAll(ctx, tg, n) }()
	return ch
}

func TestWorkerDoesJobs(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		tg := newTarget(t, b, queue.TargetConfig{MaxTokens: 7})
		r := start(t, b, quick, fast("w1"))
		for _, res := range doAll(testContext(t), tg, 20) {
			if !res.OK() || res.Worker != "w1" || res.Deliveries != 1 || res.OutputTokens != 7 || res.TokenSource != queue.TokensCounted {
				t.Errorf("job %d: err %q, worker %q, deliveries %d, tokens %d (%s); want ok, w1, 1, 7 (counted)",
					res.Seq, res.Err, res.Worker, res.Deliveries, res.OutputTokens, res.TokenSource)
			}
			if res.Started.Before(res.Sent.Round(0)) || res.Done.Before(res.Started) {
				t.Errorf("job %d: sent %v, started %v, done %v: out of order", res.Seq, res.Sent, res.Started, res.Done)
			}
		}
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if st := r.w.Stats(); st.Done != 20 || st.Fetched != 20 || st.Failed+st.Claimed+st.Abandoned != 0 {
			t.Errorf("Stats = %+v, want 20 fetched and done", st)
		}
	})
}

func TestConcurrencyCap(t *testing.T) {
	b := queue.NewMemory(queue.MemoryConfig{})
	defer b.Close()
	var active, peak atomic.Int64
	release := make(chan struct{})
	model := worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
		n := active.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		active.Add(-1)
		return worker.Completion{}, nil
	})
	cfg := fast("w")
	cfg.Concurrency = 3
	start(t, b, model, cfg)
	tg := newTarget(t, b, queue.TargetConfig{})
	results := doAsync(testContext(t), tg, 7)
	eventually(t, "3 jobs running", func() bool { return active.Load() == 3 })
	time.Sleep(100 * time.Millisecond) // room for a wrong fourth to start
	if d, _ := b.Depth(testContext(t)); d.Pending != 3 || d.Waiting != 4 {
		t.Errorf("depth with 3 slots busy = %+v, want 3 pending, 4 waiting", d)
	}
	close(release)
	for _, res := range <-results {
		if !res.OK() {
			t.Errorf("job %d: %q", res.Seq, res.Err)
		}
	}
	if p := peak.Load(); p != 3 {
		t.Errorf("peak concurrent model calls = %d, want 3", p)
	}
}

// blocking is a model that signals when a call starts and answers when
// released, or fails "canceled" when its context ends.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (m *blocking) Complete(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
	m.started <- struct{}{}
	select {
	case <-m.release:
		return worker.Completion{FirstToken: time.Now(), OutputTokens: 1, TokenSource: queue.TokensCounted}, nil
	case <-ctx.Done():
		return worker.Completion{Err: "canceled"}, nil
	}
}

func TestGracefulStop(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		tg := newTarget(t, b, queue.TargetConfig{})
		m := newBlocking()
		r := start(t, b, m, fast("w"))
		results := doAsync(testContext(t), tg, 1)
		<-m.started
		r.cancel()
		select {
		case err := <-r.done:
			t.Fatalf("Run returned (%v) with a job in flight", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(m.release)
		if err := r.wait(t, 10*time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res := (<-results)[0]; !res.OK() || res.Worker != "w" {
			t.Errorf("job in flight at the stop: %q by %q, want it finished by w", res.Err, res.Worker)
		}
	})
}

func TestStopSignal(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		r := start(t, b, quick, fast("w"))
		ctx := testContext(t)
		eventually(t, "the worker to register", func() bool {
			ws, _ := b.Workers(ctx)
			return len(ws) == 1
		})
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t, 10*time.Second); err != nil {
			t.Fatalf("Run after the stop signal: %v", err)
		}
		if ws, err := b.Workers(ctx); err != nil || len(ws) != 0 {
			t.Errorf("Workers after the stop = %+v, %v; want none", ws, err)
		}
		// A worker started while the signal stands exits at once.
		late := start(t, b, quick, fast("late"))
		if err := late.wait(t, 10*time.Second); err != nil {
			t.Fatalf("Run of a late worker: %v", err)
		}
	})
}

func TestGraceOverJobClaimed(t *testing.T) {
	// A worker whose job outlives its grace leaves the job pending; another
	// worker claims it after ClaimIdle and reports two deliveries.
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		tg := newTarget(t, b, queue.TargetConfig{})
		m := newBlocking()
		cfg := fast("first")
		cfg.Grace = 50 * time.Millisecond
		first := start(t, b, m, cfg)
		results := doAsync(testContext(t), tg, 1)
		<-m.started
		if err := first.stop(t); err != nil {
			t.Fatal(err)
		}
		if st := first.w.Stats(); st.Abandoned != 1 || st.Done+st.Failed != 0 {
			t.Errorf("first worker's Stats = %+v, want the job abandoned, nothing published", st)
		}
		second := start(t, b, quick, fast("second"))
		res := (<-results)[0]
		if !res.OK() || res.Worker != "second" || res.Deliveries != 2 {
			t.Errorf("job: %q by %q, %d deliveries; want ok by second after 2 deliveries", res.Err, res.Worker, res.Deliveries)
		}
		if st := second.w.Stats(); st.Claimed != 1 {
			t.Errorf("second worker's Stats = %+v, want 1 claimed", st)
		}
	})
}

func TestSlowJobNotClaimed(t *testing.T) {
	// A job that runs longer than ClaimIdle on a live worker is touched
	// every heartbeat, so the idle worker next to it never claims it.
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		tg := newTarget(t, b, queue.TargetConfig{})
		slow := worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
			select {
			case <-time.After(1200 * time.Millisecond): // three times ClaimIdle
				return worker.Completion{OutputTokens: 1}, nil
			case <-ctx.Done():
				return worker.Completion{Err: "canceled"}, nil
			}
		})
		start(t, b, slow, fast("slow"))
		res := doAsync(testContext(t), tg, 1)
		eventually(t, "the slow worker to take the job", func() bool {
			d, _ := b.Depth(testContext(t))
			return d.Pending == 1
		})
		idle := start(t, b, quick, fast("idle"))
		if r := (<-res)[0]; !r.OK() || r.Worker != "slow" || r.Deliveries != 1 {
			t.Errorf("slow job: %q by %q after %d deliveries; want ok by slow, delivered once", r.Err, r.Worker, r.Deliveries)
		}
		if st := idle.w.Stats(); st.Claimed != 0 {
			t.Errorf("idle worker claimed %d jobs from a live worker", st.Claimed)
		}
	})
}

func TestMaxDeliveries(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		ctx := testContext(t)
		tg := newTarget(t, b, queue.TargetConfig{})
		results := doAsync(ctx, tg, 1)
		// Two workers died on the job already: delivery count 3.
		eventually(t, "the job to be enqueued", func() bool { return tg.Stats().Enqueued == 1 })
		if ds, err := b.Fetch(ctx, "ghost1", 1, time.Second); err != nil || len(ds) != 1 {
			t.Fatalf("Fetch: %v, %v", ds, err)
		}
		for _, ghost := range []string{"ghost2", "ghost3"} {
			if ds, err := b.Claim(ctx, ghost, 0, 1); err != nil || len(ds) != 1 {
				t.Fatalf("Claim: %v, %v", ds, err)
			}
		}
		var calls atomic.Int64
		model := worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
			calls.Add(1)
			return worker.Completion{}, nil
		})
		cfg := fast("w")
		cfg.MaxDeliveries = 3
		start(t, b, model, cfg)
		res := (<-results)[0]
		if res.Err != worker.KindTooManyDeliveries || res.Deliveries != 4 {
			t.Errorf("job delivered a fourth time: %q after %d deliveries, want %q after 4", res.Err, res.Deliveries, worker.KindTooManyDeliveries)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("model called %d times for a job past its delivery limit", n)
		}
	})
}

func TestModelCallFails(t *testing.T) {
	b := queue.NewMemory(queue.MemoryConfig{})
	defer b.Close()
	tg := newTarget(t, b, queue.TargetConfig{})
	var n atomic.Int64
	model := worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
		if n.Add(1) == 1 {
			return worker.Completion{}, errors.New("no route to the model")
		}
		return worker.Completion{Err: "http 503"}, nil
	})
	r := start(t, b, model, fast("w"))
	var kinds []string
	for range 2 {
		res := doAll(testContext(t), tg, 1)[0]
		kinds = append(kinds, res.Err)
		tg = newTarget(t, b, queue.TargetConfig{})
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]string{worker.KindModel, "http 503"}) {
		t.Errorf("failed calls recorded as %q, want %q then %q", kinds, worker.KindModel, "http 503")
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := r.w.Stats(); st.Failed != 2 {
		t.Errorf("Stats = %+v, want 2 failed", st)
	}
}

func TestBadJobEntries(t *testing.T) {
	rdb := redisClient(t)
	ctx := testContext(t)
	q := uniqueQueue(t, rdb)
	b, err := queue.NewRedis(ctx, rdb, q)
	if err != nil {
		t.Fatal(err)
	}
	jobs := queue.KeyPrefix(q) + "jobs"
	for _, fields := range [][]any{
		{"id", "5", "run", "r"}, // no enqueue time: fails with "bad job"
		{"colour", "blue"},      // nothing to name a result by: dropped
	} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: jobs, Values: fields}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	start(t, b, quick, fast("w"))
	eventually(t, "both entries to be handled", func() bool {
		d, err := b.Depth(ctx)
		return err == nil && d == (queue.Depth{})
	})
	rs, _, err := b.Results(ctx, "", 10, 0)
	if err != nil || len(rs) != 1 || rs[0].ID != "5" || rs[0].Error != worker.KindBadJob {
		t.Errorf("Results = %+v, %v; want one %q result for job 5", rs, err, worker.KindBadJob)
	}
}

func TestRegistration(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		ctx := testContext(t)
		cfg := fast("")
		cfg.Concurrency = 5
		r := start(t, b, quick, cfg)
		var ws []queue.WorkerInfo
		eventually(t, "the worker to register", func() bool {
			ws, _ = b.Workers(ctx)
			return len(ws) == 1
		})
		host, _ := os.Hostname()
		if w := ws[0]; w.Name != r.w.Name() || w.Name == "" || w.PID != os.Getpid() || w.Host != host || w.Concurrency != 5 || w.Started.IsZero() {
			t.Errorf("registration %+v: want name %q, pid %d, host %q, concurrency 5, a start time", w, r.w.Name(), os.Getpid(), host)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if ws, err := b.Workers(ctx); err != nil || len(ws) != 0 {
			t.Errorf("Workers after Run returned = %+v, %v; want none", ws, err)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	b := queue.NewMemory(queue.MemoryConfig{})
	defer b.Close()
	tests := []struct {
		name string
		cfg  worker.Config
	}{
		{"negative concurrency", worker.Config{Concurrency: -1}},
		{"negative claim idle", worker.Config{ClaimIdle: -time.Second}},
		{"heartbeat as long as claim idle", worker.Config{ClaimIdle: time.Second, Heartbeat: time.Second}},
		{"negative max deliveries", worker.Config{MaxDeliveries: -2}},
		// A heartbeat of ClaimIdle/3 rounded to 0 once panicked in
		// time.NewTicker.
		{"claim idle of a nanosecond", worker.Config{ClaimIdle: time.Nanosecond}},
		{"claim idle under the minimum", worker.Config{ClaimIdle: worker.MinClaimIdle - 1}},
		{"bad name", worker.Config{Name: "a\nb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := worker.New(b, quick, tt.cfg).Run(testContext(t))
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("Run = %v, want an EINVALID error", err)
			}
		})
	}
	if ws, _ := b.Workers(testContext(t)); len(ws) != 0 {
		t.Errorf("workers with a bad config registered: %+v", ws)
	}
}

func TestBrokerClosedAtStart(t *testing.T) {
	b := queue.NewMemory(queue.MemoryConfig{})
	b.Close()
	if err := worker.New(b, quick, fast("w")).Run(testContext(t)); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Run on a closed broker = %v, want an error wrapping ErrClosed", err)
	}
}

// TestSkewedWorkerClock: a worker whose clock runs 5 s ahead (another host
// without NTP) reports its offset against the broker's clock, and the
// generator moves its stamps onto its own: queue wait stays small and
// positive, and no result counts as skewed.
func TestSkewedWorkerClock(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		const skew = 5 * time.Second
		ahead := func() time.Time { return time.Now().Add(skew) }
		model := worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
			return worker.Completion{FirstToken: ahead(), OutputTokens: maxTokens, TokenSource: queue.TokensCounted}, nil
		})
		tg := newTarget(t, b, queue.TargetConfig{MaxTokens: 3})
		cfg := fast("skewed")
		cfg.Now = ahead
		r := start(t, b, model, cfg)
		// No job can have waited longer than it took to do them all, on
		// this clock; the skew left in would add 5 s.
		began := time.Now()
		results := doAll(testContext(t), tg, 10)
		all := time.Since(began)
		for _, res := range results {
			if !res.OK() {
				t.Fatalf("job %d: %q", res.Seq, res.Err)
			}
			if w := res.QueueWait(); w < 0 || w > all {
				t.Errorf("job %d: queue wait %v with a worker 5 s ahead, of the %v all 10 took; want the skew taken out", res.Seq, w, all)
			}
			if res.Done.Before(res.Started) || res.FirstByte.Before(res.Started) {
				t.Errorf("job %d: started %v first token %v done %v: out of order", res.Seq, res.Started, res.FirstByte, res.Done)
			}
		}
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if s := tg.Stats().Skewed; s != 0 {
			t.Errorf("%d results counted skewed after the correction", s)
		}
	})
}

// TestDefaultClaimIdleShortRun: with the default claim idle, a job whose
// worker died holding it is done by another well within a short run's job
// timeout (issue 20, defect 5: the old 30 s default cost a 20 s run its
// job). Redis only: the claim timing is the server's.
func TestDefaultClaimIdleShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the default claim idle, seconds")
	}
	b := brokers[1].open(t)
	const jobTimeout = 20 * time.Second
	ctx := testContext(t)
	tg := newTarget(t, b, queue.TargetConfig{Timeout: jobTimeout})
	began := time.Now()
	results := doAsync(ctx, tg, 1)
	// A worker takes the job and dies at once: no touch, no result.
	eventually(t, "the job to be enqueued", func() bool { return tg.Stats().Enqueued == 1 })
	if ds, err := b.Fetch(ctx, "dead", 1, time.Second); err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %v, %v", ds, err)
	}
	start(t, b, quick, worker.Config{Name: "survivor"}) // every default, the claim idle included
	res := (<-results)[0]
	took := time.Since(began)
	// Ok is done within the job timeout (after it, the job is a timeout).
	if !res.OK() || res.Worker != "survivor" || res.Deliveries != 2 {
		t.Fatalf("job: %q by %q, %d deliveries; want ok by survivor after 2 deliveries, within the %v job timeout", res.Err, res.Worker, res.Deliveries, jobTimeout)
	}
	t.Logf("redone after %v (default claim idle %v)", took, worker.DefaultClaimIdle)
}

// TestProtocolDocDefaults: the defaults docs/job-protocol.md quotes for a
// worker in another language are this worker's.
func TestProtocolDocDefaults(t *testing.T) {
	raw, err := os.ReadFile("../docs/job-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(raw)), " ")
	for _, want := range []string{
		fmt.Sprintf("tare's default claim idle is %d ms", worker.DefaultClaimIdle.Milliseconds()),
		fmt.Sprintf("(tare's default %d)", worker.DefaultMaxDeliveries),
		fmt.Sprintf("(tare's grace: %d s)", int(worker.DefaultGrace.Seconds())),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/job-protocol.md does not say %q", want)
		}
	}
}
