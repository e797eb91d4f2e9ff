package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
)

// targetFlags say what the load goes to: a plain HTTP endpoint (--url), an
// OpenAI-compatible model endpoint (--model), or a job queue in Redis that
// agent workers serve (--queue).
type targetFlags struct {
	url      string
	method   string
	headers  []string
	body     string
	timeout  time.Duration
	insecure bool
	netHTTP  bool
	// redirects followed per request (0: none), and whether one may lead
	// to another host
	redirects int
	crossHost bool

	model     string
	modelName string
	prompt    string
	maxTokens int
	noStream  bool
	prompts   tare.Prompts // a prompt per arrival (mixFlags); nil: prompt for all

	queue       string
	queueName   string
	jobTimeout  time.Duration
	waitWorkers time.Duration
}

// DefaultWaitWorkers is how long a queue run waits for a registered worker
// before it sends load: long enough for one started just before (`tare
// worker … &`, a container coming up) to connect and register, short
// enough that a queue nobody serves is an error at once, not a run of
// timeouts.
const DefaultWaitWorkers = 10 * time.Second

// built is a target ready for load, with what the run needs around it.
type built struct {
	target  tare.Target
	name    string                                 // what is loaded, secrets redacted
	release func()                                 // closes connections, stops readers
	depth   func(context.Context) (float64, error) // queue depth now; nil for targets without a queue
	queue   *queue.Target                          // the queue target; nil for the others
}

func (f *targetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "an HTTP target, like http://127.0.0.1:8080/path")
	fs.StringVar(&f.model, "model", "", "an OpenAI-compatible endpoint, like http://127.0.0.1:8089/v1 (API key from $TARE_API_KEY or $OPENAI_API_KEY)")
	fs.StringVarP(&f.method, "method", "X", "", "HTTP method (default GET, or POST with --body)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, `request header "Name: value" (repeatable)`)
	fs.StringVar(&f.body, "body", "", "request body: inline text, or @path to read a file")
	fs.DurationVar(&f.timeout, "timeout", httptarget.DefaultTimeout, "per-request timeout (for --model, the whole completion)")
	fs.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification")
	fs.IntVar(&f.redirects, "redirects", httptarget.DefaultRedirects, "with --url, how many redirects one request follows at most, each counted (requests.redirects); 0 follows none and the 3xx is the response")
	fs.BoolVar(&f.crossHost, "redirects-cross-host", false, "with --url, follow a redirect to another host or port than the URL's too (by default such a redirect is not followed, and counts as an error of kind \"cross-host redirect\")")
	fs.BoolVar(&f.netHTTP, "net-http", false, "send a plain http:// --url through Go's net/http instead of the lean HTTP/1.1 client (for a server the lean one cannot talk to, e.g. response headers over 16 KB; about twice the CPU per request)")
	fs.StringVar(&f.modelName, "model-name", "", `with --model, the "model" of each request (default: none, which single-model servers accept)`)
	fs.StringVar(&f.prompt, "prompt", "", "with --model, the user message of each request; with --queue, the prompt of each job")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "with --model, max_tokens of each request; with --queue, of each job (0: the server's default)")
	fs.BoolVar(&f.noStream, "no-stream", false, "with --model, ask for whole responses instead of a stream (TTFT then equals e2e)")
	fs.StringVar(&f.queue, "queue", "", "a Redis job queue served by agent workers (tare worker, or your own: docs/job-protocol.md), like redis://127.0.0.1:6379/0")
	fs.StringVar(&f.queueName, "queue-name", "tare", "with --queue, the queue's name: its keys are tare:<name>:*")
	fs.DurationVar(&f.jobTimeout, "job-timeout", 5*time.Minute, "with --queue, how long one job may take from enqueue to result before it counts as a timeout; over twice a worker's model timeout (tare worker --timeout 2m), so a job whose worker died mid-call can be claimed and done again first")
	fs.DurationVar(&f.waitWorkers, "wait-workers", DefaultWaitWorkers, "with --queue, how long to wait for a worker registered on the queue before sending load, then exit 2: long enough for one started just before to register; 0 does not check (for workers that do not register)")
}

