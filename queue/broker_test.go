package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/queue/internal/queuetest"
)

// The shared suite: every test runs against Memory and Redis, which must
// behave the same.

func forEachBroker(t *testing.T, test func(t *testing.T, b Broker)) {
	for _, impl := range brokers {
		t.Run(impl.name, func(t *testing.T) {
			test(t, impl.open(t))
		})
	}
}

func sameJob(a, b Job) bool {
	return a.ID == b.ID && a.RunID == b.RunID && a.Enqueued.Equal(b.Enqueued) &&
		a.Prompt == b.Prompt && a.MaxTokens == b.MaxTokens
}

func sameResult(a, b Result) bool {
	return a.ID == b.ID && a.RunID == b.RunID && a.Worker == b.Worker &&
		a.Start.Equal(b.Start) && a.FirstToken.Equal(b.FirstToken) && a.Done.Equal(b.Done) &&
		a.TokensIn == b.TokensIn && a.TokensOut == b.TokensOut && a.TokenSource == b.TokenSource &&
		a.Status == b.Status && a.Error == b.Error && a.Deliveries == b.Deliveries
}

func enqueue(t *testing.T, b Broker, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := b.Enqueue(queuetest.Context(t), sampleJob(id)); err != nil {
			t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
}

func fetch(t *testing.T, b Broker, consumer string, n int, block time.Duration) []Delivery {
	t.Helper()
	ds, err := b.Fetch(queuetest.Context(t), consumer, n, block)
	if err != nil {
		t.Fatalf("Fetch(%s, %d): %v", consumer, n, err)
	}
	for _, d := range ds {
		if d.Err != nil {
			t.Fatalf("Fetch(%s): delivery %s: %v", consumer, d.ID, d.Err)
		}
	}
	return ds
}

func claim(t *testing.T, b Broker, consumer string, idle time.Duration, n int) []Delivery {
	t.Helper()
	ds, err := b.Claim(queuetest.Context(t), consumer, idle, n)
	if err != nil {
		t.Fatalf("Claim(%s, %v, %d): %v", consumer, idle, n, err)
	}
	return ds
}

func depth(t *testing.T, b Broker) Depth {
	t.Helper()
	d, err := b.Depth(queuetest.Context(t))
	if err != nil {
		t.Fatalf("Depth: %v", err)
	}
	return d
}

func complete(t *testing.T, b Broker, d Delivery, worker string) Result {
	t.Helper()
	r := sampleResult(d.Job.ID, worker)
	r.Deliveries = d.Count
	if err := b.Complete(queuetest.Context(t), d, r); err != nil {
		t.Fatalf("Complete(%s): %v", d.ID, err)
	}
	return r
}

func jobIDs(ds []Delivery) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.Job.ID)
	}
	return ids
}

func TestEnqueueFetchComplete(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		enqueue(t, b, "1", "2", "3")
		first := fetch(t, b, "a", 2, 0)
		if got := jobIDs(first); !slices.Equal(got, []string{"1", "2"}) {
			t.Fatalf("first fetch got jobs %v, want [1 2] in enqueue order", got)
		}
		for _, d := range first {
			if d.Count != 1 || !sameJob(d.Job, sampleJob(d.Job.ID)) {
				t.Errorf("delivery %+v: want count 1 and the job as enqueued %+v", d, sampleJob(d.Job.ID))
			}
		}
		if got := jobIDs(fetch(t, b, "b", 5, 0)); !slices.Equal(got, []string{"3"}) {
			t.Fatalf("second consumer got jobs %v, want [3]: a job goes to one consumer", got)
		}
		if got := fetch(t, b, "a", 5, 0); len(got) != 0 {
			t.Fatalf("fetch from an empty queue got %v, want none", jobIDs(got))
		}
		if d := depth(t, b); d.Waiting != 0 || d.Pending != 3 {
			t.Errorf("depth after fetching all = %+v, want 0 waiting, 3 pending", d)
		}

		want := complete(t, b, first[0], "a")
		if d := depth(t, b); d.Pending != 2 {
			t.Errorf("pending after one completion = %d, want 2", d.Pending)
		}
		got, _, err := b.Results(queuetest.Context(t), "", 10, 0)
		if err != nil {
			t.Fatalf("Results: %v", err)
		}
		if len(got) != 1 || !sameResult(got[0], want) {
			t.Fatalf("Results = %+v, want [%+v]", got, want)
		}
		if err := b.Complete(queuetest.Context(t), first[0], want); !errors.Is(err, ErrNotPending) {
			t.Errorf("second Complete of a delivery = %v, want ErrNotPending", err)
		}
		if err := b.Ack(queuetest.Context(t), first[1].ID); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if d := depth(t, b); d.Pending != 1 {
			t.Errorf("pending after an ack = %d, want 1", d.Pending)
		}
		if ds := claim(t, b, "c", 0, 10); len(ds) != 1 || ds[0].Job.ID != "3" {
			t.Errorf("claiming everything got %v, want only job 3: completed and acknowledged jobs are gone", jobIDs(ds))
		}
	})
}

