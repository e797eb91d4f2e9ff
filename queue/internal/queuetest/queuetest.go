// Package queuetest is the test kit of the queue packages: a test's
// context and queue name, and the load driven through a Target and
// counted by outcome.
package queuetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/load"
)

// Context is cancelled when the test ends, and in any case after 20 s,
// so a broken test cannot hang.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// QueueName returns a queue name no other test uses.
func QueueName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

// DoAll runs n Do calls at once and returns their results by Seq.
func DoAll(ctx context.Context, tg tare.Target, n int) []tare.Result {
	out := make([]tare.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := tare.Result{Seq: uint64(i), Scheduled: time.Now(), Sent: time.Now()}
			tg.Do(ctx, &res)
			out[i] = res
		}()
	}
	wg.Wait()
	return out
}

// Eventually polls ok until it holds, failing t after within.
func Eventually(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Drive sends jobs at rate through the load engine, open loop, calling
// during(elapsed) every 100 ms meanwhile, and returns every result by
// job number.
func Drive(t *testing.T, tg tare.Target, jobs int, rate float64, during func(time.Duration)) []tare.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := make(chan *load.Batch, jobs) // closed by Run
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		load.New(tg, load.Config{Drain: time.Minute}).Run(ctx, start, arrival.Bound(arrival.NewConstant(rate), jobs, 0), out)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
			if during != nil {
				during(time.Since(start))
			}
		}
	}
	results := make([]tare.Result, jobs)
	seen := make([]bool, jobs)
	for b := range out {
		for _, r := range b.Results {
			if r.Seq >= uint64(jobs) || seen[r.Seq] {
				t.Fatalf("result for job %d: out of range or reported twice", r.Seq)
			}
			seen[r.Seq], results[r.Seq] = true, r
		}
	}
	for seq, ok := range seen {
		if !ok {
			t.Errorf("job %d has no result: lost", seq)
		}
	}
	return results
}

// ServedAfter checks that every job sent after a worker was restarted
// (the one before it killed) was served: those reach no worker but the
// new one.
func ServedAfter(t *testing.T, results []tare.Result, restartedAt time.Time) {
	t.Helper()
	after, missed := 0, map[int]string{}
	for seq, r := range results {
		if r.Sent.After(restartedAt) {
			after++
			if r.Err != "" {
				missed[seq] = r.Err
			}
		}
	}
	if after == 0 || len(missed) > 0 {
		t.Errorf("of the %d jobs sent after the restart, %d failed (%v): want the restarted worker to serve every one", after, len(missed), missed)
	}
}

// Kinds counts results by error kind ("" for ok).
func Kinds(results []tare.Result) map[string]int {
	out := map[string]int{}
	for _, r := range results {
		out[r.Err]++
	}
	return out
}
