package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

func newTarget(t *testing.T, b Broker, cfg TargetConfig) *Target {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	tg, err := NewTarget(b, cfg)
	if err != nil {
		t.Fatalf("NewTarget: %v", err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg
}

// consume runs a consumer until the test ends: it fetches jobs and
// completes each with what answer returns.
func consume(t *testing.T, b Broker, name string, answer func(d Delivery) Result) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			ds, err := b.Fetch(ctx, name, 16, 50*time.Millisecond)
			if err != nil {
				return
			}
			for _, d := range ds {
				if err := b.Complete(ctx, d, answer(d)); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// okResult is what a well-behaved worker reports for d.
func okResult(d Delivery, worker string) Result {
	start := time.Now()
	return Result{
		ID: d.Job.ID, RunID: d.Job.RunID, Worker: worker,
		Start: start, FirstToken: start.Add(time.Microsecond), Done: start.Add(2 * time.Microsecond),
		TokensIn: 3, TokensOut: 5, TokenSource: TokensCounted,
		Status: StatusOK, Deliveries: d.Count,
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTargetMatchesResults(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{Prompt: "p", MaxTokens: 9})
		var mu sync.Mutex
		prompts := map[string]int{}
		consume(t, b, "w", func(d Delivery) Result {
			mu.Lock()
			prompts[fmt.Sprint(d.Job.Prompt, "/", d.Job.MaxTokens, "/", d.Job.RunID == tg.RunID())]++
			mu.Unlock()
			return okResult(d, "w")
		})
		const n = 30
		for _, res := range queuetest.DoAll(queuetest.Context(t), tg, n) {
			switch {
			case !res.OK():
				t.Errorf("job %d failed: %q", res.Seq, res.Err)
			case res.Worker != "w" || res.Deliveries != 1 || res.OutputTokens != 5 || res.TokenSource != TokensCounted:
				t.Errorf("job %d: worker %q, deliveries %d, tokens %d (%s); want w, 1, 5 (counted)",
					res.Seq, res.Worker, res.Deliveries, res.OutputTokens, res.TokenSource)
			case res.Started.Before(res.Sent.Round(0)) || res.Done.Before(res.Started) || res.FirstByte.Before(res.Started):
				t.Errorf("job %d: sent %v, started %v, first token %v, done %v: out of order",
					res.Seq, res.Sent, res.Started, res.FirstByte, res.Done)
			}
		}
		if want := "p/9/true"; prompts[want] != n {
			t.Errorf("jobs seen by the worker: %v, want %d × %q", prompts, n, want)
		}
		st := tg.Stats()
		if st.Enqueued != n || st.Matched != n || st.Duplicates+st.Late+st.Foreign+st.Unfinished+st.Unavailable != 0 {
			t.Errorf("Stats = %+v, want %d enqueued and matched, nothing else", st, n)
		}
	})
}

func TestTargetReportsOnce(t *testing.T) {
	// A job entered twice (a client that retried an XADD whose reply was
	// lost) is done twice: it is reported once and counted as a duplicate.
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{})
		consume(t, b, "w", func(d Delivery) Result {
			if d.Job.Prompt != "copy" {
				copied := d.Job
				copied.Prompt = "copy"
				if err := b.Enqueue(context.Background(), copied); err != nil {
					t.Errorf("enqueue a copy: %v", err)
				}
			}
			return okResult(d, "w")
		})
		const n = 10
		for _, res := range queuetest.DoAll(queuetest.Context(t), tg, n) {
			if !res.OK() || res.Worker != "w" {
				t.Errorf("job %d: %q from %q, want ok from w", res.Seq, res.Err, res.Worker)
			}
		}
		eventually(t, "the duplicates to be counted", func() bool { return tg.Stats().Duplicates == n })
		if st := tg.Stats(); st.Matched != n || st.Late != 0 {
			t.Errorf("Stats = %+v, want %d matched and no late results", st, n)
		}
	})
}

