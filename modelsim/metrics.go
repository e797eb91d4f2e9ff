package modelsim

import (
	"fmt"
	"net/http"
	"strings"
)

// handleMetrics exports the server's queue in the Prometheus text format
// under vLLM's names, so tare's --model-metrics reads the simulator as it
// reads vLLM: requests waiting and running, the share of the KV cache in
// use (a ratio from 0 to 1, as vLLM's "perc" is) and preemptions (never,
// here). Every series carries the model's name, as vLLM's do.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	kv := float64(s.q.kvTokens.Load()) / float64(s.kvCapacity())
	var b strings.Builder
	series := func(name, typ, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%s\"} %g\n",
			name, help, name, typ, name, labelEscaper.Replace(s.cfg.Model), v)
	}
	series("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", float64(s.active.Load()))
	series("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", float64(s.q.waiting.Load()))
	series("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", min(kv, 1))
	series("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", 0)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// labelEscaper escapes a label value of the text format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
