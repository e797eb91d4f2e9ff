package session

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/loopback"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/worker"
)

// answering is a loopback server that answers 503 to fail of every 5
// requests (in turn) and 200 to the rest.
func answering(t *testing.T, fail int) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(n.Add(1)%5) < fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// measureSpec runs 40 arrivals at 200/s of spec, as tare run does.
func measureSpec(t *testing.T, spec *Spec) tare.Summary {
	t.Helper()
	spec.Load.Rate, spec.Load.Jobs, spec.Load.Arrival = 200, 40, "constant"
	spec.Host.Tick = 100 * time.Millisecond
	spec.Judge.Thresholds = deafToTheHost()
	p, err := Prepare(t.Context(), spec, "tare run")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	cfg, err := p.Window(nil, tare.Run{Label: "failures"}, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	s, _, _, err := Measure(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deafToTheHost are thresholds no host signal reaches: the machine is
// shared with other builds, and what these tests judge is the failures.
func deafToTheHost() judge.Thresholds {
	th := judge.DefaultThresholds()
	th.Steal, th.StealTicks, th.ThrottledTicks, th.Neighbours, th.NeighbourTicks, th.RunDelay = 100, 100, 100, 100, 100, 100
	th.LatencyFactor, th.LatencyTicks, th.LatencyShare = 1e9, 1e9, 100
	th.SendLagP99 = time.Hour
	return th
}

// TestFailedRunsSaySo: runs whose requests fail, against real loopback
// targets (nothing listening, 503 to everything, 503 to 60 %), say so
// first in the verdict, and a run in which nothing succeeded is suspect,
// never polluted; a healthy run is untouched.
func TestFailedRunsSaySo(t *testing.T) {
	// It judges levels on this host: another package's test pinning CPU
	// hogs beside it (schedprobe's) outweighs even deaf thresholds (its
	// threads waited 150 % of a CPU behind them once).
	interfere.Exclusive(t)
	refused := "http://" + loopback.FreeAddr(t) + "/"
	tests := []struct {
		name    string
		url     string
		fired   bool
		finding bool
		want    tare.Level
		detail  string
	}{
		{"nothing listens", refused, true, false, tare.Suspect,
			"no request succeeded: 40 of 40 failed (40 refused): the target (GET " + refused + ") never answered; these figures describe no service"},
		{"503 to everything", answering(t, 5), true, false, tare.Suspect,
			"answered every request with an error status; these figures describe no service"},
		{"503 to 60%", answering(t, 3), true, true, tare.Clean,
			"24 of 40 requests failed (24 http 503), more than 50%: latency figures are mostly of failures"},
		{"healthy", answering(t, 0), false, false, tare.Clean, "all 40 requests succeeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := NewSpec(0, 0, 0)
			spec.Target.URL = tt.url
			s := measureSpec(t, spec)
			v := s.Verdict
			sig := v.Signals[0]
			t.Logf("%s: %s", v.Level, sig.Detail)
			if sig.Name != judge.SignalFailures || sig.Fired != tt.fired || sig.Finding != tt.finding || !strings.Contains(sig.Detail, tt.detail) {
				t.Errorf("first signal %+v; want failures, fired %v, finding %v, saying %q", sig, tt.fired, tt.finding, tt.detail)
			}
			if v.Level != tt.want {
				t.Errorf("level %s, want %s; fired %+v", v.Level, tt.want, judge.Fired(v))
			}
			var text strings.Builder
			if err := report.Verdict(&text, v); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(text.String(), "\n")
			if tt.fired && (len(lines) < 2 || !strings.Contains(lines[1], tt.detail)) {
				t.Errorf("verdict block:\n%s\nwant the failures on its second line", text.String())
			}
			if !tt.fired && strings.Contains(text.String(), "failures:") {
				t.Errorf("verdict block:\n%s\nwant no failures line", text.String())
			}
		})
	}
}

// TestFailedModelAndQueueRunsSaySo: a model endpoint nothing listens on,
// and a queue whose worker's model endpoint nothing listens on, are judged
// as an HTTP target is.
func TestFailedModelAndQueueRunsSaySo(t *testing.T) {
	// It judges levels on this host, as TestFailedRunsSaySo does: a
	// fresh-machine run saw another package's pinned hogs beside it.
	interfere.Exclusive(t)
	model := "http://" + loopback.FreeAddr(t) + "/v1"
	t.Run("model", func(t *testing.T) {
		spec := NewSpec(0, 0, 0)
		spec.Target.Model = model
		s := measureSpec(t, spec)
		checkNothingSucceeded(t, s, "(40 refused): the target ("+model)
	})
	t.Run("queue", func(t *testing.T) {
		client, err := openai.New(openai.Config{URL: model, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		b := queue.NewMemory(queue.MemoryConfig{Queue: "failures"})
		p, err := QueueTarget(b, queue.TargetConfig{MaxTokens: 4, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		w := worker.New(b, refusedModel(client), worker.Config{Name: "failures-worker", Concurrency: 4, ClaimIdle: 10 * time.Second})
		go func() {
			defer close(done)
			w.Run(ctx)
		}()
		defer func() { stop(); <-done }()

		cfg := window(p.Target, 200, 40)
		cfg.Run.Target, cfg.Depth, cfg.Thresholds = p.Name, p.Depth(), deafToTheHost()
		s, _, _, err := Measure(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkNothingSucceeded(t, s, "(40 refused): the workers behind the target ("+p.Name+") succeeded at no job")
	})
}

func checkNothingSucceeded(t *testing.T, s tare.Summary, words string) {
	t.Helper()
	v := s.Verdict
	sig := v.Signals[0]
	t.Logf("%s: %s", v.Level, sig.Detail)
	want := fmt.Sprintf("no request succeeded: %d of %d failed ", s.Requests.Errors, s.Requests.Total)
	if s.Requests.OK != 0 || sig.Name != judge.SignalFailures || !sig.Fired || sig.Finding ||
		!strings.HasPrefix(sig.Detail, want) || !strings.Contains(sig.Detail, words) {
		t.Errorf("requests %+v, first signal %+v; want failures fired, %q…%q", s.Requests, sig, want, words)
	}
	if v.Level != tare.Suspect {
		t.Errorf("level %s, want suspect; fired %+v", v.Level, judge.Fired(v))
	}
}

// refusedModel is the worker's model: the client's call, its failure
// reported as the job's.
func refusedModel(c *openai.Client) worker.Model {
	return worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
		r := c.Call(ctx, openai.Request{Prompt: prompt, MaxTokens: maxTokens})
		return worker.Completion{FirstToken: r.FirstToken, OutputTokens: r.OutputTokens, TokenSource: r.TokenSource, Err: r.Err}, nil
	})
}