func TestTargetFailedJob(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{})
		consume(t, b, "w", func(d Delivery) Result {
			r := okResult(d, "w")
			r.Status, r.Error, r.TokensOut = StatusError, "http 503", 0
			return r
		})
		res := queuetest.DoAll(queuetest.Context(t), tg, 1)[0]
		if res.Err != "http 503" || res.Started.IsZero() || res.Worker != "w" {
			t.Errorf("failed job recorded as %q by %q (started %v), want \"http 503\" by w with its stamps", res.Err, res.Worker, res.Started)
		}
	})
}

func TestTargetUnfinished(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{})
		ctx, cancel := context.WithTimeout(queuetest.Context(t), 100*time.Millisecond)
		defer cancel()
		res := queuetest.DoAll(ctx, tg, 3)
		for _, r := range res {
			if r.Err != KindUnfinished {
				t.Errorf("job %d with no worker: %q, want %q", r.Seq, r.Err, KindUnfinished)
			}
		}
		// The worker turns up after the run: its results are late, not
		// reported again.
		consume(t, b, "w", func(d Delivery) Result { return okResult(d, "w") })
		eventually(t, "late results to be counted", func() bool { return tg.Stats().Late == 3 })
		if st := tg.Stats(); st.Unfinished != 3 || st.Matched != 0 {
			t.Errorf("Stats = %+v, want 3 unfinished, none matched", st)
		}
	})
}

func TestTargetTimeout(t *testing.T) {
	b := NewMemory(MemoryConfig{})
	defer b.Close()
	tg := newTarget(t, b, TargetConfig{Timeout: 50 * time.Millisecond})
	for _, r := range queuetest.DoAll(queuetest.Context(t), tg, 2) {
		if r.Err != KindTimeout {
			t.Errorf("job %d with no worker and a 50ms timeout: %q, want %q", r.Seq, r.Err, KindTimeout)
		}
	}
	if st := tg.Stats(); st.Timeouts != 2 || st.Unfinished != 0 {
		t.Errorf("Stats = %+v, want 2 timeouts", st)
	}
}

func TestTargetForeignResults(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{RunID: "mine"})
		consume(t, b, "w", func(d Delivery) Result { return okResult(d, "w") })
		// Another generator's job, and one whose id no Target would use.
		for _, j := range []Job{
			{ID: "0", RunID: "another run", Enqueued: time.Now()},
			{ID: "not-a-seq", RunID: "mine", Enqueued: time.Now()},
		} {
			if err := b.Enqueue(queuetest.Context(t), j); err != nil {
				t.Fatal(err)
			}
		}
		if res := queuetest.DoAll(queuetest.Context(t), tg, 1)[0]; !res.OK() {
			t.Fatalf("job failed: %q", res.Err)
		}
		eventually(t, "foreign and unknown results to be counted", func() bool { st := tg.Stats(); return st.Foreign == 1 && st.Unknown == 1 })
		if st := tg.Stats(); st.Matched != 1 {
			t.Errorf("Stats = %+v, want 1 matched", st)
		}
	})
}

func TestTargetQueueUnavailable(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		var tg *Target
		var closeBroker func() error
		switch b := b.(type) {
		case *Memory:
			tg = newTarget(t, b, TargetConfig{})
			closeBroker = b.Close
		case *Redis:
			// A client of its own, closed under the target.
			r, err := OpenRedis(queuetest.Context(t), mustURL(), b.Queue())
			if err != nil {
				t.Fatal(err)
			}
			tg = newTarget(t, r, TargetConfig{})
			closeBroker = r.Close
		}
		if err := closeBroker(); err != nil {
			t.Fatal(err)
		}
		res := queuetest.DoAll(queuetest.Context(t), tg, 2)
		for _, r := range res {
			if r.Err != KindUnavailable {
				t.Errorf("job %d on a closed broker: %q, want %q", r.Seq, r.Err, KindUnavailable)
			}
		}
		if st := tg.Stats(); st.Unavailable != 2 || st.Enqueued != 0 {
			t.Errorf("Stats = %+v, want 2 unavailable, none enqueued", st)
		}
	})
}

func mustURL() string { u, _ := redisURL(); return u }

