// Package queueurl opens the queue a --queue URL names, by its scheme, as
// database URLs choose their driver: tare's own job protocol (package
// queue) for redis://, or the adapter of the job framework it names
// (packages celery, rq and bullmq beside it). It is the one place that
// knows every adapter; they know only package queue.
package queueurl

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/bullmq"
	"github.com/tare-dev/tare/queue/celery"
	"github.com/tare-dev/tare/queue/rq"
)

// Open opens the queue rawURL names, by its scheme (queue.ProtocolOf):
// tare's own protocol on queue name for redis://, a Celery, RQ or BullMQ
// queue, named in the URL, for the others, whose jobs carry fw's
// arguments. Close closes it. A bad URL is a *tare.Error with code
// EINVALID; a server that does not answer, one with code EUNAVAILABLE.
func Open(ctx context.Context, rawURL, name string, fw queue.FrameworkConfig) (queue.Source, error) {
	switch queue.ProtocolOf(rawURL) {
	case queue.ProtocolCelery:
		return celery.Open(ctx, rawURL, fw)
	case queue.ProtocolRQ:
		return rq.Open(ctx, rawURL, fw)
	case queue.ProtocolBullMQ:
		return bullmq.Open(ctx, rawURL, fw)
	}
	return queue.OpenRedis(ctx, rawURL, name)
}

// Probe opens the queue rawURL names (as Open) and waits up to wait for a
// worker, for a pre-flight check (queue.Probe): a line naming the queue
// and its workers, or an error saying what is wrong (a bad URL is
// EINVALID) or how to start a worker. locate, when not nil, finds on this
// host the workers that register no pid.
func Probe(ctx context.Context, rawURL, name string, wait time.Duration, locate func([]queue.WorkerInfo)) (string, error) {
	src, err := Open(ctx, rawURL, name, queue.FrameworkConfig{})
	if err != nil {
		return "", err
	}
	defer src.Close()
	return queue.Probe(ctx, src, rawURL, wait, locate)
}

// Cleanup removes, from the Celery, RQ or BullMQ queue rawURL names, what
// tare's runs put there (jobs whose id starts "tare-", their results and
// registry entries, tare's own keys beside the queue, and the queue's
// registration when tare created it) and nothing else, and returns what it
// removed, sorted: key names, and "LIST entry …" for entries taken out of
// lists and sets. On an AMQP broker it removes no message: tare's expire
// by themselves (see celery.Source). It never stops the workers: they are
// the user's. tare's own protocol has queue.Cleanup.
func Cleanup(ctx context.Context, rawURL string) ([]string, error) {
	switch queue.ProtocolOf(rawURL) {
	case queue.ProtocolCelery:
		return celery.Cleanup(ctx, rawURL)
	case queue.ProtocolRQ:
		return rq.Cleanup(ctx, rawURL)
	case queue.ProtocolBullMQ:
		return bullmq.Cleanup(ctx, rawURL)
	}
	return nil, tare.Errorf(tare.EINVALID, "queue URL %q: not a Celery, RQ or BullMQ queue; want %s", queue.RedactURL(rawURL), queue.URLForms)
}