func TestFetchWaits(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		if got := fetch(t, b, "a", 1, 30*time.Millisecond); len(got) != 0 {
			t.Fatalf("fetch with nothing enqueued got %v", jobIDs(got))
		}
		type fetched struct {
			ds  []Delivery
			err error
		}
		ch := make(chan fetched, 1)
		go func() {
			ds, err := b.Fetch(queuetest.Context(t), "a", 1, 5*time.Second)
			ch <- fetched{ds, err}
		}()
		time.Sleep(50 * time.Millisecond)
		enqueue(t, b, "late")
		f := <-ch
		if f.err != nil || len(f.ds) != 1 || f.ds[0].Job.ID != "late" {
			t.Fatalf("a waiting fetch got %v, %v; want the job enqueued while it waited", jobIDs(f.ds), f.err)
		}
	})
}

func TestClaimAfterIdle(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		enqueue(t, b, "1", "2")
		dead := fetch(t, b, "dead", 2, 0)
		if got := claim(t, b, "alive", time.Hour, 10); len(got) != 0 {
			t.Fatalf("claimed %v before they were idle", jobIDs(got))
		}
		const idle = 100 * time.Millisecond
		time.Sleep(idle + 50*time.Millisecond)
		got := claim(t, b, "alive", idle, 1)
		if len(got) != 1 || got[0].Job.ID != "1" || got[0].Count != 2 || got[0].ID != dead[0].ID {
			t.Fatalf("claim got %+v, want job 1 (entry %s) with delivery count 2", got, dead[0].ID)
		}
		if !sameJob(got[0].Job, sampleJob("1")) {
			t.Errorf("claimed job %+v, want %+v", got[0].Job, sampleJob("1"))
		}
		if again := claim(t, b, "other", idle, 10); len(again) != 1 || again[0].Job.ID != "2" {
			t.Fatalf("second claim got %v, want only job 2: job 1 was just claimed and is not idle", jobIDs(again))
		}
		// The presumed-dead consumer was only slow: it completes job 1
		// first, and the consumer that claimed it publishes nothing.
		complete(t, b, dead[0], "dead")
		if err := b.Complete(queuetest.Context(t), got[0], sampleResult("1", "alive")); !errors.Is(err, ErrNotPending) {
			t.Errorf("completing a job another consumer completed = %v, want ErrNotPending", err)
		}
		rs, _, err := b.Results(queuetest.Context(t), "", 10, 0)
		if err != nil || len(rs) != 1 || rs[0].Worker != "dead" {
			t.Errorf("Results = %+v, %v; want one, from the consumer that completed first", rs, err)
		}
		time.Sleep(idle + 50*time.Millisecond)
		third := claim(t, b, "third", idle, 10)
		if len(third) != 1 || third[0].Job.ID != "2" || third[0].Count != 3 {
			t.Fatalf("third claim got %+v, want job 2 with delivery count 3", third)
		}
		if d := depth(t, b); d.Pending != 1 || d.Waiting != 0 {
			t.Errorf("depth = %+v, want 1 pending (job 2), 0 waiting", d)
		}
	})
}

func TestTouchKeepsJob(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		enqueue(t, b, "1")
		ds := fetch(t, b, "slow", 1, 0)
		const idle = 250 * time.Millisecond
		time.Sleep(idle + 50*time.Millisecond)
		if err := b.Touch(queuetest.Context(t), "slow", ds[0].ID); err != nil {
			t.Fatalf("Touch: %v", err)
		}
		if got := claim(t, b, "other", idle, 10); len(got) != 0 {
			t.Fatalf("claimed a job its worker had just touched: %+v", got)
		}
		time.Sleep(idle + 50*time.Millisecond)
		got := claim(t, b, "other", idle, 10)
		if len(got) != 1 || got[0].Count != 2 {
			t.Fatalf("claim after the touch went stale got %+v, want the job with count 2 (a touch is not a delivery)", got)
		}
	})
}