func TestTargetQueueLost(t *testing.T) {
	// The queue's state vanishes under waiting jobs (a Redis restart
	// without persistence, or a cleanup): they fail at once instead of
	// waiting for the end of the run.
	forEachBroker(t, func(t *testing.T, b Broker) {
		tg := newTarget(t, b, TargetConfig{})
		done := make(chan []tare.Result, 1)
		go func() { done <- queuetest.DoAll(queuetest.Context(t), tg, 4) }()
		eventually(t, "the jobs to be enqueued", func() bool { return tg.Stats().Enqueued == 4 })
		if _, err := b.Cleanup(queuetest.Context(t)); err != nil {
			t.Fatal(err)
		}
		for _, r := range <-done {
			if r.Err != KindUnavailable {
				t.Errorf("job %d lost with the queue: %q, want %q", r.Seq, r.Err, KindUnavailable)
			}
		}
		if st := tg.Stats(); st.Lost != 1 || st.Unavailable != 4 {
			t.Errorf("Stats = %+v, want the loss seen once and 4 jobs unavailable", st)
		}
		// The target goes on working on the fresh queue.
		consume(t, b, "w", func(d Delivery) Result { return okResult(d, "w") })
		res := tare.Result{Seq: 100, Sent: time.Now()}
		tg.Do(queuetest.Context(t), &res)
		if !res.OK() {
			t.Errorf("job after the loss: %q, want ok", res.Err)
		}
	})
}

func TestTargetClose(t *testing.T) {
	b := NewMemory(MemoryConfig{})
	defer b.Close()
	tg, err := NewTarget(b, TargetConfig{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []tare.Result, 1)
	go func() { done <- queuetest.DoAll(context.Background(), tg, 2) }()
	eventually(t, "the jobs to be enqueued", func() bool { return tg.Stats().Enqueued == 2 })
	if err := tg.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range <-done {
		if r.Err != KindUnfinished {
			t.Errorf("job %d waiting at Close: %q, want %q", r.Seq, r.Err, KindUnfinished)
		}
	}
	res := tare.Result{Seq: 9}
	tg.Do(context.Background(), &res)
	if res.Err != KindUnfinished || res.Sent.IsZero() {
		t.Errorf("Do after Close: %q (sent %v), want %q and a send time", res.Err, res.Sent, KindUnfinished)
	}
}

func TestNewTargetRejects(t *testing.T) {
	b := NewMemory(MemoryConfig{})
	defer b.Close()
	for _, cfg := range []TargetConfig{{MaxTokens: -1}, {Poll: -time.Second}, {Timeout: -time.Second}} {
		if _, err := NewTarget(b, cfg); tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("NewTarget(%+v) = %v, want an EINVALID error", cfg, err)
		}
	}
}

func TestSeqSet(t *testing.T) {
	var s seqSet
	for _, n := range []uint64{0, 63, 64, 1000, denseLimit - 1, denseLimit, 1 << 62} {
		if s.has(n) {
			t.Errorf("empty set has %d", n)
		}
		s.add(n)
		if !s.has(n) {
			t.Errorf("set lacks %d after adding it", n)
		}
	}
	if s.has(1) || s.has(65) || s.has(1<<61) {
		t.Error("set has numbers never added")
	}
	if len(s.bits) > denseLimit/64 {
		t.Errorf("bit set grew to %d words for sparse numbers", len(s.bits))
	}
}

