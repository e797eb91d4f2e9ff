package main

import (
	"context"
	"net/http"
	"os"
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

	queue      string
	queueName  string
	jobTimeout time.Duration
}

// built is a target ready for load, with what the run needs around it.
type built struct {
	target  tare.Target
	name    string                                 // what is loaded, secrets redacted
	release func()                                 // closes connections, stops readers
	depth   func(context.Context) (float64, error) // queue depth now; nil for targets without a queue
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
	fs.DurationVar(&f.jobTimeout, "job-timeout", 5*time.Minute, "with --queue, how long one job may take from enqueue to result before it counts as a timeout")
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
		b, err := queue.OpenRedis(ctx, f.queue, f.queueName)
		if err != nil {
			return built{}, flagged(err, "queue")
		}
		return queueTarget(b, queue.TargetConfig{Prompt: f.prompt, MaxTokens: f.maxTokens, Timeout: f.jobTimeout})
	case f.model != "":
		c, err := openai.New(openai.Config{URL: f.model, Model: f.modelName, Prompt: f.prompt, MaxTokens: f.maxTokens,
			APIKey: apiKey(), Timeout: f.timeout, NoStream: f.noStream, Header: header})
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
// by job id, depth sampled per tick. Releasing it closes the broker.
func queueTarget(b queue.Broker, cfg queue.TargetConfig) (built, error) {
	t, err := queue.NewTarget(b, cfg)
	if err != nil {
		b.Close()
		return built{}, err
	}
	depth := func(ctx context.Context) (float64, error) {
		d, err := t.Depth(ctx)
		return float64(d.Waiting), err
	}
	release := func() {
		t.Close()
		b.Close()
	}
	return built{target: t, name: t.String(), release: release, depth: depth}, nil
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