func TestDepth(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		if d := depth(t, b); d != (Depth{}) {
			t.Fatalf("depth of an empty queue = %+v, want zero", d)
		}
		enqueue(t, b, "1", "2", "3", "4", "5")
		ds := fetch(t, b, "a", 2, 0)
		time.Sleep(30 * time.Millisecond)
		d := depth(t, b)
		if d.Waiting != 3 || d.Pending != 2 {
			t.Errorf("depth = %+v, want 3 waiting, 2 pending", d)
		}
		if d.OldestPending < 20*time.Millisecond {
			t.Errorf("oldest pending age = %v after sleeping 30ms, want at least 20ms", d.OldestPending)
		}
		for _, x := range ds {
			complete(t, b, x, "a")
		}
		if d := depth(t, b); d.Waiting != 3 || d.Pending != 0 || d.OldestPending != 0 {
			t.Errorf("depth after completing = %+v, want 3 waiting, 0 pending, no oldest", d)
		}
	})
}

func TestResultsCursor(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		enqueue(t, b, "1", "2", "3")
		for _, d := range fetch(t, b, "a", 3, 0) {
			complete(t, b, d, "a")
		}
		got, cur, err := b.Results(ctx, "", 2, 0)
		if err != nil || len(got) != 2 || got[0].ID != "1" || got[1].ID != "2" {
			t.Fatalf("Results(\"\", 2) = %+v, %v; want results 1 and 2", got, err)
		}
		got, cur, err = b.Results(ctx, cur, 10, 0)
		if err != nil || len(got) != 1 || got[0].ID != "3" {
			t.Fatalf("Results after the cursor = %+v, %v; want result 3", got, err)
		}
		got, cur2, err := b.Results(ctx, cur, 10, 30*time.Millisecond)
		if err != nil || len(got) != 0 || cur2 != cur {
			t.Fatalf("Results at the end = %+v, cursor %q, %v; want none and the same cursor %q", got, cur2, err, cur)
		}
		done := make(chan []Result, 1)
		go func() {
			rs, _, _ := b.Results(ctx, cur, 10, 5*time.Second)
			done <- rs
		}()
		time.Sleep(50 * time.Millisecond)
		enqueue(t, b, "4")
		complete(t, b, fetch(t, b, "a", 1, 0)[0], "a")
		if rs := <-done; len(rs) != 1 || rs[0].ID != "4" {
			t.Fatalf("a waiting Results got %+v, want result 4 published while it waited", rs)
		}
	})
}

func TestStopSignal(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		check := func(want bool) {
			t.Helper()
			got, err := b.Stopped(ctx)
			if err != nil || got != want {
				t.Fatalf("Stopped() = %v, %v; want %v", got, err, want)
			}
		}
		check(false)
		if err := b.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		check(true)
		if _, err := b.Cleanup(ctx); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
		check(false)
	})
}

func TestRegistry(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		started := time.Unix(1700000000, 0)
		for _, name := range []string{"b", "a"} {
			w := WorkerInfo{Name: name, Host: "h", PID: 42, Started: started, Concurrency: 3}
			if err := b.Register(ctx, w, time.Hour); err != nil {
				t.Fatalf("Register(%s): %v", name, err)
			}
		}
		names := func() []string {
			t.Helper()
			ws, err := b.Workers(ctx)
			if err != nil {
				t.Fatalf("Workers: %v", err)
			}
			var out []string
			for _, w := range ws {
				if w.Host != "h" || w.PID != 42 || !w.Started.Equal(started) || w.Concurrency != 3 {
					t.Errorf("worker %+v: fields lost on the way", w)
				}
				out = append(out, w.Name)
			}
			return out
		}
		if got := names(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("Workers = %v, want [a b]", got)
		}
		if err := b.Unregister(ctx, "a"); err != nil {
			t.Fatalf("Unregister: %v", err)
		}
		short := WorkerInfo{Name: "short", Host: "h", PID: 42, Started: started, Concurrency: 3}
		if err := b.Register(ctx, short, 100*time.Millisecond); err != nil {
			t.Fatalf("Register(short): %v", err)
		}
		if got := names(); !slices.Equal(got, []string{"b", "short"}) {
			t.Fatalf("Workers = %v, want [b short]", got)
		}
		time.Sleep(250 * time.Millisecond)
		if got := names(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("Workers after short's TTL = %v, want [b]: a worker that stops refreshing goes away", got)
		}
		if err := b.Register(ctx, WorkerInfo{Name: ""}, time.Second); err == nil {
			t.Error("Register with an empty name succeeded")
		}
	})
}