// TestTargetCountsTrouble: what a queue run must not hide (issue 20,
// defect 5) is in Stats: a job redelivered after its worker seemed dead, a
// result for an id this run never used, the age of the oldest pending job
// while a worker holds it, and the workers all going away.
func TestTargetCountsTrouble(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		tg := newTarget(t, b, TargetConfig{RunID: "mine"})
		if err := b.Register(ctx, WorkerInfo{Name: "dies", Concurrency: 1}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if ws, err := tg.Workers(ctx); err != nil || len(ws) != 1 {
			t.Fatalf("Workers = %v, %v; want the one registered", ws, err)
		}

		// A worker takes job 0 and dies holding it.
		done := make(chan tare.Result, 1)
		go func() { done <- queuetest.DoAll(ctx, tg, 1)[0] }()
		var held []Delivery
		eventually(t, "the job to be fetched", func() bool {
			ds, err := b.Fetch(ctx, "dies", 1, 0)
			held = append(held, ds...)
			return err == nil && len(held) == 1
		})
		const idle = 100 * time.Millisecond
		time.Sleep(idle + 50*time.Millisecond)
		d, err := tg.Depth(ctx)
		if err != nil || d.Pending != 1 || d.OldestPending < idle {
			t.Fatalf("Depth while the dead worker holds the job = %+v, %v; want 1 pending, %v old or more", d, err, idle)
		}
		if err := b.Unregister(ctx, "dies"); err != nil {
			t.Fatal(err)
		}
		if ws, err := tg.Workers(ctx); err != nil || len(ws) != 0 {
			t.Fatalf("Workers after the only one left = %v, %v", ws, err)
		}
		st := tg.Stats()
		if st.OldestPendingMax < idle || st.Depth.Pending != 1 {
			t.Errorf("Stats oldest pending %v, depth %+v; want at least %v and the job pending", st.OldestPendingMax, st.Depth, idle)
		}
		if st.Workers != 0 || st.WorkersMax != 1 || st.WorkersLost != 1 || st.WorkersGone.IsZero() {
			t.Errorf("Stats workers %d, max %d, lost %d, gone at %v; want 0, 1, lost once", st.Workers, st.WorkersMax, st.WorkersLost, st.WorkersGone)
		}

		// Another claims it and completes it: redelivered.
		got, err := b.Claim(ctx, "alive", idle, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim = %v, %v", got, err)
		}
		if err := b.Complete(ctx, got[0], okResult(got[0], "alive")); err != nil {
			t.Fatal(err)
		}
		if res := <-done; !res.OK() || res.Deliveries != 2 {
			t.Errorf("the redelivered job: %q, %d deliveries; want ok, 2", res.Err, res.Deliveries)
		}
		// A result for a job number this run never enqueued.
		enqueueRaw(t, b, Job{ID: "999", RunID: "mine", Enqueued: time.Now()})
		consume(t, b, "w", func(d Delivery) Result { return okResult(d, "w") })
		eventually(t, "the unknown result to be counted", func() bool { return tg.Stats().Unknown == 1 })
		if st := tg.Stats(); st.Redelivered != 1 || st.Matched != 1 || st.Duplicates+st.Late+st.Foreign != 0 {
			t.Errorf("Stats = %+v, want 1 matched and redelivered, 1 unknown, nothing else", st)
		}
		if err := b.Register(ctx, WorkerInfo{Name: "back", Concurrency: 1}, time.Minute); err != nil {
			t.Fatal(err)
		}
		tg.Workers(ctx)
		if st := tg.Stats(); st.Workers != 1 || st.WorkersLost != 1 || !st.WorkersGone.IsZero() {
			t.Errorf("Stats after a worker came back: %d workers, lost %d, gone at %v; want 1, 1, none", st.Workers, st.WorkersLost, st.WorkersGone)
		}
	})
}

// TestTargetSetRunID: the jobs of the next run carry its id, and a late
// result of the run before, whose job numbers start at 0 again, is foreign
// to it rather than matched to the new job 0.
func TestTargetSetRunID(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		tg := newTarget(t, b, TargetConfig{RunID: "first"})
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if r := queuetest.DoAll(short, tg, 1)[0]; r.Err != KindUnfinished {
			t.Fatalf("first run's job with no worker: %q", r.Err)
		}
		cancel()
		tg.SetRunID("second")
		if tg.RunID() != "second" {
			t.Fatalf("RunID = %q after SetRunID", tg.RunID())
		}
		var mu sync.Mutex
		runs := map[string]int{}
		consume(t, b, "w", func(d Delivery) Result {
			mu.Lock()
			runs[d.Job.RunID]++
			mu.Unlock()
			return okResult(d, "w")
		})
		if r := queuetest.DoAll(ctx, tg, 1)[0]; !r.OK() {
			t.Fatalf("second run's job: %q", r.Err)
		}
		eventually(t, "the first run's result to be counted foreign", func() bool { return tg.Stats().Foreign == 1 })
		mu.Lock()
		defer mu.Unlock()
		if runs["first"] != 1 || runs["second"] != 1 {
			t.Errorf("jobs by run: %v, want one of each", runs)
		}
		if st := tg.Stats(); st.Enqueued != 1 || st.Matched != 1 || st.Unfinished+st.Late+st.Duplicates+st.Unknown != 0 {
			t.Errorf("Stats = %+v, want the second run's own: its job enqueued and matched, the first's result foreign", st)
		}
	})
}

