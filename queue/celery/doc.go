// Package celery loads the workers of a Celery queue unchanged: a
// queue.Source that publishes Celery task messages (protocol 2, JSON) onto
// a Redis broker or, through package rabbitmq, an AMQP one, and reads each
// task's state back from the Redis result backend or rpc:// replies
// (docs/celery.md). It shares the framework adapters' parts (URLs, job
// arguments, pending jobs, epochs, cleanup) with package queue, and knows
// no other adapter.
package celery