func TestWaitWorkers(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		if err := WaitWorkers(ctx, b, 10*time.Millisecond); err != nil {
			t.Fatalf("WaitWorkers with none registered: %v", err)
		}
		if err := b.Register(ctx, WorkerInfo{Name: "killed", PID: 7, Host: "h"}, 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := WaitWorkers(ctx, b, 10*time.Millisecond); err != nil {
			t.Fatalf("WaitWorkers for an expiring registration: %v", err)
		}
		if err := b.Register(ctx, WorkerInfo{Name: "stuck", PID: 8, Host: "h"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := WaitWorkers(short, b, 10*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stuck (pid 8 on h)") {
			t.Errorf("WaitWorkers with a worker that stays = %v, want a deadline error naming it", err)
		}
	})
}

func TestCleanupLosesState(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		enqueue(t, b, "1", "2")
		ds := fetch(t, b, "a", 1, 0)
		complete(t, b, ds[0], "a")
		_, cur, err := b.Results(ctx, "", 10, 0)
		if err != nil {
			t.Fatalf("Results: %v", err)
		}
		if err := b.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := b.Register(ctx, WorkerInfo{Name: "a"}, time.Hour); err != nil {
			t.Fatalf("Register: %v", err)
		}
		held := fetch(t, b, "a", 1, 0)
		keys, err := b.Cleanup(ctx)
		if err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
		if err := b.Complete(ctx, held[0], sampleResult(held[0].Job.ID, "a")); !errors.Is(err, ErrNotPending) {
			t.Errorf("completing a job fetched before the cleanup = %v, want ErrNotPending", err)
		}
		p := KeyPrefix(b.Queue())
		for _, want := range []string{p + "jobs", p + "results", p + "stop", p + "worker:a"} {
			if !slices.Contains(keys, want) {
				t.Errorf("Cleanup returned %v, want it to include %q", keys, want)
			}
		}
		if d := depth(t, b); d != (Depth{}) {
			t.Errorf("depth after cleanup = %+v, want zero", d)
		}
		if ws, err := b.Workers(ctx); err != nil || len(ws) != 0 {
			t.Errorf("Workers after cleanup = %v, %v; want none", ws, err)
		}
		_, next, err := b.Results(ctx, cur, 10, 0)
		if !errors.Is(err, ErrLost) || next != "" {
			t.Fatalf("Results after cleanup = cursor %q, %v; want ErrLost and an empty cursor", next, err)
		}
		// The queue is usable again, from the beginning.
		enqueue(t, b, "3")
		complete(t, b, fetch(t, b, "a", 1, 0)[0], "a")
		rs, _, err := b.Results(ctx, "", 10, 0)
		if err != nil || len(rs) != 1 || rs[0].ID != "3" {
			t.Fatalf("Results after reuse = %+v, %v; want result 3 only", rs, err)
		}
	})
}

func TestConcurrentConsumers(t *testing.T) {
	// Four consumers drain 200 jobs: each job is delivered exactly once.
	forEachBroker(t, func(t *testing.T, b Broker) {
		const jobs = 200
		for i := range jobs {
			enqueue(t, b, fmt.Sprint(i))
		}
		seen := make(chan string, jobs)
		errs := make(chan error, 4)
		for c := range 4 {
			go func() {
				name := fmt.Sprint("c", c)
				for {
					ds, err := b.Fetch(queuetest.Context(t), name, 7, 0)
					if err != nil {
						errs <- err
						return
					}
					if len(ds) == 0 {
						errs <- nil
						return
					}
					for _, d := range ds {
						r := sampleResult(d.Job.ID, name)
						if err := b.Complete(queuetest.Context(t), d, r); err != nil {
							errs <- err
							return
						}
						seen <- d.Job.ID
					}
				}
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		close(seen)
		count := map[string]int{}
		for id := range seen {
			count[id]++
		}
		for i := range jobs {
			if n := count[fmt.Sprint(i)]; n != 1 {
				t.Errorf("job %d delivered %d times, want 1", i, n)
			}
		}
		if d := depth(t, b); d != (Depth{}) {
			t.Errorf("depth after draining = %+v, want zero", d)
		}
	})
}

func TestBadInput(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b Broker) {
		ctx := queuetest.Context(t)
		if _, err := b.Fetch(ctx, "", 1, 0); err == nil {
			t.Error("Fetch with an empty consumer name succeeded")
		}
		if _, err := b.Claim(ctx, "bad\nname", time.Second, 1); err == nil {
			t.Error("Claim with a control character in the consumer name succeeded")
		}
		if _, _, err := b.Results(ctx, "not a cursor", 1, 0); err == nil {
			t.Error("Results with a bad cursor succeeded")
		}
	})
}
