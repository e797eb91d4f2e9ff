package session

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/prompts"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/settings"
)

// Spec is one window as a user asks for it: what tare run's flags and a
// plan file's keys say, typed, starting from tare run's defaults. The
// command line and the plan fill the same fields (Fields, each a
// settings.Field); Prepare checks them once and builds what every window
// of the spec shares.
type Spec struct {
	Target TargetSpec
	Load   LoadSpec
	Host   HostSpec
	Judge  JudgeSpec
}

// NewSpec is a Spec with tare run's defaults, at rate, and bounded by jobs
// and duration (the duration default applies only when jobs is not given).
func NewSpec(rate arrival.Rate, jobs int, duration time.Duration) *Spec {
	return &Spec{
		Target: DefaultTargetSpec(),
		Load:   NewLoadSpec(rate, jobs, duration),
		Host:   HostSpec{Tick: tare.DefaultTick},
		Judge:  JudgeSpec{Thresholds: judge.DefaultThresholds()},
	}
}

// Fields are every field of the spec.
func (s *Spec) Fields() []settings.Field {
	return slices.Concat(s.Target.Fields(), s.Target.PromptFields(), s.Target.ModelLoadFields(), s.Load.Fields(), s.Host.Fields(), s.Judge.Fields())
}

// TargetSpec says what the load goes to: a plain HTTP endpoint (URL), an
// OpenAI-compatible model endpoint (Model), or a job queue in Redis that
// agent workers serve (Queue).
type TargetSpec struct {
	URL      string
	Method   string
	Headers  []string // "Name: value"
	Body     string   // inline, or @path
	Timeout  time.Duration
	Insecure bool
	NetHTTP  bool
	// The TLS options of every https:// target (tlsclient.Settings): the
	// CAs to trust, the client certificate and its key, the server name.
	CACert, Cert, Key, ServerName string
	// HTTP2 (https://, by ALPN) and H2C (http://, by prior knowledge)
	// speak HTTP/2 to --url and --targets; MaxStreams caps the streams of
	// each connection (0: the server's limit).
	HTTP2, H2C bool
	MaxStreams int
	// H2Engine is what serves HTTP/2: "" or "loop" (load's event loop,
	// tare's own framing; "" with NetHTTP is goroutines), or "goroutines"
	// (net/http's client).
	H2Engine string
	// Redirects followed per request (0: none), and whether one may lead
	// to another host.
	Redirects int
	CrossHost bool
	// UnixSocket is a Unix-domain socket every connection of URL, Targets
	// or Model goes to (the URL's host is then the Host header only);
	// Connections the most connections open at once, 0 when not given.
	UnixSocket  string
	Connections ConnLimit

	// Targets is a targets file of requests to mix instead of URL
	// (httptarget.ReadTargets), taken by weight or, with TargetsOrder, in
	// file order.
	Targets      string
	TargetsOrder bool

	Model     string
	ModelName string
	// ModelMetrics is the model server's Prometheus metrics URL, read
	// twice a tick; "" looks beside the endpoint, NoModelMetrics reads none.
	ModelMetrics string
	Prompt       string
	MaxTokens    int
	NoStream     bool
	// Prompts is a prompt dataset for a model or a queue; InputTokens and
	// OutputTokens draw synthetic lengths, "MEAN,SPREAD" (OutputTokens
	// "reply": a ShareGPT reply's own length).
	Prompts      string
	InputTokens  string
	OutputTokens string
	// ModelLoad shapes a model load further: conversations, shared
	// prefixes, a trace, the endpoint.
	ModelLoad ModelLoad

	Queue       string
	QueueName   string
	JobArgs     string // with a Celery or RQ queue, the task's arguments (a JSON list)
	JobKwargs   string // and keyword arguments (a JSON object)
	JobTimeout  time.Duration
	WaitWorkers time.Duration
}

// DefaultWaitWorkers is how long a queue run waits for a registered worker
// before it sends load: long enough for one started just before (`tare
// worker … &`, a container coming up) to connect and register, short
// enough that a queue nobody serves is an error at once, not a run of
// timeouts.
const DefaultWaitWorkers = 10 * time.Second

// DefaultTargetSpec is a TargetSpec with tare run's defaults.
func DefaultTargetSpec() TargetSpec {
	return TargetSpec{Timeout: httptarget.DefaultTimeout, Redirects: httptarget.DefaultRedirects,
		QueueName: "tare", JobTimeout: 5 * time.Minute, WaitWorkers: DefaultWaitWorkers}
}

