package servermetrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestModelsimQueue: the simulated model, one request generating at a
// time, exports its queue in vLLM's names: with three slow requests sent
// at once, one runs holding KV cache and two wait; once they are done,
// none. A window of readings sums them up.
func TestModelsimQueue(t *testing.T) {
	// Each request takes about 0.6 s of a core: reads 10 ms apart see
	// each state many times.
	sim := testservice.Model(t, modelsim.Config{Parallel: 1, TokenCost: 10 * time.Millisecond, MeanTokens: 60, Seed: 1})
	url, err := Beside(sim.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := s.Window()
	if r, err := w.Depth(ctx); err != nil || r != 0 {
		t.Fatalf("idle: waiting %g, %v; want 0", r, err)
	}

	var sent sync.WaitGroup
	for range 3 {
		sent.Go(func() {
			body := `{"messages":[{"role":"user","content":"why"}],"max_tokens":60,"stream":true}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sim.URL+"/v1/chat/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	for ctx.Err() == nil {
		d, err := w.Depth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != "vllm" || got.Waiting != 2 || got.Running == nil || *got.Running != 1 ||
		got.KVCachePct == nil || *got.KVCachePct <= 0 || got.Preemptions == nil {
		t.Errorf("three requests, one slot: %s; want vllm, 2 waiting, 1 running, some KV cache, preemptions counted", show(got))
	}
	sent.Wait()
	if got, err = s.Read(ctx); err != nil || got.Waiting != 0 || *got.Running != 0 || *got.KVCachePct != 0 {
		t.Errorf("all done: %s, %v; want nothing waiting, running or held", show(got), err)
	}

	sum := w.Summary()
	if sum == nil || sum.Server != "vllm" || sum.Readings < 2 || *sum.Waiting.Max != 2 || sum.Preemptions == nil || *sum.Preemptions != 0 {
		t.Errorf("window summary %+v; want vllm, 2 waiting at most, no preemption", sum)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8000/metrics", "ftp://h/metrics"} {
		if _, err := New(u, nil); err == nil {
			t.Errorf("New(%q) = nil error", u)
		}
	}
}
