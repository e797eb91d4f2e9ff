package session

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestModelServerQueue: a run against a model server that exports its
// metrics reads them beside the endpoint without being told: the
// server's waiting requests are each tick's queue depth and the summary
// has what the server said; --model-metrics none reads none; a URL given
// that answers in no known format is a usage error (exit 2). And without
// --model-name, the one model the server lists is used, and said.
func TestModelServerQueue(t *testing.T) {
	// One request generates at a time: 200/s of 20-token answers queue.
	sim := testservice.Model(t, modelsim.Config{Parallel: 1, TokenCost: time.Millisecond, MeanTokens: 20, Seed: 1})
	prepare := func(metrics string) (*Prepared, error) {
		spec := NewSpec(200, 40, 0)
		spec.Load.Arrival = "constant"
		spec.Host.Tick = 100 * time.Millisecond
		spec.Judge.Thresholds = deafToTheHost()
		spec.Target.Model, spec.Target.ModelMetrics, spec.Target.MaxTokens = sim.URL+"/v1", metrics, 20
		return Prepare(t.Context(), spec, "tare run")
	}
	measure := func(p *Prepared) (tare.Summary, []tare.Tick) {
		t.Helper()
		defer p.Release()
		cfg, err := p.Window(nil, tare.Run{Label: "server queue"}, 0, "test")
		if err != nil {
			t.Fatal(err)
		}
		s, ticks, _, err := Measure(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s, ticks
	}

	t.Run("beside the endpoint", func(t *testing.T) {
		p, err := prepare("")
		if err != nil {
			t.Fatal(err)
		}
		s, ticks := measure(p)
		sv := s.Model.Server
		if sv == nil || sv.Server != "vllm" || sv.MetricsURL != sim.URL+"/metrics" || sv.Readings == 0 || sv.Waiting.Max == nil || *sv.Waiting.Max < 2 {
			t.Fatalf("model.server %+v; want vllm's metrics read at %s/metrics, requests seen waiting", sv, sim.URL)
		}
		if s.Queue != nil {
			t.Errorf("queue figures %+v for a model target: its server's queue is in model.server", s.Queue)
		}
		if !slices.ContainsFunc(ticks, func(t tare.Tick) bool { return t.QueueDepth != nil && *t.QueueDepth >= 1 }) {
			t.Errorf("no tick has the server's waiting requests as its queue depth")
		}
		if s.Requests.OK != 40 || !strings.Contains(strings.Join(s.Verdict.Warnings, "\n"), "the server lists one, tare-sim") {
			t.Errorf("requests %+v, warnings %q; want 40 ok and the model chosen said", s.Requests, s.Verdict.Warnings)
		}
	})
	t.Run("none", func(t *testing.T) {
		p, err := prepare(NoModelMetrics)
		if err != nil {
			t.Fatal(err)
		}
		s, ticks := measure(p)
		if s.Model.Server != nil || slices.ContainsFunc(ticks, func(t tare.Tick) bool { return t.QueueDepth != nil }) {
			t.Errorf("model.server %+v with --model-metrics none; want none read", s.Model.Server)
		}
	})
	t.Run("unknown format", func(t *testing.T) {
		_, err := prepare(sim.URL + "/v1/models")
		if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), "model-metrics") || !strings.Contains(err.Error(), "no format tare knows") {
			t.Errorf("Prepare = %v, want an EINVALID error naming --model-metrics", err)
		}
	})
}