func (t *TargetSpec) Fields() []settings.Field {
	return []settings.Field{
		{Flag: "url", Key: "url", Value: settings.String(&t.URL), Usage: "an HTTP target, like http://127.0.0.1:8080/path"},
		{Flag: "model", Key: "model", Value: settings.String(&t.Model), Usage: "an OpenAI-compatible endpoint, like http://127.0.0.1:8089/v1 (API key from $TARE_API_KEY or $OPENAI_API_KEY)"},
		{Flag: "method", Short: "X", Key: "method", Value: settings.String(&t.Method), Usage: "HTTP method (default GET, or POST with --body)"},
		{Flag: "header", Short: "H", Key: "header", Value: settings.Strings(&t.Headers), Usage: `request header "Name: value" (repeatable)`},
		{Flag: "body", Key: "body", Value: settings.String(&t.Body), Usage: "request body: inline text, or @path to read a file"},
		{Flag: "timeout", Key: "timeout", Value: settings.Duration(&t.Timeout), Usage: "per-request timeout (for --model, the whole completion)"},
		{Flag: "insecure", Key: "insecure", Value: settings.Bool(&t.Insecure), Usage: "skip TLS certificate verification"},
		{Flag: "cacert", Key: "cacert", Value: settings.String(&t.CACert), Usage: "a PEM file of the CAs to trust for https:// (a private CA) instead of the system's; checked at start with one handshake with each server, before any load"},
		{Flag: "cert", Key: "cert", Value: settings.String(&t.Cert), Usage: "a PEM file of the client certificate to present to https:// servers (mTLS), its chain after it; its key in --key or in the same file"},
		{Flag: "key", Key: "key", Value: settings.String(&t.Key), Usage: "a PEM file of --cert's private key (unencrypted: PKCS #8, RSA or EC)"},
		{Flag: "servername", Key: "servername", Value: settings.String(&t.ServerName), Usage: "the server name sent in TLS (SNI) and checked against the server's certificate, when the URL's host is not it (an IP address, a tunnel)"},
		{Flag: "http2", Key: "http2", Value: settings.Bool(&t.HTTP2), Usage: "speak HTTP/2 to an https:// --url or --targets, chosen by ALPN, requests multiplexed on each connection; a server that chooses http/1.1 is refused at start, and a connection it answers so later carries nothing (error \"no h2\"); the summary counts connections by protocol. Without it https:// is HTTP/1.1"},
		{Flag: "h2c", Key: "h2c", Value: settings.Bool(&t.H2C), Usage: "speak HTTP/2 in cleartext to an http:// --url or --targets, by prior knowledge (no upgrade, no proxy); checked at start"},
		{Flag: "max-streams", Key: "max-streams", Value: settings.Int(&t.MaxStreams), Usage: "with --http2 or --h2c, streams in flight on one connection at most: another connection opens only when every open one is full, the one a stream last ended on taken first (0: the server's limit)"},
		{Flag: "h2-engine", Key: "h2-engine", Value: settings.String(&t.H2Engine), Usage: "with --http2 or --h2c, what sends HTTP/2: loop (the default: tare's event loop and its own HTTP/2 framing, the frames of many streams in one write) or goroutines (Go's HTTP/2 client: twice the CPU a request; the default with --net-http, and through a proxy)"},
		{Flag: "redirects", Key: "redirects", Value: settings.Int(&t.Redirects), Usage: "with --url, how many redirects one request follows at most, each counted (requests.redirects); 0 follows none and the 3xx is the response"},
		{Flag: "redirects-cross-host", Key: "redirects-cross-host", Value: settings.Bool(&t.CrossHost), Usage: "with --url, follow a redirect to another host or port than the URL's too (by default such a redirect is not followed, and counts as an error of kind \"cross-host redirect\")"},
		{Flag: "unix-socket", Key: "unix-socket", Value: settings.String(&t.UnixSocket), Usage: "with --url, --targets or --model, connect to this Unix-domain socket instead of the URL's host and port, as curl --unix-socket does: the URL's host is sent as the Host header (http://localhost/ sends Host: localhost), and the processes listening on the socket are the system under test, like /run/gunicorn.sock"},
		{Flag: "connections", Key: "connections", Value: &t.Connections, Usage: "with --url, --targets or --model, open at most this many connections to the server at once (each server of a --targets file), reused the one idle last first; a request that finds them all busy waits for one, counted in flight (so its wait is in its latency), and arrivals beyond --max-inflight are dropped as ever (default: as many as requests in flight)"},
		{Flag: "net-http", Value: settings.Bool(&t.NetHTTP), Usage: "send a plain http:// --url through Go's net/http on goroutines instead of tare's event loop (for a server the loop's HTTP/1.1 cannot talk to; about twice the CPU per request)"},
		{Flag: "model-name", Key: "model-name", Value: settings.String(&t.ModelName), Usage: `with --model, the "model" of each request (default: the one model the server's /v1/models lists)`},
		{Flag: "model-metrics", Key: "model-metrics", Value: settings.String(&t.ModelMetrics), Usage: "with --model, the model server's Prometheus metrics, read twice a tick: its waiting requests are the endpoint's queue depth, shown with its running requests, KV cache use and preemptions (vLLM, SGLang, TGI and llama.cpp's names; docs/model.md); by default /metrics at the endpoint's host when it answers so; none reads none"},
		{Flag: "prompt", Value: settings.String(&t.Prompt), Usage: "with --model, the user message of each request; with --queue, the prompt of each job"},
		{Flag: "max-tokens", Key: "max-tokens", Value: settings.Int(&t.MaxTokens), Usage: "with --model, max_tokens of each request; with --queue, of each job (0: the server's default)"},
		{Flag: "no-stream", Value: settings.Bool(&t.NoStream), Usage: "with --model, ask for whole responses instead of a stream (TTFT then equals e2e)"},
		{Flag: "queue", Key: "queue", Value: settings.String(&t.Queue), Usage: "a job queue, its protocol chosen by the scheme: " + strings.ReplaceAll(queue.URLForms, "\n", "; ") + " (docs/job-protocol.md, docs/celery.md, docs/rq.md, docs/bullmq.md)"},
		{Flag: "queue-name", Value: settings.String(&t.QueueName), Usage: "with a redis:// --queue, the queue's name: its keys are tare:<name>:* (Celery, RQ and BullMQ URLs name theirs with ?queue=)"},
		{Flag: "targets", Key: "targets", Value: settings.String(&t.Targets), Usage: `a targets file of HTTP requests to mix, instead of --url: vegeta's http format ("GET http://host/path", header lines, "@body.json"; a blank line between requests) or JSON lines ({"name", "method", "url", "header", "body" or "body_file", "weight"}); each arrival takes the next by weight (drawn from --seed), figures per request`},
		{Flag: "targets-order", Key: "targets-order", Value: settings.Bool(&t.TargetsOrder), Usage: "with --targets, take the requests in file order, round and round, instead of by weight"},
		{Flag: "job-args", Value: settings.String(&t.JobArgs), Usage: `with a Celery or RQ --queue, the task's positional arguments, a JSON list; with a BullMQ --queue, the job's data, any JSON value, like '{"prompt": "{{prompt}}", "n": "{{seq}}"}'; in every string "{{seq}}" is the job's number, "{{id}}" its task or job id, "{{prompt}}" the job's prompt (--prompt); a string that is just "{{seq}}" becomes the number; like '["{{prompt}}", "{{seq}}"]'`},
		{Flag: "job-kwargs", Value: settings.String(&t.JobKwargs), Usage: `with a Celery or RQ --queue (not BullMQ: its job has one data value, --job-args), the task's keyword arguments, a JSON object, with the same replacements as --job-args, like '{"n": "{{seq}}"}'`},
		{Flag: "job-timeout", Value: settings.Duration(&t.JobTimeout), Usage: "with --queue, how long one job may take from enqueue to result before it counts as a timeout; over twice a worker's model timeout (tare worker --timeout 2m), so a job whose worker died mid-call can be claimed and done again first"},
		{Flag: "wait-workers", Value: settings.Duration(&t.WaitWorkers), Usage: "with --queue, how long to wait for a worker registered on the queue before sending load, then exit 2: long enough for one started just before to register; 0 does not check (for workers that do not register)"},
	}
}

