package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// barrierKey is a barrier key of this test alone, deleted when it ends.
func barrierKey(t *testing.T, rdb *redis.Client) string {
	k := fmt.Sprintf("tare:test:barrier:%s:%d", t.Name(), time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), k+":joined", k+":start", k+":next", k+":members") })
	return k
}

// TestOffsetAgainstOwnClock: Redis on this host shares its clock, so the
// offset must lie within the reading's own error bound, RTT/2, plus the
// microsecond TIME is given in.
func TestOffsetAgainstOwnClock(t *testing.T) {
	redisClient(t) // skips the test when no Redis answers
	u, _ := redisURL()
	co, err := NewCoordinator(u)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	c, err := co.Offset(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("offset %v, rtt %v", c.Offset, c.RTT)
	if c.Offset.Abs() > c.RTT/2+time.Microsecond {
		t.Errorf("offset %v exceeds its own bound rtt/2 = %v", c.Offset, c.RTT/2)
	}
}

func TestBarrierStartsAllTogether(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 4
	starts := make([]Start, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 30 * time.Millisecond) // joins apart
			b := Barrier{RDB: rdb, Key: k, Count: n, Lead: 300 * time.Millisecond}
			starts[i], errs[i] = b.Join(ctx, i+1, Clock{})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v", i+1, errs[i])
		}
		if !starts[i].Local.Equal(starts[0].Local) {
			t.Errorf("shard %d starts at %v, shard 1 at %v", i+1, starts[i], starts[0])
		}
	}
}

// TestBarrierMembers: what each shard says of itself as it joins is there
// for every shard to read once all have joined, and gone with the barrier.
func TestBarrierMembers(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 3
	got := make([]map[int]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := Barrier{RDB: rdb, Key: k, Count: n, Lead: 100 * time.Millisecond, Member: fmt.Sprintf("pid %d", 100+i)}
			if _, errs[i] = b.Join(ctx, i+1, Clock{}); errs[i] == nil {
				got[i], errs[i] = b.Members(ctx)
			}
		}()
	}
	wg.Wait()
	want := map[int]string{1: "pid 100", 2: "pid 101", 3: "pid 102"}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v", i+1, errs[i])
		}
		if fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Errorf("shard %d read the members %v, want %v", i+1, got[i], want)
		}
	}
	if ttl := rdb.TTL(ctx, k+":members").Val(); ttl <= 0 || ttl > DefaultBarrierLead+barrierAfterStart {
		t.Errorf("the members' key lives %v: want it to expire with the barrier", ttl)
	}
}

func TestBarrierWaitsForAll(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	b := Barrier{RDB: rdb, Key: k, Count: 2}
	if _, err := b.Join(ctx, 1, Clock{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("one of two shards went ahead: %v", err)
	}
	// The same shard joining twice is still one shard.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := b.Join(ctx2, 1, Clock{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a shard joining twice completed the barrier: %v", err)
	}
}

func TestBarrierStale(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	ctx := context.Background()
	past := time.Now().Add(-time.Minute).UnixNano()
	rdb.Set(ctx, k+":start", strconv.FormatInt(past, 10), time.Minute)
	b := Barrier{RDB: rdb, Key: k, Count: 1}
	if _, err := b.Join(ctx, 1, Clock{}); !errors.Is(err, ErrStaleBarrier) {
		t.Fatalf("a passed start was taken: %v", err)
	}
}

// TestBarrierConvertsToLocalClock: a shard whose clock is 5 s behind
// Redis's (offset +5 s) starts 5 s earlier by its own clock.
func TestBarrierConvertsToLocalClock(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	ctx := context.Background()
	at := time.Now().Add(10 * time.Second)
	rdb.Set(ctx, k+":start", strconv.FormatInt(at.UnixNano(), 10), time.Minute)
	b := Barrier{RDB: rdb, Key: k, Count: 1}
	got, err := b.Join(ctx, 1, Clock{Offset: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Add(-5 * time.Second); !got.Local.Equal(want) || !got.Redis.Equal(time.Unix(0, at.UnixNano())) {
		t.Errorf("local start %v, want %v", got, want)
	}
}

func TestBarrierIndex(t *testing.T) {
	rdb := redisClient(t)
	k := barrierKey(t, rdb)
	b := Barrier{RDB: rdb, Key: k, Count: 2}
	for want := 1; want <= 2; want++ {
		if got, err := b.Index(context.Background()); err != nil || got != want {
			t.Fatalf("index %d, %v; want %d", got, err, want)
		}
	}
	if _, err := b.Index(context.Background()); err == nil {
		t.Error("a third shard of two got an index")
	}
}

// TestCoordinatorBarrier: the barrier a Coordinator names lives under
// BarrierKey and meets on the coordinator's server.
func TestCoordinatorBarrier(t *testing.T) {
	rdb := redisClient(t)
	if _, err := NewCoordinator("http://127.0.0.1:6379"); err == nil {
		t.Error("a URL that is not redis:// was taken")
	}
	u, _ := redisURL()
	co, err := NewCoordinator(u)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	id := fmt.Sprintf("test-%d", time.Now().UnixNano())
	k := BarrierKey(id)
	t.Cleanup(func() { rdb.Del(context.Background(), k+":joined", k+":start", k+":next", k+":members") })
	b := co.Barrier(id, 1)
	if b.Key != "tare:barrier:"+id || b.Count != 1 {
		t.Fatalf("barrier %q of %d", b.Key, b.Count)
	}
	b.Lead = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if i, err := b.Index(ctx); err != nil || i != 1 {
		t.Fatalf("index %d, %v", i, err)
	}
	if _, err := b.Join(ctx, 1, Clock{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, k+":start").Result(); n != 1 {
		t.Errorf("no start key %s:start", k)
	}
}
