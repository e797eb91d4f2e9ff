package modelsim

import "sync/atomic"

// queue is what the server holds, as an inference server's scheduler
// counts it for its metrics: the requests waiting for a generation slot
// (Config.Parallel), and the KV-cache tokens the running ones hold.
type queue struct {
	waiting  atomic.Int64 // requests waiting for a slot
	kvTokens atomic.Int64 // prompt and planned output tokens of the running requests
}

// wait counts a request waiting for a slot until the func it returns is
// called.
func (q *queue) wait() (done func()) {
	q.waiting.Add(1)
	return func() { q.waiting.Add(-1) }
}

// hold counts tokens in the KV cache until the func it returns is called.
// A running request holds its prompt and its whole planned answer from
// the start, as a server that reserves the blocks up front does.
func (q *queue) hold(tokens int) (release func()) {
	q.kvTokens.Add(int64(tokens))
	return func() { q.kvTokens.Add(-int64(tokens)) }
}

// kvCapacity is the simulated KV cache, in tokens: a full context for
// each generation slot (one when Parallel is 0, no cap).
func (s *Server) kvCapacity() int64 {
	return int64(s.cfg.ContextLength) * int64(max(s.cfg.Parallel, 1))
}