// PromptFields are the prompt dataset's settings, among Fields: all tare
// demo takes of the target.
func (t *TargetSpec) PromptFields() []settings.Field {
	return []settings.Field{
		{Flag: "prompts", Key: "prompts", Value: settings.String(&t.Prompts), Usage: `with --model or --queue, a prompt dataset: JSON lines of {"prompt"} or {"messages"} with an optional "max_tokens", or ShareGPT conversations; to --model every user turn of a conversation runs, after the answer before, with the server's answers as history (docs/model.md), unless --first-turn-only; to --queue the first human turn is the prompt; arrival i takes prompt (or turn) i, round and round`},
		{Flag: "input-tokens", Key: "input-tokens", Value: settings.String(&t.InputTokens), Usage: "with --model or --queue and no --prompts, synthetic prompts of this many tokens, MEAN,SPREAD like 512,128 (words one token each; the server's usage says what it counted)"},
		{Flag: "output-tokens", Key: "output-tokens", Value: settings.String(&t.OutputTokens), Usage: "with --model or --queue, each request's max_tokens, MEAN,SPREAD like 128,32 (for prompts without their own); with a ShareGPT --prompts, reply takes the length of the recorded reply"},
	}
}

// PromptSource is what the prompt settings describe: nil when none is
// given. toModel says the target is a model or a queue of model calls;
// seed draws the synthetic lengths.
func (t *TargetSpec) PromptSource(toModel bool, seed uint64) (tare.Prompts, error) {
	if t.Prompts == "" && t.InputTokens == "" && t.OutputTokens == "" {
		return nil, nil
	}
	switch {
	case !toModel:
		return nil, settings.Errorf("", "%s, %s and %s feed a model: give %s URL or %s URL", settings.Name("prompts"), settings.Name("input-tokens"), settings.Name("output-tokens"), settings.Name("model"), settings.Name("queue"))
	case t.Prompt != "":
		return nil, settings.Errorf("prompt", "is one prompt for every request: drop it with %s, %s or %s", settings.Name("prompts"), settings.Name("input-tokens"), settings.Name("output-tokens"))
	case t.Prompts != "" && t.InputTokens != "":
		return nil, settings.Errorf("input-tokens", "makes synthetic prompts: drop it with %s, whose prompts have their own lengths", settings.Name("prompts"))
	}
	reply := t.OutputTokens == "reply"
	var out prompts.Lengths
	if t.OutputTokens != "" && !reply {
		var err error
		if out, err = prompts.ParseLengths(t.OutputTokens); err != nil {
			return nil, &tare.Error{Code: tare.EINVALID, Message: "--output-tokens " + tare.ErrorMessage(err), Err: err}
		}
	}
	if t.Prompts != "" {
		ps, err := prompts.Read(t.Prompts, reply)
		if err != nil {
			return nil, Flagged(err, "")
		}
		return prompts.Dataset(ps, out, seed), nil
	}
	if reply {
		return nil, settings.Errorf("output-tokens", "reply takes the budget from a ShareGPT %s file: give one, or a length like 128,32", settings.Name("prompts"))
	}
	var in prompts.Lengths // zero, with --output-tokens alone: the target's own prompt
	if t.InputTokens != "" {
		var err error
		if in, err = prompts.ParseLengths(t.InputTokens); err != nil {
			return nil, &tare.Error{Code: tare.EINVALID, Message: "--input-tokens " + tare.ErrorMessage(err), Err: err}
		}
	}
	return prompts.Synthetic(in, out, seed), nil
}

