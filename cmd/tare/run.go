package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/session"
)

const runExample = `  # 1,000 Poisson arrivals at 200/s against a local service
  tare run --url http://127.0.0.1:8080/ --rate 200/s --jobs 1000

  # ten minutes at a constant 50/s, with a header and a JSON body from a file
  tare run --url https://api.example.test/orders -X POST -H 'Content-Type: application/json' \
      --body @order.json --rate 50/s --arrival constant --duration 10m

  # HTTP/2 over TLS (ALPN), to a service behind a private CA that asks for a client certificate
  tare run --url https://127.0.0.1:8443/ --http2 --cacert ca.pem --cert client.pem --key client.key \
      --servername api.internal --rate 500/s --duration 1m

  # a model endpoint: TTFT, TPOT and goodput against a per-request SLO
  tare run --model http://127.0.0.1:8089/v1 --rate 2/s --jobs 100 --max-tokens 64 --slo 'ttft<=500ms,e2e<=5s'

  # the reference topology: jobs into a Redis queue, served by agent workers
  tare worker --queue redis://127.0.0.1:6379/0 --model http://127.0.0.1:8089/v1 &
  tare run --queue redis://127.0.0.1:6379/0 --rate 2/s --jobs 500

  # the Celery or RQ worker you already run, unchanged (docs/celery.md, docs/rq.md)
  tare run --queue 'celery+redis://127.0.0.1:6379/0?queue=celery&task=tasks.answer' \
      --job-args '["{{prompt}}"]' --job-kwargs '{"n": "{{seq}}"}' --rate 5/s --jobs 200
  tare run --queue 'rq+redis://127.0.0.1:6379/0?queue=default&func=tasks.answer' --job-args '["{{seq}}"]'

  # Celery on RabbitMQ, its task states read from the Redis result backend
  tare run --queue 'celery+amqp://guest:guest@127.0.0.1:5672/?queue=celery&task=tasks.answer&backend=redis://127.0.0.1:6379/0' \
      --job-args '["{{seq}}"]' --rate 20/s --jobs 200

  # the BullMQ worker you already run, unchanged (docs/bullmq.md)
  tare run --queue 'bullmq+redis://127.0.0.1:6379/0?queue=agents&name=answer' \
      --job-args '{"prompt": "{{prompt}}", "n": "{{seq}}"}' --rate 5/s --jobs 200

  # an app server on a Unix socket, as curl --unix-socket (Host: localhost);
  # its listeners (gunicorn's master and workers) are the system under test
  tare run --unix-socket /run/gunicorn.sock --url http://localhost/health --rate 100/s --jobs 1000

  # at most 2 connections, the one idle last first; the rest wait for one
  tare run --url http://127.0.0.1:8080/ --connections 2 --rate 500/s --duration 30s

  # a service in a container on this host, its port published on loopback
  tare run --url http://127.0.0.1:8080/ --container shop-api --rate 50/s --duration 1m

  # fail the CI job when the host was polluted or p95 went over 300ms
  tare run --url http://127.0.0.1:8080/ --rate 100/s --duration 2m --slo 'p95<=300ms' --fail-on polluted`

