package main

import (
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/openai"
)

// targetFlags say what the load goes to: a plain HTTP endpoint (--url) or
// an OpenAI-compatible model endpoint (--model).
type targetFlags struct {
	url      string
	method   string
	headers  []string
	body     string
	timeout  time.Duration
	insecure bool

	model     string
	modelName string
	prompt    string
	maxTokens int
	noStream  bool
}

func (f *targetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "an HTTP target, like http://127.0.0.1:8080/path")
	fs.StringVar(&f.model, "model", "", "an OpenAI-compatible endpoint, like http://127.0.0.1:8089/v1 (API key from $TARE_API_KEY or $OPENAI_API_KEY)")
	fs.StringVarP(&f.method, "method", "X", "", "HTTP method (default GET, or POST with --body)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, `request header "Name: value" (repeatable)`)
	fs.StringVar(&f.body, "body", "", "request body: inline text, or @path to read a file")
	fs.DurationVar(&f.timeout, "timeout", httptarget.DefaultTimeout, "per-request timeout (for --model, the whole completion)")
	fs.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate verification")
	fs.StringVar(&f.modelName, "model-name", "", `with --model, the "model" of each request (default: none, which single-model servers accept)`)
	fs.StringVar(&f.prompt, "prompt", "", "with --model, the user message of each request")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "with --model, max_tokens of each request (0: the server's default)")
	fs.BoolVar(&f.noStream, "no-stream", false, "with --model, ask for whole responses instead of a stream (TTFT then equals e2e)")
}

// target validates the flags and builds the target, with a function that
// releases it.
func (f *targetFlags) target(maxConns int) (tare.Target, string, func(), error) {
	if f.timeout <= 0 {
		return nil, "", nil, tare.Errorf(tare.EINVALID, "--timeout must be positive, like 30s; got %s", f.timeout)
	}
	header, err := f.header()
	if err != nil {
		return nil, "", nil, err
	}
	switch {
	case f.url != "" && f.model != "":
		return nil, "", nil, tare.Errorf(tare.EINVALID, "give one target: --url for HTTP or --model for a model endpoint, not both")
	case f.model != "":
		if f.maxTokens < 0 {
			return nil, "", nil, tare.Errorf(tare.EINVALID, "--max-tokens must be 0 or more; got %d", f.maxTokens)
		}
		c, err := openai.New(openai.Config{URL: f.model, Model: f.modelName, Prompt: f.prompt, MaxTokens: f.maxTokens,
			APIKey: apiKey(), Timeout: f.timeout, NoStream: f.noStream, Header: header})
		if err != nil {
			return nil, "", nil, flagged(err, "model")
		}
		return c, c.String(), c.Close, nil
	case f.url != "":
		cfg := httptarget.Config{Method: f.method, URL: f.url, Header: header, Timeout: f.timeout, Insecure: f.insecure, MaxConns: maxConns}
		if f.body != "" {
			if cfg.Body, err = httptarget.ReadBody(f.body); err != nil {
				return nil, "", nil, flagged(err, "body")
			}
		}
		t, err := httptarget.New(cfg)
		if err != nil {
			return nil, "", nil, flagged(err, "url")
		}
		return t, t.String(), t.Close, nil
	}
	return nil, "", nil, tare.Errorf(tare.EINVALID, "tare run needs a target: give --url http://HOST:PORT/PATH or --model http://HOST:PORT/v1")
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