func (t *TargetSpec) header() (http.Header, error) {
	if len(t.Headers) == 0 {
		return nil, nil
	}
	h := make(http.Header)
	for _, line := range t.Headers {
		name, value, err := httptarget.ParseHeader(line)
		if err != nil {
			return nil, Flagged(err, "header")
		}
		h.Add(name, value)
	}
	return h, nil
}

// LoadSpec shapes the arrivals: shared by every command that sends load.
type LoadSpec struct {
	Rate        arrival.Rate
	Arrival     string
	Burstiness  float64
	Seed        uint64
	Jobs        int
	Duration    time.Duration
	MaxInFlight int
	Drain       time.Duration
	Engines     int // event loops for a plain http:// target; 0: load.DefaultEngines
	Label       string
	Window      string
	// Stages ramp the rate instead of Rate; the figures and the verdict
	// are given per stage too.
	Stages arrival.Stages
	// Warmup is the start whose arrivals are sent but left out of every
	// figure and of the verdict.
	Warmup time.Duration
	// Trace, when not nil, replaces the arrival process: a replayed
	// trace's times, TraceSpeed times as fast. Turns, when not nil, makes
	// the i-th arrival bring Turns(i) at once: a conversation's turns.
	// The model load's settings set them (modelLoad).
	Trace      []time.Duration
	TraceSpeed float64
	Turns      func(i uint64) int
	// DurationDefault says Duration is the command's default, not given:
	// with Jobs, or Stages, it does not bound the run. RateDefault says
	// the same of Rate.
	DurationDefault, RateDefault bool
}

// NewLoadSpec is a LoadSpec with the defaults: rate, and jobs and
// duration as the command's defaults.
func NewLoadSpec(rate arrival.Rate, jobs int, duration time.Duration) LoadSpec {
	return LoadSpec{Rate: rate, Arrival: arrival.KindPoisson, Burstiness: 1, Seed: 1, Jobs: jobs, Duration: duration,
		DurationDefault: true, RateDefault: true, MaxInFlight: load.DefaultMaxInFlight, Drain: load.DefaultDrain}
}

func (l *LoadSpec) Fields() []settings.Field {
	return []settings.Field{
		{Flag: "rate", Key: "rate", Value: &l.Rate, Usage: "mean arrival rate, like 200/s, 12/m or 3/h"},
		{Flag: "arrival", Key: "arrival", Value: settings.String(&l.Arrival), Usage: "arrival process: poisson (exponential gaps), gamma (see --burstiness) or constant"},
		{Flag: "burstiness", Key: "burstiness", Value: settings.Float64(&l.Burstiness), Usage: "gamma shape: 1 is poisson, below 1 burstier, above 1 smoother"},
		{Flag: "seed", Key: "seed", Value: settings.Uint64(&l.Seed), Usage: "seed of the arrival process: the same seed gives the same schedule"},
		{Flag: "jobs", Key: "jobs", Value: settings.Int(&l.Jobs), Usage: "number of arrivals (0: bounded by --duration only)"},
		{Flag: "duration", Key: "duration", Value: settings.Duration(&l.Duration), Usage: "length of the arrival window (0: bounded by --jobs only; the default applies only without --jobs); with both, the first reached ends it"},
		{Flag: "max-inflight", Key: "max-inflight", Value: settings.Int(&l.MaxInFlight), Usage: "requests in flight at most; arrivals beyond it are dropped and counted, never delayed"},
		{Flag: "drain", Key: "drain", Value: settings.Duration(&l.Drain), Usage: "on Ctrl-C, how long requests in flight may finish (0: none, they are cancelled at once)"},
		{Flag: "engines", Key: "engines", Value: settings.Int(&l.Engines), Usage: "event loops, each a thread of its own, that split the schedule of a plain http:// target, for rates past one core (0: one per four CPUs, at least one; the summary says how many ran)"},
		{Flag: "label", Key: "label", Value: settings.String(&l.Label), Usage: "a name for this run, stored and shown with it"},
		{Flag: "window", Value: settings.String(&l.Window), Usage: "protocol window of this run: peak, offpeak or mid"},
		{Flag: "stages", Key: "stages", Value: &l.Stages, Usage: "ramp the arrival rate through stages, like 30s:10/s,2m:50/s,1m:50/s: each moves the rate linearly from the previous target (0 before the first; 0s:RATE jumps) to its own over its duration; figures and a verdict per stage; replaces --rate, and lasts the stages' total unless --jobs or --duration ends it first"},
		{Flag: "warmup", Key: "warmup", Value: settings.Duration(&l.Warmup), Usage: "send the arrivals of the first seconds, like 10s, but leave them and those seconds of the host out of every figure and of the verdict (counted as warm-up)"},
	}
}

// Schedule checks the load and builds the bounded arrival process.
func (l *LoadSpec) Schedule() (arrival.Process, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	var p arrival.Process
	var err error
	switch {
	case l.Trace != nil:
		p, err = arrival.NewTrace(l.Trace, l.TraceSpeed)
	case len(l.Stages) > 0:
		p, err = arrival.NewStaged(l.Arrival, l.Stages, l.Burstiness, l.Seed)
	default:
		p, err = arrival.New(l.Arrival, float64(l.Rate), l.Burstiness, l.Seed)
	}
	if err != nil {
		return nil, Flagged(err, "")
	}
	if l.Turns != nil {
		p = arrival.Repeat(p, l.Turns)
	}
	return arrival.Bound(p, l.Jobs, l.Span()), nil
}

