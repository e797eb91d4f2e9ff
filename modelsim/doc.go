// Package modelsim is a simulated OpenAI-compatible model endpoint whose
// token generation costs real CPU.
//
// It serves POST /v1/chat/completions (streaming or not), GET /v1/models and
// GET /health. Each request first pays a prefill cost per prompt token, then
// a decode cost per generated token, and streams one chunk per token:
//
//	request ──▶ role chunk ──▶ prefill: PromptCost × prompt tokens
//	        ──▶ token 1: TokenCost ──▶ chunk ──▶ … ──▶ token n ──▶ chunk
//	        ──▶ finish chunk ──▶ usage chunk (if asked) ──▶ [DONE]
//
// The cost is work, not sleep. New calibrates once per process how many
// iterations of a cheap hash loop one millisecond of an idle core runs (the
// fastest of a few short trials, since interference only ever slows a trial
// down), and a request then burns that many iterations per millisecond of
// cost. Under hypervisor steal, cgroup throttling or contention from other
// processes the same iterations take longer on the wall clock, so the
// endpoint's latency rises exactly as a small CPU-bound inference server's
// would. That is the point: it lets tare show interference in a model's TTFT
// and TPOT without a GPU or a real model.
//
// Concurrent requests burn concurrently and compete for the machine's cores
// like the threads of a real server; Config.Parallel caps how many generate
// at once (like llama.cpp's slots), the others wait for a slot.
//
// Approximations: a prompt token is one whitespace-separated word of the
// messages' text (real BPE tokenizers give about 1.3 tokens per English
// word; only the cost per token matters here), and a generated token is one
// short English word. The number of output tokens is a seeded lognormal draw
// around Config.MeanTokens, capped by the request's max_tokens and by the
// context length (Config.ContextLength, messages and completion together).
//
// A request the server refuses is answered as the OpenAI API answers one, so
// a client written against OpenAI reads it unchanged: status 400 and an error
// object naming the parameter at fault and the type it wanted,
//
//	{"error": {"message": "Invalid type for 'messages': expected an array of objects, but got a string instead.",
//	           "type": "invalid_request_error", "param": "messages", "code": "invalid_type"}}
//
// and a max_tokens beyond the context length is refused naming the limit.
// Every response carries an x-request-id header.
package modelsim
