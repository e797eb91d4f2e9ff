package queue

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

func TestCleanupLeavesForeignKeys(t *testing.T) {
	rdb := redisClient(t)
	ctx := queuetest.Context(t)
	q := uniqueQueue(t, rdb)
	r, err := NewRedis(ctx, rdb, q)
	if err != nil {
		t.Fatal(err)
	}
	// Keys that look like the queue's but are not: a longer queue name
	// with the same start ("tare:<q>q:jobs", the "tare:qq:jobs" of queue
	// "q"), the prefix without its colon, another namespace, the bare name.
	foreign := []string{
		"tare:" + q + "q:jobs",
		"tare:" + q + "-2:stop",
		"tare:" + q + "jobs",
		"tare:" + q,
		"other:" + q + ":jobs",
		q + ":jobs",
	}
	for _, k := range foreign {
		if err := rdb.Set(ctx, k, "foreign", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { rdb.Del(queuetest.Context(t), foreign...) })

	enqueue(t, r, "1", "2")
	complete(t, r, fetch(t, r, "w1", 1, 0)[0], "w1")
	if err := r.Register(ctx, WorkerInfo{Name: "w1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := Stop(ctx, rdb, q); err != nil {
		t.Fatal(err)
	}

	got, err := Cleanup(ctx, rdb, q)
	if err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	p := KeyPrefix(q)
	want := []string{p + "epoch", p + "jobs", p + "results", p + "stop", p + "worker:w1"}
	if !slices.Equal(got, want) {
		t.Errorf("Cleanup deleted %q, want exactly %q", got, want)
	}
	for _, k := range foreign {
		if v, err := rdb.Get(ctx, k).Result(); err != nil || v != "foreign" {
			t.Errorf("foreign key %q after cleanup: %q, %v; want it untouched", k, v, err)
		}
	}
	if left, err := ScanKeys(ctx, rdb, p+"*"); err != nil || len(left) != 0 {
		t.Errorf("keys of queue %q left after cleanup: %q, %v", q, left, err)
	}
	if again, err := Cleanup(ctx, rdb, q); err != nil || len(again) != 0 {
		t.Errorf("second cleanup = %q, %v; want nothing left to delete", again, err)
	}
}

func TestCleanupRejectsPatterns(t *testing.T) {
	rdb := redisClient(t)
	for _, q := range []string{"*", "q*", "q:x", "", "a?", "[ab]", "q\\", strings.Repeat("x", 65)} {
		if _, err := Cleanup(queuetest.Context(t), rdb, q); tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("Cleanup(%q) = %v, want an EINVALID error", q, err)
		}
	}
}

func TestRedisBadEntries(t *testing.T) {
	rdb := redisClient(t)
	ctx := queuetest.Context(t)
	r, err := NewRedis(ctx, rdb, uniqueQueue(t, rdb))
	if err != nil {
		t.Fatal(err)
	}
	// A job written by a broken generator: no enqueue time.
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.jobs, Values: []any{"id", "7", "run", "r"}}).Err(); err != nil {
		t.Fatal(err)
	}
	ds, err := r.Fetch(ctx, "a", 10, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch = %+v, %v; want the bad entry delivered", ds, err)
	}
	if !errors.Is(ds[0].Err, ErrParse) || ds[0].Job.ID != "7" || !strings.Contains(ds[0].Err.Error(), `"enqueued"`) {
		t.Errorf("bad entry delivered as %+v; want Err wrapping ErrParse naming \"enqueued\", and the id read", ds[0])
	}
	if err := r.Ack(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if d := depth(t, r); d != (Depth{}) {
		t.Errorf("depth after acknowledging the bad entry = %+v, want zero", d)
	}

	// A result written by a broken worker is skipped; the next is read.
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.results, Values: []any{"id", "1", "status", "maybe"}}).Err(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, r, "2")
	want := complete(t, r, fetch(t, r, "a", 1, 0)[0], "a")
	rs, _, err := r.Results(ctx, "", 10, 0)
	if err != nil || len(rs) != 1 || !sameResult(rs[0], want) {
		t.Errorf("Results = %+v, %v; want only the good result", rs, err)
	}
}

func TestOpenRedis(t *testing.T) {
	u, _ := redisURL()
	redisClient(t) // skips when no server answers
	ctx := queuetest.Context(t)
	tests := []struct {
		name, url, queue, code string
		notShown               string
	}{
		{name: "bad scheme", url: "http://127.0.0.1:6379/0", queue: "q", code: tare.EINVALID},
		{name: "password not shown", url: "redis://user:s3cret@[::1", queue: "q", code: tare.EINVALID, notShown: "s3cret"},
		{name: "bad queue", url: u, queue: "a:b", code: tare.EINVALID},
		{name: "nothing listens", url: "redis://:s3cret@127.0.0.1:1/0", queue: "q", code: tare.EUNAVAILABLE, notShown: "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := OpenRedis(ctx, tt.url, tt.queue)
			if err == nil {
				r.Close()
				t.Fatalf("OpenRedis(%q, %q) succeeded", tt.url, tt.queue)
			}
			if got := tare.ErrorCode(err); got != tt.code {
				t.Errorf("OpenRedis(%q, %q) = %v (code %s), want code %s", tt.url, tt.queue, err, got, tt.code)
			}
			if tt.notShown != "" && strings.Contains(err.Error(), tt.notShown) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	t.Run("ok", func(t *testing.T) {
		rdb := redisClient(t)
		q := uniqueQueue(t, rdb)
		r, err := OpenRedis(ctx, u, q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Queue() != q {
			t.Errorf("Queue() = %q, want %q", r.Queue(), q)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Enqueue(ctx, sampleJob("1")); err == nil {
			t.Error("Enqueue on a closed broker succeeded")
		}
	})
}