// Into puts the load into cfg: the schedule (its description in the run),
// the rate, the stages, the warm-up and the engine's limits.
func (l *LoadSpec) Into(cfg *Config) error {
	sched, err := l.Schedule()
	if err != nil {
		return err
	}
	cfg.Schedule, cfg.Run.Arrival = sched, sched.String()
	cfg.Rate, cfg.Engine, cfg.Warmup = float64(l.Rate), l.Engine(), l.Warmup
	if len(l.Stages) > 0 {
		cfg.Stages, cfg.Rate = l.Stages, l.Stages.Expected()/l.Stages.Duration().Seconds()
	}
	return nil
}

// Split is a shard's part of the schedule.
func (l *LoadSpec) Split(sh arrival.Shard) (arrival.Process, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	var p arrival.Process
	var err error
	if len(l.Stages) > 0 {
		// The stages end a staged shard; the jobs are dealt among shards.
		if p, err = arrival.SplitStaged(l.Arrival, l.Stages, l.Burstiness, l.Seed, l.Jobs, sh); err == nil {
			p = arrival.Bound(p, 0, l.Span())
		}
	} else {
		p, err = arrival.Split(l.Arrival, float64(l.Rate), l.Burstiness, l.Seed, l.Jobs, l.Span(), sh)
	}
	if err != nil {
		return nil, Flagged(err, "")
	}
	return p, nil
}

// Span is the duration that bounds the arrivals: 0 when the jobs alone do.
func (l *LoadSpec) Span() time.Duration {
	if (l.Jobs > 0 || len(l.Stages) > 0) && l.DurationDefault {
		return 0
	}
	return l.Duration
}

func (l *LoadSpec) check() error {
	switch d := l.Span(); {
	case l.Jobs < 0:
		return settings.Errorf("jobs", "must be 0 or more; got %d", l.Jobs)
	case d < 0:
		return settings.Errorf("duration", "must be 0 or more, like 30s or 5m; got %s", d)
	case l.Jobs == 0 && d == 0 && len(l.Stages) == 0:
		return settings.Errorf("", "the run needs an end: give %s N, %s D, or both", settings.Name("jobs"), settings.Name("duration"))
	case l.MaxInFlight < 1:
		return settings.Errorf("max-inflight", "must be at least 1; got %d", l.MaxInFlight)
	case l.Burstiness <= 0:
		return settings.Errorf("burstiness", "must be a positive number (1 is poisson, below 1 burstier, above 1 smoother); got %g", l.Burstiness)
	case l.Drain < 0:
		return settings.Errorf("drain", "must be 0 or more; got %s", l.Drain)
	case l.Engines < 0:
		return settings.Errorf("engines", "must be 0 (one per four CPUs) or more, like 2; got %d", l.Engines)
	case CheckWindow(l.Window) != nil:
		return CheckWindow(l.Window)
	case l.Warmup < 0:
		return settings.Errorf("warmup", "must be 0 or more, like 10s; got %s", l.Warmup)
	case len(l.Stages) > 0 && !l.RateDefault:
		d := l.Duration
		if d <= 0 {
			d = time.Minute
		}
		return settings.Errorf("stages", "sets the rate of every moment: drop %s %s (a flat rate is one stage, like 0s:%s,%s:%s)", settings.Name("rate"), l.Rate, l.Rate, d, l.Rate)
	}
	if n := l.Length(); l.Warmup > 0 && n > 0 && l.Warmup >= n {
		return settings.Errorf("warmup", "%s is as long as the run (%s): nothing would be left to measure; give a shorter %s or a longer run", l.Warmup, n, settings.Name("warmup"))
	}
	return nil
}

// CheckWindow checks a --window: "" (none), or a protocol window's name.
// An unknown window would match no run and look like an empty store.
func CheckWindow(w string) error {
	if w == "" || tare.IsWindow(w) {
		return nil
	}
	return settings.Errorf("window", "must be %s, %s or %s; got %q", tare.WindowPeak, tare.WindowOffpeak, tare.WindowMid, w)
}

// Length is how long the arrivals last: the duration, or the jobs at the
// rate, whichever ends them first.
func (l *LoadSpec) Length() time.Duration {
	d := l.Span()
	if len(l.Stages) > 0 {
		if d == 0 || l.Stages.Duration() < d {
			d = l.Stages.Duration()
		}
		return d
	}
	if l.Jobs > 0 && l.Rate > 0 {
		byJobs := time.Duration(float64(l.Jobs) / float64(l.Rate) * float64(time.Second))
		if d == 0 || byJobs < d {
			d = byJobs
		}
	}
	return d
}

// Planned is how long the run is planned to last when time bounds it, 0
// when the jobs alone do: what a progress line counts down.
func (l *LoadSpec) Planned() time.Duration {
	if l.Span() == 0 && l.Jobs > 0 && len(l.Stages) == 0 {
		return 0
	}
	return l.Length()
}

// Engine is the load engine's configuration. A --drain of 0 is none,
// which the engine spells NoDrain (its zero value is its default).
func (l *LoadSpec) Engine() load.Config {
	drain := l.Drain
	if drain == 0 {
		drain = load.NoDrain
	}
	return load.Config{MaxInFlight: l.MaxInFlight, Drain: drain, Engines: l.Engines}
}

