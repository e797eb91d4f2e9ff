// Package servermetrics reads a model server's own figures from its
// Prometheus /metrics while a run loads it: the requests it keeps waiting
// (its queue, the model endpoint's queue depth), those running, the share
// of its KV cache in use and its preemptions, under the names vLLM,
// SGLang, Text Generation Inference and llama.cpp's server give them
// (Servers). It is the one owner of the Prometheus text parser
// (prometheus/common/expfmt); Parse is pure, the Scraper does the HTTP.
package servermetrics
