package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/metrics"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/queueurl"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/worker"
)

func newWorkerCmd() *cobra.Command {
	var (
		q                queueFlags
		model, modelName string
		timeout          time.Duration
		cfg              worker.Config
		verbose          bool
		mf               metricsFlags
	)
	cmd := &cobra.Command{
		Use:   "worker --queue URL --model URL [flags]",
		Short: "Run the reference agent worker: jobs from Redis, completions from a model",
		Long: `Run the reference agent worker of tare's topology: it takes jobs from a Redis
queue (docs/job-protocol.md), calls an OpenAI-compatible model endpoint with
each job's prompt (streaming), publishes the result and acknowledges the job.

It is crash-safe: jobs pending on a worker that died are claimed by the
others after --claim-idle, with their delivery count kept, and a job is
reported once even if delivered twice. It stops gracefully on SIGTERM or
Ctrl-C, and when the queue's stop signal is raised (tare cleanup), letting
the jobs it holds finish for --grace.`,
		Example: `  tare worker --queue redis://127.0.0.1:6379/0 --model http://127.0.0.1:8089/v1
  tare worker --queue redis://127.0.0.1:6379/0 --queue-name checkout --model http://127.0.0.1:8000/v1 --concurrency 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.url == "" || model == "" {
				return tare.Errorf(tare.EINVALID, "tare worker needs --queue redis://HOST:6379/0 and --model http://HOST:PORT/v1")
			}
			if timeout <= 0 {
				return tare.Errorf(tare.EINVALID, "--timeout must be positive, like 2m; got %s", timeout)
			}
			if err := checkWorkerFlags(cfg); err != nil {
				return err
			}
			if err := mf.check(); err != nil {
				return err
			}
			client, err := openai.New(openai.Config{URL: model, Model: modelName, APIKey: session.APIKey(), Timeout: timeout})
			if err != nil {
				return session.Flagged(err, "model")
			}
			defer client.Close()
			b, err := queue.OpenRedis(cmd.Context(), q.url, q.name)
			if err != nil {
				return session.Flagged(err, "queue")
			}
			defer b.Close()
			mx, err := mf.start(cmd.Context(), tare.Run{Label: cmp.Or(cfg.Name, "worker")}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer mx.Close()
			defer session.PublishWorkerHost(cmd.Context(), q.url, q.name, time.Second, cmd.ErrOrStderr(), mx.AddHost)()
			if verbose {
				cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			w := worker.New(b, modelOf(client, mx), cfg)
			fmt.Fprintf(cmd.ErrOrStderr(), "tare worker %s: queue %q at %s, model %s, %d at once\n", w.Name(), q.name, queue.RedactURL(q.url), client, cfg.Concurrency)
			err = w.Run(cmd.Context())
			st := w.Stats()
			fmt.Fprintf(cmd.ErrOrStderr(), "tare worker %s: stopped: %d done, %d failed, %d claimed from dead workers, %d left pending\n",
				w.Name(), st.Done, st.Failed, st.Claimed, st.Abandoned)
			return err
		},
	}
	fs := cmd.Flags()
	q.register(cmd)
	fs.StringVar(&model, "model", "", "the OpenAI-compatible endpoint, like http://127.0.0.1:8089/v1 (API key from $TARE_API_KEY or $OPENAI_API_KEY)")
	fs.StringVar(&modelName, "model-name", "", `the "model" of each request (default: none)`)
	fs.DurationVar(&timeout, "timeout", 2*time.Minute, "how long one model call may take")
	fs.StringVar(&cfg.Name, "name", "", "this worker's name, unique among the queue's workers (default host-pid-random)")
	fs.IntVar(&cfg.Concurrency, "concurrency", worker.DefaultConcurrency, "jobs worked on at once")
	fs.DurationVar(&cfg.ClaimIdle, "claim-idle", worker.DefaultClaimIdle, "a job pending this long untouched is claimed from its worker, presumed dead; short, so a worker that dies costs a short test seconds (a live worker touches its jobs every third of it, however slow the model)")
	fs.DurationVar(&cfg.Grace, "grace", worker.DefaultGrace, "on stop, how long the jobs in hand may finish")
	fs.IntVar(&cfg.MaxDeliveries, "max-deliveries", worker.DefaultMaxDeliveries, "a job delivered more often than this fails without calling the model")
	fs.BoolVar(&verbose, "verbose", false, "log what the worker does to stderr")
	fs.StringVar(&mf.listen, "metrics-listen", "", "serve this worker's model calls (ok/error, latency) and its host's figures to Prometheus on http://ADDR/metrics, like "+metrics.DefaultListen+" (docs/metrics.md); loopback only unless --metrics-allow-remote")
	fs.BoolVar(&mf.allowRemote, "metrics-allow-remote", false, "let --metrics-listen take an address that is not loopback: the figures are then readable from other machines")
	return cmd
}

// modelOf lets the worker call a model endpoint through the OpenAI client.
// Each call is shown to mx too (nil: not asked), as a request scheduled and
// sent when the worker made it: the worker's own latency, not the job's.
func modelOf(c *openai.Client, mx *metrics.Metrics) worker.Model {
	return worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
		start := time.Now()
		r := c.Call(ctx, openai.Request{Prompt: prompt, MaxTokens: maxTokens})
		mx.AddResult(&tare.Result{Scheduled: start, Sent: start, Done: time.Now(), Err: r.Err})
		return worker.Completion{FirstToken: r.FirstToken, OutputTokens: r.OutputTokens, PromptTokens: r.PromptTokens, TokenSource: r.TokenSource, Err: r.Err}, nil
	})
}

func newCleanupCmd() *cobra.Command {
	var (
		q    queueFlags
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cleanup --queue URL [--queue-name NAME]",
		Short: "Stop a queue's workers and delete that queue's keys, and nothing else",
		Long: `Raise the queue's stop signal, wait for its workers to finish what they hold
and go, then delete the queue's keys (tare:<name>:*, found with SCAN) and
print them. Keys of other queues and any other data in the same Redis
database are never touched; tare never runs FLUSHDB.

For a Celery, RQ or BullMQ queue (celery+redis://…?queue=Q,
rq+redis://…?queue=Q, bullmq+redis://…?queue=Q) it removes only what
tare's runs put there: the jobs whose id starts "tare-", their results
and registry entries, tare's own keys beside the queue, and the queue's
registration when tare created it. Those workers are yours: they are not
stopped. For Celery on RabbitMQ (celery+amqp://…?queue=Q&backend=…) it
cleans the result backend so; tare's messages still in the queue expire
by themselves, after --job-timeout (their AMQP expiration).`,
		Example: `  tare cleanup --queue redis://127.0.0.1:6379/0
  tare cleanup --queue redis://127.0.0.1:6379/0 --queue-name checkout --wait 10s
  tare cleanup --queue 'celery+redis://127.0.0.1:6379/0?queue=celery&task=tasks.answer'
  tare cleanup --queue 'bullmq+redis://127.0.0.1:6379/0?queue=agents'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.url == "" {
				return tare.Errorf(tare.EINVALID, "tare cleanup needs --queue redis://HOST:6379/0")
			}
			if wait < 0 {
				return tare.Errorf(tare.EINVALID, "--wait must be 0 or more; got %s", wait)
			}
			ctx := cmd.Context()
			if queue.ProtocolOf(q.url) != queue.ProtocolTare {
				removed, err := queueurl.Cleanup(ctx, q.url)
				if err != nil {
					return session.Flagged(err, "queue")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %d of tare's keys and entries from %s:\n", len(removed), queue.RedactURL(q.url))
				for _, k := range removed {
					fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", k)
				}
				return nil
			}
			b, err := queue.OpenRedis(ctx, q.url, q.name)
			if err != nil {
				return session.Flagged(err, "queue")
			}
			defer b.Close()
			if err := b.Stop(ctx); err != nil {
				return err
			}
			waitCtx, cancel := context.WithTimeout(ctx, wait)
			err = queue.WaitWorkers(waitCtx, b, 200*time.Millisecond)
			cancel()
			if err != nil {
				workers, _ := b.Workers(ctx)
				fmt.Fprintf(cmd.ErrOrStderr(), "tare cleanup: %d workers still registered after %s; their registrations expire by themselves\n", len(workers), wait)
			}
			keys, err := b.Cleanup(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "deleted %d keys of queue %q:\n", len(keys), q.name)
			for _, k := range keys {
				fmt.Fprintf(out, "  %s\n", k)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	q.register(cmd)
	fs.DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the workers to stop before deleting")
	return cmd
}
