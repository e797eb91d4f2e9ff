// Package queue is tare's job queue: the Broker between the load generator
// and the agent workers, its two implementations, and the generator's side
// of it, a tare.Target.
//
//	Target.Do ──Enqueue──▶ jobs ──Fetch/Claim──▶ worker ──Complete──▶ results ──▶ Target reader ──▶ Do returns
//	 (res.Sent = enqueue)   │                     start … done          │
//	                        └── Depth: waiting (lag), pending, oldest ──┘
//
// A Broker has the semantics of a Redis Streams consumer group: a job is
// delivered to one worker and stays pending until that worker completes it;
// a job left pending by a worker that died (its idle time passes a limit)
// is claimed by another, and every claim counts a delivery. Completing
// publishes the result and acknowledges the job in one step, so a job is
// either pending or has a result, never neither.
//
// Redis implements it on a real server (keys under "tare:<queue>:", the
// protocol a worker in any language follows is docs/job-protocol.md);
// Memory implements it in-process for `tare demo`. The same test suite runs
// against both.
//
// A Target loads any Source: a Broker, with tare's own protocol, or the
// queue of a job framework users already run, whose workers it loads
// unchanged, each in a package of its own below this one: celery (task
// messages, protocol 2, JSON, on Redis or on RabbitMQ through package
// rabbitmq, read back from the Redis result backend or rpc:// replies), rq
// (jobs, JSON serializer, read back from their hashes) and bullmq (BullMQ 5
// jobs as Queue.add writes them, followed through the queue's events
// stream and their hashes). What they share lives here, a file a concern:
// the URLs and their protocols (frameworkurl.go), the jobs' arguments
// (jobargs.go), the jobs waiting for their final state (pending.go), the
// epoch that tells a lost queue state (epoch.go), cleanup's key removal
// (cleanup.go), the pre-flight probe (probe.go) and the failure kinds
// (framework.go). The adapters import this package and never each other;
// package queueurl opens one by the URL's scheme (redis://,
// celery+redis://, celery+amqp://, rq+redis://, bullmq+redis://), and
// docs/celery.md, docs/rq.md and docs/bullmq.md give what each writes and
// reads.
//
// The package and those below it are tare's one owner of Redis, so two
// more uses of the server live here: beside each queue, the worker hosts' interference samples
// (Hosts: workers publish, the generator reads them back to judge each
// host), and, under "tare:barrier:<id>:", the barrier at which the shards
// of a run meet and the clock each measures its own against (Coordinator,
// Barrier, Clock; barrier.go explains the algorithm).
//
// The figures, for one job (tare.Result's clocks):
//
//	queue wait = Started − Sent   (worker start − enqueue)
//	service    = Done − Started   (worker done − worker start)
//	end-to-end = Done − Scheduled
//
// Sent is the generator's clock; Started, FirstByte and Done are the
// worker's. They agree on one machine; across machines the clocks must be
// synchronised, and Target.Stats counts results that show they are not.
//
// Delivery is at least once, reporting exactly once: a job whose worker
// died is claimed and its model called again, but completing publishes a
// job's result only if it acknowledges the job, so a worker that was frozen
// rather than dead publishes nothing; and the Target reports each job once,
// counting any second result (a job enqueued twice by a retried XADD) as a
// duplicate.
package queue
