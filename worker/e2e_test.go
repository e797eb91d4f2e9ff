package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
)

// steady is a constant-rate schedule of n arrivals.
type steady struct {
	n, i int
	gap  time.Duration
}

func (s *steady) Next() (time.Duration, bool) {
	if s.i >= s.n {
		return 0, false
	}
	s.i++
	return time.Duration(s.i-1) * s.gap, true
}

func TestEndToEnd(t *testing.T) {
	// The reference topology on loopback: the open-loop engine enqueues 50
	// jobs at 25/s, two workers call the simulated model over HTTP, the
	// target matches every result, and depth is sampled as the CLI does.
	// A job takes about 60 ms of the model and each worker runs one at a
	// time, so one worker alone cannot keep up with the 40 ms gaps: both
	// must take jobs, whichever reaches the queue first.
	forEachBroker(t, func(t *testing.T, b queue.Broker) {
		const jobs = 50
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		sim := testservice.Model(t, modelsim.Config{TokenCost: 5 * time.Millisecond, MeanTokens: 12, TokenSpread: 0.3, Seed: 3})
		model := openaiModel(t, sim.URL)
		tg := newTarget(t, b, queue.TargetConfig{MaxTokens: 16, Timeout: 20 * time.Second})
		for _, name := range []string{"w1", "w2"} {
			cfg := fast(name)
			cfg.Concurrency = 1
			start(t, b, model, cfg)
		}

		sampled := make(chan []queue.Depth, 1)
		sampleCtx, stopSampling := context.WithCancel(ctx)
		go func() {
			var ds []queue.Depth
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sampleCtx.Done():
					sampled <- ds
					return
				case <-tick.C:
					if d, err := tg.Depth(ctx); err == nil {
						ds = append(ds, d)
					}
				}
			}
		}()

		out := make(chan *load.Batch, jobs)
		go load.New(tg, load.Config{}).Run(ctx, time.Now(), &steady{n: jobs, gap: 40 * time.Millisecond}, out)
		var results []tare.Result
		for r := range load.All(out) {
			results = append(results, r)
		}
		stopSampling()
		depths := <-sampled

		if len(results) != jobs {
			t.Fatalf("%d results, want %d", len(results), jobs)
		}
		slices.SortFunc(results, func(a, b tare.Result) int { return int(a.Seq) - int(b.Seq) })
		workers := map[string]int{}
		for i, r := range results {
			if r.Seq != uint64(i) {
				t.Fatalf("result %d has seq %d: a job reported twice or missing", i, r.Seq)
			}
			workers[r.Worker]++
			switch {
			case !r.OK():
				t.Errorf("job %d failed: %q", r.Seq, r.Err)
			case r.QueueWait() < 0:
				t.Errorf("job %d: queue wait %v, want 0 or more", r.Seq, r.QueueWait())
			case r.Started.Before(r.Sent.Round(0)) || r.Started.After(r.Done):
				t.Errorf("job %d: started %v, want between sent %v and done %v", r.Seq, r.Started, r.Sent, r.Done)
			case r.FirstByte.Before(r.Started) || r.FirstByte.After(r.Done):
				t.Errorf("job %d: first token %v, want between started %v and done %v", r.Seq, r.FirstByte, r.Started, r.Done)
			case r.OutputTokens < 1 || r.OutputTokens > 16 || r.TokenSource != queue.TokensUsage:
				t.Errorf("job %d: %d output tokens (%s), want 1 to 16 from usage", r.Seq, r.OutputTokens, r.TokenSource)
			case r.Deliveries != 1:
				t.Errorf("job %d delivered %d times, want once", r.Seq, r.Deliveries)
			}
		}
		if len(workers) != 2 {
			t.Errorf("jobs by worker: %v, want both workers busy", workers)
		}
		if st := tg.Stats(); st.Matched != jobs || st.Duplicates+st.Late+st.Skewed != 0 {
			t.Errorf("target stats %+v, want %d matched and nothing else", st, jobs)
		}
		if len(depths) == 0 {
			t.Error("no depth sample succeeded during the run")
		}
		for _, d := range depths {
			if d.Waiting < 0 || d.Pending < 0 || d.Pending > 2 || d.OldestPending < 0 {
				t.Errorf("depth sample %+v: want non-negative figures and at most 2 pending (two workers of 1)", d)
			}
		}
		if d, err := tg.Depth(ctx); err != nil || d != (queue.Depth{}) {
			t.Errorf("depth after the run = %+v, %v; want zero", d, err)
		}
	})
}