// build validates the flags and builds the target; command names the
// command in messages.
func (f *targetFlags) build(ctx context.Context, command string, maxConns int) (built, error) {
	if f.timeout <= 0 {
		return built{}, tare.Errorf(tare.EINVALID, "--timeout must be positive, like 30s; got %s", f.timeout)
	}
	header, err := f.header()
	if err != nil {
		return built{}, err
	}
	given := 0
	for _, s := range []string{f.url, f.model, f.queue} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return built{}, tare.Errorf(tare.EINVALID, "give one target: --url for HTTP, --model for a model endpoint or --queue for a job queue")
	case f.maxTokens < 0:
		return built{}, tare.Errorf(tare.EINVALID, "--max-tokens must be 0 or more; got %d", f.maxTokens)
	case f.redirects < 0:
		return built{}, tare.Errorf(tare.EINVALID, "--redirects must be 0 (follow none) or more, like %d; got %d", httptarget.DefaultRedirects, f.redirects)
	case f.queue != "":
		if f.jobTimeout <= 0 {
			return built{}, tare.Errorf(tare.EINVALID, "--job-timeout must be positive, like 5m; got %s", f.jobTimeout)
		}
		if f.waitWorkers < 0 {
			return built{}, tare.Errorf(tare.EINVALID, "--wait-workers must be 0 (do not check) or more, like 10s; got %s", f.waitWorkers)
		}
		b, err := queue.OpenRedis(ctx, f.queue, f.queueName)
		if err != nil {
			return built{}, flagged(err, "queue")
		}
		return queueTarget(b, queue.TargetConfig{Prompt: f.prompt, MaxTokens: f.maxTokens, Timeout: f.jobTimeout, Prompts: f.prompts})
	case f.model != "":
		c, err := openai.New(openai.Config{URL: f.model, Model: f.modelName, Prompt: f.prompt, MaxTokens: f.maxTokens,
			APIKey: apiKey(), Timeout: f.timeout, NoStream: f.noStream, Header: header, Prompts: f.prompts})
		if err != nil {
			return built{}, flagged(err, "model")
		}
		return built{target: c, name: c.String(), release: c.Close}, nil
	case f.url != "":
		cfg := httptarget.Config{Method: f.method, URL: f.url, Header: header, Timeout: f.timeout, Insecure: f.insecure, MaxConns: maxConns, NetHTTP: f.netHTTP,
			Redirects: f.redirects, CrossHost: f.crossHost}
		if f.redirects == 0 {
			cfg.Redirects = httptarget.NoRedirects
		}
		if f.body != "" {
			if cfg.Body, err = httptarget.ReadBody(f.body); err != nil {
				return built{}, flagged(err, "body")
			}
		}
		t, err := httptarget.New(cfg)
		if err != nil {
			return built{}, flagged(err, "url")
		}
		return built{target: t, name: t.String(), release: t.Close}, nil
	}
	return built{}, tare.Errorf(tare.EINVALID, "%s needs a target: give --url http://HOST:PORT/PATH, --model http://HOST:PORT/v1 or --queue redis://HOST:6379/0", command)
}

// queueTarget loads a queue through b: one job per arrival, results matched
// by job id, depth sampled per tick and, once a second at most, the
// registered workers counted, so a run whose workers all left says so.
// Releasing it closes the broker.
func queueTarget(b queue.Broker, cfg queue.TargetConfig) (built, error) {
	t, err := queue.NewTarget(b, cfg)
	if err != nil {
		b.Close()
		return built{}, err
	}
	var lastLook atomic.Int64 // unix ns of the last count of workers
	depth := func(ctx context.Context) (float64, error) {
		if now := time.Now().UnixNano(); now-lastLook.Load() >= int64(time.Second) {
			lastLook.Store(now)
			t.Workers(ctx) // kept in t.Stats; a failed look is skipped, as a failed depth is
		}
		d, err := t.Depth(ctx)
		return float64(d.Waiting), err
	}
	release := func() {
		t.Close()
		b.Close()
	}
	return built{target: t, name: t.String(), release: release, depth: depth, queue: t}, nil
}

// awaitWorkers waits up to --wait-workers for a worker registered on the
// queue, before any load is sent: a queue nobody serves would time every
// job out and judge the timeouts. It returns an error (exit 2) naming the
// queue and how to start a worker; progress hears that it is waiting.
func (f *targetFlags) awaitWorkers(ctx context.Context, q *queue.Target, progress io.Writer) ([]queue.WorkerInfo, error) {
	switch {
	case q == nil:
		return nil, nil
	case f.waitWorkers <= 0:
		ws, _ := q.Workers(ctx) // only to find those on this host: none is fine
		return ws, nil
	}
	deadline := time.Now().Add(f.waitWorkers)
	said := false
	for {
		ws, err := q.Workers(ctx)
		if err != nil {
			return nil, tare.Errorf(tare.EUNAVAILABLE, "list the workers of queue %q at %s: %w", f.queueName, queue.RedactURL(f.queue), err)
		}
		if len(ws) > 0 {
			return ws, nil
		}
		if time.Now().After(deadline) {
			return nil, tare.Errorf(tare.EUNAVAILABLE, "no worker serves queue %q at %s: none registered within --wait-workers %s; start one with `tare worker --queue %s --queue-name %s --model http://HOST:PORT/v1` (or your own, docs/job-protocol.md) and run again",
				f.queueName, queue.RedactURL(f.queue), f.waitWorkers, queue.RedactURL(f.queue), f.queueName)
		}
		if !said && progress != nil {
			fmt.Fprintf(progress, "tare: waiting up to %s for a worker on queue %q (--wait-workers)\n", f.waitWorkers, f.queueName)
			said = true
		}
		if tare.Sleep(ctx, min(200*time.Millisecond, time.Until(deadline)+time.Millisecond)) != nil {
			return nil, tare.Errorf(tare.EUNAVAILABLE, "interrupted while waiting for a worker on queue %q: no load was sent", f.queueName)
		}
	}
}

func (f *targetFlags) header() (http.Header, error) {
	if len(f.headers) == 0 {
		return nil, nil
	}
	h := make(http.Header)
	for _, line := range f.headers {
		name, value, err := httptarget.ParseHeader(line)
		if err != nil {
			return nil, flagged(err, "header")
		}
		h.Add(name, value)
	}
	return h, nil
}

// apiKey is the model endpoint's key, from the environment only: a flag
// would leave it in shell history and process listings.
func apiKey() string {
	if k := os.Getenv("TARE_API_KEY"); k != "" {
		return k
	}
	return os.Getenv("OPENAI_API_KEY")
}