type runFlags struct {
	window  windowFlags
	store   storeFlags
	shard   session.ShardSpec
	metrics metricsFlags
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run (--url URL | --model URL | --queue URL) [flags]",
		Short: "Send one window of open-loop load to a target and judge it",
		Long: `Send one window of open-loop load to a target, sample the host's interference
during the very same seconds, and print the summary and verdict.

Arrivals fire at their scheduled times whatever is still outstanding: latency
is measured from the scheduled time, so a stalled target cannot hide its
queue (no coordinated omission). Service time (from the actual send; for a
queue job, from the worker's start, the worker's own time) is shown beside it:
the difference is what a closed-loop tool would have hidden.

Every tick tare splits the host's CPU by owner (whose cpu): the system under
test (the processes listening on a loopback target's port or on its
--unix-socket, or --pid, --cgroup, --container), tare, each other process
by name (a container's processes as
one, named by the container: docker, podman, containerd, CRI-O), the kernel,
unattributed time, steal and idle. A service that uses up its own CPUs is saturated: a finding about the
code, reported beside a clean verdict. Steal, throttling, and other processes
holding the CPU while the service waited are interference: polluted, and
the neighbour is named. docs/verdict.md has every rule.

--queue takes a queue's URL (a Redis, or RabbitMQ for Celery) whose scheme
says which protocol its workers speak:
  ` + strings.ReplaceAll(queue.URLForms, "\n", "\n  ") + `
A queue's workers on this host (registered with tare, heartbeats of Celery,
registrations of RQ, BullMQ's by their named connections to Redis) are the
system under test.

https:// is HTTP/1.1 unless --http2 (h2, chosen by ALPN; --h2c for HTTP/2
in cleartext by prior knowledge), which multiplexes the requests on each
connection, --max-streams at most each; the summary counts the connections
by the protocol they spoke. --cacert, --cert, --key and --servername set TLS
for every https:// target, a model's too. Before any load, one handshake
with each server checks its certificate, the client certificate and, with
--http2, that the server chose h2: a mismatch exits 2, naming the file or
flag to change. HTTP/2 goes out from tare's event loop, with its own
framing; --h2-engine goroutines (or --net-http) sends it through Go's HTTP/2
client instead, as a proxy always does.

Ctrl-C stops the arrivals, lets requests in flight finish for --drain, and
prints the partial summary marked interrupted; a second Ctrl-C exits at once.`,
		Example: runExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, &f)
		},
	}
	fs := cmd.Flags()
	f.window.register(fs, arrival.Rate(10), 0, 30*time.Second)
	f.store.registerNoStore(fs)
	bind(fs, f.shard.Fields())
	f.metrics.register(fs)
	return cmd
}

func runRun(cmd *cobra.Command, f *runFlags) error {
	w := &f.window
	if err := f.metrics.check(); err != nil {
		return err
	}
	p, err := w.prepare(cmd.Context(), "tare run")
	if err != nil {
		return err
	}
	defer p.Release()
	sh, err := f.shard.Plan(w.spec.Load.Label, time.Now())
	if err != nil {
		return err
	}
	st, err := f.store.open(cmd.Context())
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	d := w.driver(p, st, cmd.ErrOrStderr())
	if err := d.AwaitWorkers(cmd.Context()); err != nil {
		return err
	}
	// The barrier last, when nothing is left that could fail: the other
	// shards start when this one joins.
	if err := f.shard.Join(cmd.Context(), w.spec.Load.Label, sh); err != nil {
		return err
	}
	defer sh.Close()
	run := tare.Run{ID: sh.RowID(), Label: w.spec.Load.Label, Window: w.spec.Load.Window, Config: recorded(cmd.Flags(), nil)}
	cfg, err := d.Window(run, 0)
	if err != nil {
		return err
	}
	if sh.Shard.Sharded() {
		if err := p.Shard(&cfg, sh.Shard); err != nil {
			return err
		}
	}
	cfg.Start = sh.StartAt
	sh.Record(&cfg)
	server := cfg.Finish // a model server's metrics, when they are read
	cfg.Finish = func(s *tare.Summary) {
		if server != nil {
			server(s)
		}
		sh.Finish(s)
	}
	if t := w.spec.Target; t.Queue != "" {
		hosts := session.WorkerHostsFinish(t.Queue, t.QueueName, p.Judging.Thresholds)
		cfg.Finish = func(s *tare.Summary) { sh.Finish(s); hosts(s) }
	}
	if err := waitUntil(cmd.Context(), sh.StartAt); err != nil {
		return err
	}
	return measureAndReport(cmd, cfg, &f.metrics, p.Judging.FailOn, w.out.json)
}
