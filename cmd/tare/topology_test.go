package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

func demoSummary(t *testing.T, args ...string) tare.Summary {
	t.Helper()
	code, stdout, stderr := tareCmd(t, append([]string{"demo", "--json", "--quiet", "--no-store", "--tick", "200ms", "--token-cost", "200us", "--mean-tokens", "8"}, args...)...)
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("demo summary: %v\n%s", err, stdout)
	}
	return s
}

func TestDemo(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"memory", nil},
		{"redis", []string{"--queue", redisURL(), "--workers", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "redis" {
				redisClient(t)
			}
			s := demoSummary(t, append([]string{"--jobs", "30", "--rate", "20/s"}, tt.args...)...)
			if s.Requests.Total != 30 || s.Requests.OK != 30 {
				t.Errorf("requests %+v, want 30 ok", s.Requests)
			}
			if s.Queue == nil || s.Queue.Wait.P50 == nil || s.Model == nil || s.Model.OutputTokens == 0 || s.Model.TTFT.P50 == nil {
				t.Fatalf("queue %+v model %+v: want queue wait, TTFT and tokens", s.Queue, s.Model)
			}
			if *s.Model.TTFT.P50 > *s.Latency.P50 {
				t.Errorf("TTFT p50 %.1fms above end-to-end p50 %.1fms", *s.Model.TTFT.P50, *s.Latency.P50)
			}
		})
	}
	// The demo's Redis queue is its own, and gone afterwards.
	keys, err := redisClient(t).Keys(t.Context(), "tare:demo-*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("demo left keys behind: %v %v", keys, err)
	}
}

// TestWorkersKilled: 240 jobs through Redis to 3 tare worker processes, two
// killed with SIGKILL mid-run while they hold jobs: the survivor completes
// every job exactly once, none lost, none counted twice, the redeliveries
// counted.
func TestWorkersKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ~8 s of load through 3 worker processes; skipped with -short")
	}
	rdb := redisClient(t)
	name := fmt.Sprintf("killtest-%d", time.Now().UnixNano())
	t.Cleanup(func() { tareCmd(t, "cleanup", "--redis", redisURL(), "--queue", name, "--wait", "1s") })
	model := testservice.Model(t, modelsim.Config{TokenCost: 2 * time.Millisecond, MeanTokens: 8})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var workers []*exec.Cmd
	for i := range 3 {
		w := exec.CommandContext(ctx, os.Args[0], "worker", "--redis", redisURL(), "--queue", name, "--model", model.URL+"/v1",
			"--concurrency", "2", "--claim-idle", "1s", "--name", fmt.Sprintf("w%d", i))
		w.Env = append(os.Environ(), "TARE_TEST_MAIN=1")
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	// Kill two of the three workers while each holds jobs, a second into
	// the run; w2 survives.
	const victims = 2
	go func() {
		time.Sleep(time.Second)
		for i := 0; i < victims && ctx.Err() == nil; {
			p, err := rdb.XPending(ctx, "tare:"+name+":jobs", "workers").Result()
			if err == nil && p.Consumers[fmt.Sprintf("w%d", i)] > 0 {
				workers[i].Process.Signal(syscall.SIGKILL)
				i++
				continue
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	code, stdout, stderr := tareCmd(t, "run", "--queue", redisURL(), "--queue-name", name, "--rate", "40/s", "--jobs", "240",
		"--max-tokens", "8", "--json", "--quiet", "--no-store", "--tick", "200ms")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Requests.Total != 240 || s.Requests.OK != 240 {
		t.Errorf("requests %+v error kinds %v: want all 240 completed", s.Requests, s.ErrorKinds)
	}
	// Exactly once: one result per job in the results stream.
	entries, err := rdb.XRange(t.Context(), "tare:"+name+":results", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	redelivered := 0
	for _, e := range entries {
		seen[fmt.Sprint(e.Values["id"])]++
		if d := fmt.Sprint(e.Values["deliveries"]); d != "1" && d != "" {
			redelivered++
		}
	}
	twice := 0
	for _, n := range seen {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d results for %d jobs, %d jobs redelivered after the kill", len(entries), len(seen), redelivered)
	if len(seen) != 240 || twice != 0 {
		t.Errorf("%d distinct jobs in results, %d reported more than once; want 240 exactly once", len(seen), twice)
	}
	if redelivered == 0 {
		t.Errorf("no job was redelivered: the killed worker held none, or redeliveries are not counted")
	}
	// The workers registered from this host when the load began are the
	// system under test (at least the first; all three once registered).
	if s.SUT == nil || !strings.Contains(s.SUT.FoundBy, "workers registered on queue") || len(s.SUT.PIDs) < 1 || len(s.SUT.PIDs) > 3 {
		t.Errorf("system under test %+v: want the worker processes, found by their registration", s.SUT)
	}
	// The summary says so too (issue 20, defect 5).
	if q := s.Queue; q == nil || q.Redelivered == nil || *q.Redelivered != redelivered || q.Workers == nil || q.Workers.End < 1 {
		t.Errorf("summary queue %+v: want %d redelivered, as the results stream shows, and the survivor registered at the end", q, redelivered)
	}
	tareCmd(t, "cleanup", "--redis", redisURL(), "--queue", name, "--wait", "5s")
	for _, w := range workers[victims:] {
		if err := w.Wait(); err != nil {
			t.Errorf("worker after cleanup's stop signal: %v", err)
		}
	}
	for _, w := range workers[:victims] {
		if err := w.Wait(); err == nil {
			t.Errorf("a victim exited cleanly: it was not killed")
		}
	}
}

// TestCleanupOnlyItsQueue: tare cleanup deletes its queue's keys and no
// other key in the same database.
func TestCleanupOnlyItsQueue(t *testing.T) {
	rdb := redisClient(t)
	name := fmt.Sprintf("cleantest-%d", time.Now().UnixNano())
	foreign := []string{"user:1", "tare:" + name + "x:jobs", "tare:other:jobs", "tare:" + name, name + ":jobs"}
	for _, k := range foreign {
		rdb.Set(t.Context(), k, "keep", time.Minute)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), foreign...) })
	rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: "tare:" + name + ":jobs", Values: map[string]any{"id": "1"}})

	code, stdout, stderr := tareCmd(t, "cleanup", "--redis", redisURL(), "--queue", name, "--wait", "0s")
	if code != 0 || !strings.Contains(stdout, "tare:"+name+":jobs") {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, k := range foreign {
		if n, _ := rdb.Exists(t.Context(), k).Result(); n != 1 {
			t.Errorf("cleanup deleted the foreign key %q", k)
		}
	}
	if n, _ := rdb.Keys(t.Context(), "tare:"+name+":*").Result(); len(n) != 0 {
		t.Errorf("keys left: %v", n)
	}
}

// redisURL is the test Redis's URL.
func redisURL() string {
	u, _ := testservice.RedisURL()
	return u
}

var redisClient = testservice.Redis
