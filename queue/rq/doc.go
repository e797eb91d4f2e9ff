// Package rq loads the workers of an RQ queue unchanged: a queue.Source
// that enqueues RQ jobs (JSON serializer) in Redis and reads each job's
// status and stamps back from its hash (docs/rq.md). It shares the
// framework adapters' parts with package queue, and knows no other
// adapter.
package rq