// HostSpec says what to sample and whose processes to measure.
type HostSpec struct {
	Tick        time.Duration
	PIDs        []int
	Cgroup      string
	Container   string   // a container's name or id
	RuntimeDirs []string // RUNTIME=DIR: where a container runtime keeps its state
	Exclude     []string // pids or command names taken out of the system under test
	// SchedProbe is "auto" (or ""): measure blame with the scheduler
	// probe where it can run; "off": estimate it from the ledger.
	SchedProbe string
}

func (h *HostSpec) Fields() []settings.Field {
	return []settings.Field{
		{Flag: "tick", Key: "tick", Value: settings.Duration(&h.Tick), Usage: "host sampling interval, 100ms or more"},
		{Flag: "pid", Value: settings.Ints(&h.PIDs), Usage: "a process of the system under test, with its threads and descendants (repeatable); added to what tare finds itself: the processes listening on a loopback target's port, and everything they call"},
		{Flag: "cgroup", Key: "cgroup", Value: settings.String(&h.Cgroup), Usage: "the system under test's cgroup (a path under the cgroup mount, like /system.slice/app.service): its throttling is measured, and its processes are part of the system under test"},
		{Flag: "container", Key: "container", Value: settings.String(&h.Container), Usage: "a container on this host (docker, podman, containerd, CRI-O, systemd-nspawn) that is part of the system under test, by name, id or pod/name: all its processes, and its cgroup's throttling (unless --cgroup names another)"},
		{Flag: "runtime-dir", Key: "runtime-dirs", Value: settings.Strings(&h.RuntimeDirs), Usage: "where a container runtime keeps its state when not in the default place, as RUNTIME=DIR (docker=/data/docker, podman=$HOME/.local/share/containers/storage, containerd=/run/k3s/containerd; repeatable): containers are named and found from it"},
		{Flag: "exclude-process", Key: "exclude-process", Value: settings.Strings(&h.Exclude), Usage: "take a process out of the system under test, by pid or command name, with its descendants (repeatable): one tare found or followed that is really a neighbour (a shared database, a log shipper)"},
		{Flag: "sched-probe", Key: "sched-probe", Value: settings.Enum(&h.SchedProbe, "auto", "off"), Usage: "auto: measure behind whom the system under test and tare waited for a CPU with the scheduler's own events (an eBPF probe, as root on a kernel with BTF), else estimate it; off: always estimate it from the CPU shares"},
	}
}

// Sampling checks the spec and returns the sampler's configuration: self
// is tare, the PIDs the system under test.
func (h *HostSpec) Sampling(self int) (host.Config, error) {
	if h.Tick < tare.MinTick {
		return host.Config{}, settings.Errorf("tick", "must be %s or more; got %s", tare.MinTick, h.Tick)
	}
	if err := settings.Check(h.Fields()...); err != nil { // --sched-probe
		return host.Config{}, err
	}
	for _, pid := range h.PIDs {
		if !host.Exists("", pid) {
			return host.Config{}, settings.Errorf("pid", "%d: no such process", pid)
		}
	}
	for _, x := range h.Exclude {
		if x == "" || !isDigits(x) && len(x) > 15 {
			return host.Config{}, settings.Errorf("exclude-process", "%q: want a pid or a command name as ps -o comm shows it (15 characters at most)", x)
		}
	}
	if h.Cgroup != "" {
		if _, err := host.NewSampler(host.Config{Cgroup: h.Cgroup}); err != nil {
			return host.Config{}, Flagged(err, "cgroup")
		}
	}
	var rt host.Runtimes
	for _, d := range h.RuntimeDirs {
		name, dir, ok := strings.Cut(d, "=")
		if !ok {
			return host.Config{}, settings.Errorf("runtime-dir", "%q: want RUNTIME=DIR, like docker=/data/docker", d)
		}
		if err := rt.SetDir(name, dir); err != nil {
			return host.Config{}, settings.Errorf("runtime-dir", "%q: %v", d, err)
		}
	}
	cfg := host.Config{Tick: h.Tick, Tare: []int{self}, Cgroup: h.Cgroup, Exclude: h.Exclude, Runtimes: rt, SchedProbe: h.SchedProbe != "off"}
	if len(h.PIDs) > 0 {
		cfg.Parts = []host.Part{{PIDs: h.PIDs, How: "--pid"}}
		cfg.SUT = slices.Clone(h.PIDs)
	}
	return cfg, nil
}

