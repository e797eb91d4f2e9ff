package servermetrics

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse's errors: text that is not the Prometheus text format, and
// metrics that hold none of the series of a server it knows.
var (
	ErrFormat  = errors.New("not the Prometheus text format")
	ErrUnknown = errors.New("no series of a known model server")
)

// Reading is one read of a server's metrics. A figure the server does
// not export is nil, never 0.
type Reading struct {
	Server  string  // whose names matched: a Names.Server
	Waiting float64 // requests waiting to be scheduled: the server's queue
	Running *float64
	// KVCachePct is the share of the KV cache in use, 0–100 (servers
	// export a ratio from 0 to 1; it is scaled here).
	KVCachePct *float64
	// Preemptions counts the requests the server preempted (evicted from
	// the KV cache to run later) since it started.
	Preemptions *float64
}

// Names are one server's series for each figure, the first present read.
type Names struct {
	Server      string
	Waiting     []string
	Running     []string
	KVCache     []string // a ratio from 0 to 1
	Preemptions []string
}

// Servers are the servers whose metrics Parse reads, in the order it
// tries them. vLLM's KV cache was gpu_cache_usage_perc before v0.10
// (both ratios, despite the name); its preemption counter is exported
// as …_total by the Python client.
var Servers = []Names{
	{Server: "vllm",
		Waiting:     []string{"vllm:num_requests_waiting"},
		Running:     []string{"vllm:num_requests_running"},
		KVCache:     []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		Preemptions: []string{"vllm:num_preemptions_total", "vllm:num_preemptions"}},
	{Server: "sglang",
		Waiting: []string{"sglang:num_queue_reqs"},
		Running: []string{"sglang:num_running_reqs"},
		KVCache: []string{"sglang:token_usage"}},
	{Server: "tgi",
		Waiting: []string{"tgi_queue_size"},
		Running: []string{"tgi_batch_current_size"}},
	{Server: "llama.cpp",
		Waiting: []string{"llamacpp:requests_deferred"},
		Running: []string{"llamacpp:requests_processing"},
		KVCache: []string{"llamacpp:kv_cache_usage_ratio"}},
}

// Parse reads metrics in the Prometheus text format. A figure with several
// series (one per engine or rank) is their sum, the KV cache share their
// mean. Metrics without any known server's waiting requests wrap
// ErrUnknown.
func Parse(r io.Reader) (Reading, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Reading{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	for _, n := range Servers {
		waiting := read(families, n.Waiting, sum)
		if waiting == nil {
			continue
		}
		rd := Reading{Server: n.Server, Waiting: *waiting,
			Running: read(families, n.Running, sum), Preemptions: read(families, n.Preemptions, sum)}
		if kv := read(families, n.KVCache, mean); kv != nil {
			rd.KVCachePct = ptr(math.Round(10000**kv) / 100) // percent, to 0.01
		}
		return rd, nil
	}
	var wanted []string
	for _, n := range Servers {
		wanted = append(wanted, n.Waiting...)
	}
	return Reading{}, fmt.Errorf("%w (looked for %s)", ErrUnknown, strings.Join(wanted, ", "))
}

// read is the first of names present, its series combined by how; nil
// when none is.
func read(families map[string]*dto.MetricFamily, names []string, how func([]float64) float64) *float64 {
	for _, name := range names {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			continue
		}
		var vs []float64
		for _, m := range f.GetMetric() {
			switch {
			case m.Gauge != nil:
				vs = append(vs, m.GetGauge().GetValue())
			case m.Counter != nil:
				vs = append(vs, m.GetCounter().GetValue())
			case m.Untyped != nil:
				vs = append(vs, m.GetUntyped().GetValue())
			}
		}
		if len(vs) > 0 {
			return ptr(how(vs))
		}
	}
	return nil
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

func mean(vs []float64) float64 { return sum(vs) / float64(len(vs)) }

func ptr(v float64) *float64 { return &v }
