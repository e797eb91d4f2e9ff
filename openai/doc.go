// Package openai is tare's client for OpenAI-compatible chat completion
// endpoints (OpenAI, vLLM, llama.cpp, Ollama, tare's own simulator): a
// tare.Target that streams one completion per request and measures it the
// way vLLM's benchmark does.
//
// The figures, for one streamed completion of n output tokens:
//
//	Sent ──TTFT──▶ first content ──ITL──▶ chunk ──ITL──▶ … ──▶ [DONE] = Done
//	 └──────────────────────────── e2e ────────────────────────────────┘
//
//	TTFT = first content chunk − Sent (a role-only first chunk does not count)
//	TPOT = (e2e − TTFT) / (n − 1), the first token excluded
//	ITL  = the gaps between successive content chunks
//
// n is the server's usage.completion_tokens when it reports one (the client
// asks for it with stream_options.include_usage), otherwise the number of
// content chunks; Response.TokenSource says which ("usage" or "counted").
// Reasoning models' reasoning_content chunks count as content: they are
// generated tokens the user waits for.
//
// A failed request is a measurement: Response.Err holds its kind — "timeout",
// "canceled", "refused", "reset", "eof", "dns", "tls", "connect", "io",
// "http 429", "http 503" (any status outside 2xx), "stream error" (an error
// object inside the stream), "stream cut" (the stream ended before [DONE]),
// "bad response" — and Response.Detail says more in words.
//
// The API key goes in an "Authorization: Bearer" header and nowhere else:
// Client's String and Format, and every Detail, leave it out.
package openai