// Checking is Sampling for tare check: the scheduler probe, where it runs,
// also watches the busiest other processes, to say whom each waited behind.
func (h *HostSpec) Checking(self int) (host.Config, error) {
	cfg, err := h.Sampling(self)
	cfg.WatchBusiest = host.DefaultWatchBusiest
	return cfg, err
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// FindSUT adds to cfg's system under test what tare finds itself: the
// processes of the container (whose cgroup's throttling is measured
// unless Cgroup names another), of the cgroup, and those listening on a
// loopback target's port, or on socket (--unix-socket) when it is not
// "", each a part of its own beside --pid's. It returns how they were
// found, for the summary; "" when the system under test is not known.
func (h *HostSpec) FindSUT(cfg *host.Config, target, socket string) (string, error) {
	if h.Container != "" {
		c, err := host.FindContainer(cfg.ProcRoot, cfg.CgroupRoot, cfg.Runtimes, h.Container)
		if err != nil {
			return "", Flagged(err, "container")
		}
		addPart(cfg, c.PIDs, "--container: "+c.Container.String())
		if cfg.Cgroup == "" {
			cfg.Cgroup = c.Cgroup
		}
	}
	if h.Cgroup != "" {
		pids, err := host.CgroupPIDs(cfg.CgroupRoot, h.Cgroup)
		if err != nil {
			return "", Flagged(tare.Errorf(tare.ENOTFOUND, "%w", err), "cgroup")
		}
		addPart(cfg, pids, "--cgroup "+h.Cgroup)
	}
	switch {
	case socket != "":
		pids, how, err := host.FindUnixService(cfg.ProcRoot, socket)
		if err != nil {
			return "", err
		}
		addPart(cfg, pids, how)
	case target != "":
		pids, how, err := host.FindService(cfg.ProcRoot, target)
		if err != nil {
			return "", err
		}
		addPart(cfg, pids, how)
	}
	var hows []string
	for _, p := range cfg.Parts {
		hows = append(hows, p.How)
	}
	return strings.Join(hows, " and "), nil
}

// addPart adds pids, found as how, to the system under test as a part of
// its own, leaving out those it has already.
func addPart(cfg *host.Config, pids []int, how string) {
	pids = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return slices.Contains(cfg.SUT, pid) })
	if len(pids) == 0 {
		return
	}
	cfg.Parts = append(cfg.Parts, host.Part{PIDs: pids, How: how})
	cfg.SUT = append(cfg.SUT, pids...)
}

// JudgeSpec sets the verdict's thresholds, the SLO and the exit status.
type JudgeSpec struct {
	Thresholds judge.Thresholds
	SLO        string
	FailOn     string // "", "polluted", "suspect", "slo"
}

func (j *JudgeSpec) Fields() []settings.Field {
	th := &j.Thresholds
	return []settings.Field{
		{Flag: "steal-threshold", Key: "thresholds.steal", Value: settings.Percent(&th.Steal), Usage: "steal % above which a tick is polluted and the steal signal fires"},
		{Flag: "steal-ticks", Key: "thresholds.steal-ticks", Value: settings.Percent(&th.StealTicks), Usage: "share of ticks (%) above the steal threshold that fires the steal signal"},
		{Flag: "throttled-ticks", Key: "thresholds.throttled-ticks", Value: settings.Percent(&th.ThrottledTicks), Usage: "share of ticks (%) with cgroup throttling that fires the throttling signal"},
		{Flag: "neighbour-threshold", Key: "thresholds.neighbours", Value: settings.Percent(&th.Neighbours), Usage: "CPU the system under test and tare lost waiting behind other processes, in % of one CPU, above which the neighbours signal fires"},
		{Flag: "neighbour-ticks", Key: "thresholds.neighbour-ticks", Value: settings.Percent(&th.NeighbourTicks), Usage: "share of ticks (%) with that loss above the steal threshold that fires the neighbours signal"},
		{Flag: "run-delay-threshold", Key: "thresholds.run-delay", Value: settings.Percent(&th.RunDelay), Usage: "run delay (% of wall time) of the measured processes that fires the run-delay signal when tare cannot tell whose CPU it was"},
		{Flag: "latency-factor", Key: "thresholds.latency-factor", Value: settings.Float64(&th.LatencyFactor), Usage: "a tick's p95 this many times the median tick p95 counts as latency moving"},
		{Flag: "latency-ticks", Key: "thresholds.latency-ticks", Value: settings.Int(&th.LatencyTicks), Usage: "ticks of latency moving while the work in the system (requests in flight, jobs queued and in service) stays flat that fire the signal"},
		{Flag: "latency-ticks-share", Key: "thresholds.latency-ticks-share", Value: settings.Percent(&th.LatencyShare), Usage: "or the share of ticks (%) of latency moving while the work in the system stays flat that fires the signal"},
		{Flag: "latency-floor", Key: "thresholds.latency-floor", Value: settings.Duration(&th.LatencyFloor), Usage: "smallest rise over the median tick p95 that counts as latency moving"},
		{Flag: "latency-p", Key: "thresholds.latency-p", Value: settings.Probability(&th.LatencyChance), Usage: "the latency signal fires only when the run's own requests, shuffled at random into ticks of the same sizes, are this unlikely to give ticks as slow (a p-value)"},
		{Flag: "tail-factor", Key: "thresholds.tail-factor", Value: settings.Float64(&th.TailFactor), Usage: "the tail signal fires when the outside waits the slowest requests overlapped moved the p99 (or p95) at least this many times"},
		{Flag: "tail-p", Key: "thresholds.tail-p", Value: settings.Probability(&th.TailChance), Usage: "and the slowest requests overlapped outside waits more often than requests drawn at random, this unlikely by chance (a p-value)"},
		{Flag: "send-lag-threshold", Key: "thresholds.send-lag", Value: settings.Duration(&th.SendLagP99), Usage: "send-lag p99 above which the generator counts as starved"},
		{Flag: "generator-delay-threshold", Key: "thresholds.generator-delay", Value: settings.Float64(new(float64)), Usage: "no longer used",
			Retired: "tare's own wait for a CPU changes the figures only through send lag, which --send-lag-threshold (thresholds.send-lag) judges"},
		{Flag: "slo", Key: "slo", Value: settings.String(&j.SLO), Usage: "service-level objective, like p95<=2s or p99<=800ms,avg<=300ms; per request (goodput): ttft and tpot of a model, ttfb (first byte) of a plain HTTP target, e2e"},
		{Flag: "fail-on", Value: settings.Enum(&j.FailOn, "polluted", "suspect", "slo"), Usage: "polluted or suspect: exit 3 when the verdict is that or worse (the measurement is inconclusive: rerun, do not file a regression; a run in which no request succeeded is suspect); slo: exit 1 when the SLO failed on a run that is not polluted"},
	}
}

