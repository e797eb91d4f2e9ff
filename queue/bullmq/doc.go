// Package bullmq loads the workers of a BullMQ 5 queue unchanged: a
// queue.Source that adds jobs as Queue.add writes them and follows each
// through the queue's events stream and its hash (docs/bullmq.md). It
// shares the framework adapters' parts with package queue, and knows no
// other adapter.
package bullmq