func enqueueRaw(t *testing.T, b Broker, j Job) {
	t.Helper()
	if err := b.Enqueue(queuetest.Context(t), j); err != nil {
		t.Fatal(err)
	}
}

// TestFillMovesWorkerStamps: a worker's stamps are moved onto the
// generator's clock by the difference of the two offsets against the
// broker, unless that difference is within the measurements' error (twice
// the generator's round trip, for the worker's unreported one, and two
// milliseconds): a worker on this host shares its clock, and moving it by
// the noise would give negative queue waits.
func TestFillMovesWorkerStamps(t *testing.T) {
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name               string
		worker, local, rtt time.Duration
		wantShift          time.Duration
	}{
		{"another host's clock", 5 * time.Millisecond, 0, 100 * time.Microsecond, 5 * time.Millisecond},
		{"behind, too", -3 * time.Millisecond, time.Millisecond, 200 * time.Microsecond, -4 * time.Millisecond},
		{"within a millisecond", 600 * time.Microsecond, 0, 80 * time.Microsecond, 0},
		{"within two milliseconds, as on a loaded host", 1100 * time.Microsecond, 0, 300 * time.Microsecond, 0},
		{"within twice the round trip", 3 * time.Millisecond, 0, 2 * time.Millisecond, 0},
		{"within the round trip", 2500 * time.Microsecond, 500 * time.Microsecond, 3 * time.Millisecond, 0},
		{"no offset reported", 0, 4 * time.Millisecond, 100 * time.Microsecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Result{Start: start, FirstToken: start.Add(time.Millisecond), Done: start.Add(2 * time.Millisecond), ClockOffset: tt.worker}
			var res tare.Result
			fill(&res, outcome{res: r, localOffset: tt.local, localRTT: tt.rtt})
			if got := res.Started.Sub(start); got != tt.wantShift {
				t.Errorf("started moved by %v; want %v", got, tt.wantShift)
			}
			if got := res.Done.Sub(r.Done); got != tt.wantShift || res.FirstByte.Sub(r.FirstToken) != tt.wantShift {
				t.Errorf("done moved by %v, first token by %v; want %v both", got, res.FirstByte.Sub(r.FirstToken), tt.wantShift)
			}
		})
	}
}

// TestTargetSkewed: a result counts skewed when its stamps fall outside
// the job's [enqueue, receipt] by more than the clock offsets' own error
// (clockError): a worker whose clock the correction could not move (it
// reported no offset) a second behind is; one a millisecond off, the
// error of two offsets measured on a loaded machine, is not.
func TestTargetSkewed(t *testing.T) {
	sent := time.Now()
	received := sent.Add(50 * time.Millisecond)
	for _, tt := range []struct {
		name        string
		start, done time.Time
		skewed      int64
	}{
		{"inside", sent.Add(time.Millisecond), received.Add(-time.Millisecond), 0},
		{"a millisecond early", sent.Add(-time.Millisecond), received.Add(-time.Millisecond), 0},
		{"a millisecond late", sent.Add(time.Millisecond), received.Add(time.Millisecond), 0},
		{"a second early", sent.Add(-time.Second), received.Add(-time.Second), 1},
		{"a second late", sent.Add(time.Second), received.Add(time.Second), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := &Target{runID: "run", waiters: map[uint64]*waiter{7: {ch: make(chan outcome, 1), sent: sent}}}
			tg.dispatch(Result{ID: "7", RunID: "run", Start: tt.start, Done: tt.done}, received)
			if got := tg.stats.Skewed; got != tt.skewed {
				t.Errorf("skewed %d, want %d", got, tt.skewed)
			}
		})
	}
}