// Judging is what the verdict is measured against, and the exit status
// FailOn asks of it.
type Judging struct {
	Thresholds judge.Thresholds
	SLO        judge.SLO
	FailOn     string
}

// Judging checks the spec and parses the SLO.
func (j *JudgeSpec) Judging() (Judging, error) {
	out := Judging{Thresholds: j.Thresholds, FailOn: j.FailOn}
	fields := j.Fields()
	// --fail-on first, then the shares and the p-value, each by its own rule.
	if err := settings.Check(settings.Lookup(fields, "fail-on")); err != nil {
		return out, err
	}
	if err := settings.Check(fields...); err != nil {
		return out, err
	}
	th := &j.Thresholds
	if th.LatencyFactor <= 1 {
		return out, settings.Errorf("latency-factor", "must be above 1; got %g", th.LatencyFactor)
	}
	if th.TailFactor < 1 {
		return out, settings.Errorf("tail-factor", "must be 1 or more, like 1.3; got %g", th.TailFactor)
	}
	switch {
	case j.SLO != "":
		slo, err := judge.ParseSLO(j.SLO)
		if err != nil {
			return out, Flagged(err, "slo")
		}
		out.SLO = slo
	case j.FailOn == "slo":
		return out, settings.Errorf("fail-on", "slo needs an %s, like %s p95<=2s", settings.Name("slo"), settings.Name("slo"))
	}
	return out, nil
}

// HostOnly refuses what a command that sends no load of its own (tare
// watch, tare check) cannot judge: it sees no latency, so an SLO would
// fail (or pass) on nothing.
func (j *JudgeSpec) HostOnly(command string) error {
	if j.SLO != "" || j.FailOn == "slo" {
		return settings.Errorf("", "%s sees no latency of its own, so %s has nothing to judge: drop %s (and %s slo), judge the tool's own report, or measure with tare run", command, settings.Name("slo"), settings.Name("slo"), settings.Name("fail-on"))
	}
	return nil
}

// SweepSpec is the capacity search's own settings.
type SweepSpec struct {
	From, To, Step arrival.Rate
	Narrow         int
	Cooldown       time.Duration
}

// NewSweepSpec is a SweepSpec with the defaults: from 1/s, doubling, to
// 1000/s.
func NewSweepSpec() SweepSpec {
	return SweepSpec{From: 1, To: 1000, Narrow: judge.DefaultNarrow, Cooldown: 2 * time.Second}
}

func (s *SweepSpec) Fields() []settings.Field {
	return []settings.Field{
		{Flag: "from", Key: "sweep.from", Value: &s.From, Usage: "first rate of the search, like 1/s"},
		{Flag: "to", Key: "sweep.to", Value: &s.To, Usage: "highest rate the search tries, like 500/s"},
		{Flag: "step", Key: "sweep.step", Value: &s.Step, Usage: "added to the rate at each step, like 5/s (default: the rate doubles)"},
		{Flag: "narrow", Key: "sweep.narrow", Value: settings.Int(&s.Narrow), Usage: "bisection steps between the last rate that held and the first that failed"},
		{Flag: "cooldown", Key: "sweep.cooldown", Value: settings.Duration(&s.Cooldown), Usage: "pause between steps, so one step's stragglers do not land in the next"},
	}
}

// Plan checks the spec and returns the search's plan.
func (s *SweepSpec) Plan() (judge.SweepPlan, error) {
	p := judge.SweepPlan{From: float64(s.From), To: float64(s.To), Step: float64(s.Step), Narrow: s.Narrow}
	if s.Cooldown < 0 {
		return p, settings.Errorf("cooldown", "must be 0 or more; got %s", s.Cooldown)
	}
	return p, p.Validate()
}

// Flagged names the flag a user error came from (settings.Flagged).
func Flagged(err error, flag string) error { return settings.Flagged(err, flag) }

// ConnLimit is --connections: the most connections open at once, a whole
// number 1 or more; 0 is "not given". It checks its text as a flag and a
// plan key alike (flag.Value, encoding.TextUnmarshaler).
type ConnLimit int

// Set parses n, refusing what is not a whole number of 1 or more.
func (c *ConnLimit) Set(text string) error {
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 1 {
		return tare.Errorf(tare.EINVALID, "connections must be a whole number of 1 or more, like 8 (leave it out for as many as requests in flight); got %q", text)
	}
	*c = ConnLimit(n)
	return nil
}

// UnmarshalText is Set, for plan files.
func (c *ConnLimit) UnmarshalText(b []byte) error { return c.Set(string(b)) }

// String is the number, "" when not given.
func (c *ConnLimit) String() string {
	if *c == 0 {
		return ""
	}
	return strconv.Itoa(int(*c))
}

// Type names it in --help as a whole number.
func (c *ConnLimit) Type() string { return "int" }
