package session

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/queueurl"
	"github.com/tare-dev/tare/servermetrics"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/store"
)

// Prepared is a spec ready to measure again and again: the target, the
// judging and the sampling, checked and built once.
type Prepared struct {
	Spec    *Spec
	Target  tare.Target
	Name    string // what is loaded, secrets redacted
	Judging Judging
	// Sampling is the host sampler's configuration, the system under test
	// in it when it was found (SUTFoundBy says how).
	Sampling   host.Config
	SUTFoundBy string
	// Queue is the queue target; nil for the others.
	Queue *queue.Target
	// Mix is the targets file's requests; nil for the others.
	Mix   *httptarget.Mix
	depth func(context.Context) (float64, error)
	// server reads a model target's server metrics; nil when none.
	server *servermetrics.Scraper
	close  func()
}

// Release closes the target's connections and stops its readers.
func (p *Prepared) Release() { p.close() }

// Prepare checks spec and builds what every window of it shares; command
// names the command in messages ("tare run").
func Prepare(ctx context.Context, spec *Spec, command string) (*Prepared, error) {
	if _, err := spec.Load.Schedule(); err != nil {
		return nil, err
	}
	j, err := spec.Judge.Judging()
	if err != nil {
		return nil, err
	}
	if t := spec.Target; t.URL+t.Targets+t.Model+t.Queue != "" {
		if err := j.SLO.ForTarget(t.URL != "" || t.Targets != ""); err != nil {
			return nil, Flagged(err, "slo")
		}
	}
	sampling, err := spec.Host.Sampling(os.Getpid())
	if err != nil {
		return nil, err
	}
	p, err := build(ctx, &spec.Target, command, &spec.Load)
	if err != nil {
		return nil, err
	}
	p.Spec, p.Judging, p.Sampling = spec, j, sampling
	first := cmp.Or(spec.Target.URL, spec.Target.Model)
	if p.Mix != nil {
		first = p.Mix.URL(0)
	}
	if p.SUTFoundBy, err = spec.Host.FindSUT(&p.Sampling, first, spec.Target.UnixSocket); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// build checks the target's settings and builds it.
func build(ctx context.Context, t *TargetSpec, command string, l *LoadSpec) (*Prepared, error) {
	if t.Timeout <= 0 {
		return nil, settings.Errorf("timeout", "must be positive, like 30s; got %s", t.Timeout)
	}
	if err := t.checkConnections(); err != nil {
		return nil, err
	}
	header, err := t.header()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := t.tlsConfig()
	if err != nil {
		return nil, err
	}
	p, err := buildTarget(ctx, t, command, l, header, tlsConfig)
	if err != nil {
		return nil, err
	}
	if err := t.checkSecure(ctx, p.Target, tlsConfig); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// buildTarget builds the target the settings name.
func buildTarget(ctx context.Context, t *TargetSpec, command string, l *LoadSpec, header http.Header, tlsConfig *tls.Config) (*Prepared, error) {
	if t.Targets != "" {
		return buildMix(t, header, l, tlsConfig)
	}
	if t.TargetsOrder {
		return nil, settings.Errorf("targets-order", "needs %s FILE", settings.Name("targets"))
	}
	if err := t.checkModelLoad(l); err != nil {
		return nil, err
	}
	ps, err := t.PromptSource(t.Model != "" || t.Queue != "", l.Seed)
	if err != nil {
		return nil, err
	}
	given := 0
	for _, s := range []string{t.URL, t.Model, t.Queue} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, settings.Errorf("", "give one target: %s for HTTP, %s for a model endpoint or %s for a job queue", settings.Name("url"), settings.Name("model"), settings.Name("queue"))
	case t.MaxTokens < 0:
		return nil, settings.Errorf("max-tokens", "must be 0 or more; got %d", t.MaxTokens)
	case t.Redirects < 0:
		return nil, settings.Errorf("redirects", "must be 0 (follow none) or more, like %d; got %d", httptarget.DefaultRedirects, t.Redirects)
	case t.Queue != "":
		if t.JobTimeout <= 0 {
			return nil, settings.Errorf("job-timeout", "must be positive, like 5m; got %s", t.JobTimeout)
		}
		if t.WaitWorkers < 0 {
			return nil, settings.Errorf("wait-workers", "must be 0 (do not check) or more, like 10s; got %s", t.WaitWorkers)
		}
		args, err := queue.ParseJobArgsFor(t.Queue, t.JobArgs, t.JobKwargs)
		if err != nil {
			return nil, err
		}
		b, err := queueurl.Open(ctx, t.Queue, t.QueueName, queue.FrameworkConfig{Args: args, Timeout: t.JobTimeout})
		if err != nil {
			return nil, Flagged(err, "queue")
		}
		return QueueTarget(b, queue.TargetConfig{Prompt: t.Prompt, MaxTokens: t.MaxTokens, Timeout: t.JobTimeout, Prompts: ps})
	case t.Model != "":
		return buildModel(ctx, t, l, ps, header, tlsConfig)
	case t.URL != "":
		return buildHTTP(t, l, header, tlsConfig)
	}
	return nil, settings.Errorf("", "%s needs a target: give %s http://HOST:PORT/PATH, %s http://HOST:PORT/v1 or %s redis://HOST:6379/0", command, settings.Name("url"), settings.Name("model"), settings.Name("queue"))
}

// buildModel is the model endpoint's target: one call a request, or a
// conversation's turns.
func buildModel(ctx context.Context, t *TargetSpec, l *LoadSpec, ps tare.Prompts, header http.Header, tlsConfig *tls.Config) (*Prepared, error) {
	mp, err := t.modelLoad(l, ps)
	if err != nil {
		return nil, err
	}
	c, err := openai.New(openai.Config{URL: t.Model, Endpoint: t.ModelLoad.Endpoint, Model: t.ModelName, Prompt: t.Prompt, MaxTokens: t.MaxTokens,
		APIKey: APIKey(), Timeout: t.Timeout, NoStream: t.NoStream, Header: header, Prompts: mp.prompts, Class: mp.class,
		UnixSocket: t.UnixSocket, MaxConns: int(t.Connections), TLS: tlsConfig})
	if err != nil {
		return nil, Flagged(err, "model")
	}
	if err := c.ChooseModel(ctx); err != nil {
		c.Close()
		return nil, Flagged(err, "model-name")
	}
	server, err := modelMetrics(ctx, t, tlsConfig)
	if err != nil {
		c.Close()
		return nil, err
	}
	if mp.conv != nil {
		if c.Endpoint() != openai.EndpointChat {
			c.Close()
			return nil, settings.Errorf("", "conversations (a %s file of them) go to chat/completions, which takes the answers as messages: drop %s %s, or give %s", settings.Name("prompts"), settings.Name("endpoint"), c.Endpoint(), settings.Name("first-turn-only"))
		}
		cv := openai.NewConversation(c, *mp.conv)
		return &Prepared{Target: cv, Name: cv.String(), close: cv.Close, server: server}, nil
	}
	return &Prepared{Target: c, Name: c.String(), close: c.Close, server: server}, nil
}

// buildHTTP is the HTTP target.
func buildHTTP(t *TargetSpec, l *LoadSpec, header http.Header, tlsConfig *tls.Config) (*Prepared, error) {
	cfg := httptarget.Config{Method: t.Method, URL: t.URL, Header: header, Timeout: t.Timeout, Insecure: t.Insecure, MaxConns: t.maxConns(l),
		UnixSocket: t.UnixSocket, NetHTTP: t.NetHTTP, Redirects: t.Redirects, CrossHost: t.CrossHost,
		TLS: tlsConfig, HTTP2: t.HTTP2, H2C: t.H2C, MaxStreams: t.MaxStreams, H2Loop: t.h2Loop()}
	if t.Redirects == 0 {
		cfg.Redirects = httptarget.NoRedirects
	}
	if t.Body != "" {
		var err error
		if cfg.Body, err = httptarget.ReadBody(t.Body); err != nil {
			return nil, Flagged(err, "body")
		}
	}
	h, err := httptarget.New(cfg)
	if err != nil {
		return nil, Flagged(err, "url")
	}
	return &Prepared{Target: h, Name: h.String(), close: h.Close}, nil
}

// buildMix is the mix of a targets file's requests.
func buildMix(t *TargetSpec, header http.Header, l *LoadSpec, tlsConfig *tls.Config) (*Prepared, error) {
	switch {
	case t.URL != "" || t.Model != "" || t.Queue != "":
		return nil, settings.Errorf("targets", "names the requests: drop %s, %s and %s", settings.Name("url"), settings.Name("model"), settings.Name("queue"))
	case t.Body != "" || t.Method != "":
		return nil, settings.Errorf("targets", "sets each request's method and body: drop %s and %s (-X), and write them in the file", settings.Name("body"), settings.Name("method"))
	case t.Redirects < 0:
		return nil, settings.Errorf("redirects", "must be 0 (follow none) or more, like %d; got %d", httptarget.DefaultRedirects, t.Redirects)
	}
	reqs, err := httptarget.ReadTargets(t.Targets)
	if err != nil {
		return nil, Flagged(err, "targets")
	}
	base := httptarget.Config{Header: header, Timeout: t.Timeout, Insecure: t.Insecure, MaxConns: t.maxConns(l), UnixSocket: t.UnixSocket,
		NetHTTP: t.NetHTTP, Redirects: t.Redirects, CrossHost: t.CrossHost, TLS: tlsConfig, HTTP2: t.HTTP2, H2C: t.H2C, MaxStreams: t.MaxStreams, H2Loop: t.h2Loop()}
	if t.Redirects == 0 {
		base.Redirects = httptarget.NoRedirects
	}
	m, err := httptarget.NewMix(t.Targets, reqs, base, t.TargetsOrder, l.Seed)
	if err != nil {
		return nil, Flagged(err, "targets")
	}
	return &Prepared{Target: m, Name: m.String(), close: m.Close, Mix: m}, nil
}

// checkConnections checks --unix-socket and --connections: for an HTTP or
// model target only, and a socket that is one.
func (t *TargetSpec) checkConnections() error {
	if t.Queue != "" && t.URL == "" && t.Model == "" && t.Targets == "" {
		switch {
		case t.UnixSocket != "":
			return settings.Errorf("unix-socket", "is for %s, %s and %s: a %s names its Redis in its URL; drop %s", settings.Name("url"), settings.Name("targets"), settings.Name("model"), settings.Name("queue"), settings.Name("unix-socket"))
		case t.Connections > 0:
			return settings.Errorf("connections", "is for %s, %s and %s: a %s target keeps one Redis connection pool of its own; drop %s", settings.Name("url"), settings.Name("targets"), settings.Name("model"), settings.Name("queue"), settings.Name("connections"))
		}
	}
	if t.UnixSocket == "" {
		return nil
	}
	const like = "like /run/gunicorn.sock"
	if strings.HasPrefix(t.UnixSocket, "@") {
		return settings.Errorf("unix-socket", "%q: an abstract socket name is not supported; give the path of a socket file, %s", t.UnixSocket, like)
	}
	fi, err := os.Stat(t.UnixSocket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return settings.Errorf("unix-socket", "%q: no such file; give the path of the socket the server listens on, %s", t.UnixSocket, like)
	case err != nil:
		return settings.Errorf("unix-socket", "%q: %v", t.UnixSocket, errors.Unwrap(err))
	case fi.Mode()&fs.ModeSocket == 0:
		what := "a regular file"
		if fi.IsDir() {
			what = "a directory"
		} else if !fi.Mode().IsRegular() {
			what = "not a socket (" + fi.Mode().Type().String() + ")"
		}
		return settings.Errorf("unix-socket", "%q is %s, not a Unix socket; give the path of the socket the server listens on, %s", t.UnixSocket, what, like)
	}
	return nil
}

// maxConns is the HTTP target's connection limit: --connections, or as
// many as requests in flight.
func (t *TargetSpec) maxConns(l *LoadSpec) int {
	if t.Connections > 0 {
		return int(t.Connections)
	}
	return l.MaxInFlight
}

// QueueTarget loads a queue through b: one job per arrival, results matched
// by job id, depth sampled per tick and, once a second at most, the
// registered workers counted, so a run whose workers all left says so.
// Releasing it closes the broker.
func QueueTarget(b queue.Source, cfg queue.TargetConfig) (*Prepared, error) {
	t, err := queue.NewTarget(b, cfg)
	if err != nil {
		b.Close()
		return nil, err
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
	return &Prepared{Target: t, Name: t.String(), close: release, depth: depth, Queue: t}, nil
}

// Depth reads the queue's depth; nil for targets without a queue.
func (p *Prepared) Depth() func(context.Context) (float64, error) { return p.depth }

// Window is one window of the spec at rate r (the spec's rate when r is
// 0): the run, its schedule and everything Measure needs but the progress
// hooks.
func (p *Prepared) Window(st tare.Store, run tare.Run, r arrival.Rate, version string) (Config, error) {
	l := p.Spec.Load
	if r > 0 {
		l.Rate = r
	}
	return p.WindowOf(st, run, l, version)
}

// WindowOf is one window of the spec's target, sampling and judging
// under load l instead of the spec's (an A/B trial: its own length and
// seed).
func (p *Prepared) WindowOf(st tare.Store, run tare.Run, l LoadSpec, version string) (Config, error) {
	run.Version = version
	if run.Target == "" {
		run.Target = p.Name
	}
	if p.Queue != nil && run.ID == "" {
		// A queue run has an id even unstored: its jobs carry it.
		run.ID = store.NewRunID()
	}
	w := Window{Run: run, Load: &l, Target: p.Target, Depth: p.depth, Connections: int(p.Spec.Target.Connections),
		Sampling: p.Sampling, SUTFoundBy: p.SUTFoundBy, Judging: p.Judging, Store: st}
	if p.Mix != nil {
		w.Mix = p.Mix // a nil *httptarget.Mix is not a nil TargetMix
	}
	cfg, err := w.Config()
	if err == nil && p.server != nil {
		serverWindow(&cfg, p.server)
	}
	return cfg, err
}

// Shard makes cfg, a window of p's load, this shard's part of it: its
// share of the arrivals, at its share of the rate (of every stage's).
func (p *Prepared) Shard(cfg *Config, sh arrival.Shard) error {
	return ShardOf(cfg, p.Spec.Load, sh)
}

// ShardOf makes cfg, a window of load l, shard sh's part of it.
func ShardOf(cfg *Config, l LoadSpec, sh arrival.Shard) error {
	sched, err := l.Split(sh)
	if err != nil {
		return err
	}
	// The whole schedule, which a merged run describes itself by.
	if cfg.Run.Config == nil {
		cfg.Run.Config = map[string]string{}
	}
	cfg.Run.Config[tare.ConfigShardArrival] = cfg.Run.Arrival
	cfg.Schedule, cfg.Run.Arrival = sched, sched.String()
	cfg.Rate /= float64(sh.Count)
	if len(cfg.Stages) > 0 {
		cfg.Stages = cfg.Stages.Scaled(1 / float64(sh.Count))
	}
	return nil
}

// AwaitWorkers waits, before the load, up to WaitWorkers for a worker
// registered on the queue, when the target is one: a queue nobody serves
// would time every job out and judge the timeouts. It returns an error
// (exit 2) naming the queue and how to start a worker; progress, when not
// nil, hears that it is waiting. The workers registered from this host
// become the system under test, unless it was found already.
func (p *Prepared) AwaitWorkers(ctx context.Context, progress io.Writer) error {
	if p.Queue == nil {
		return nil
	}
	ws, err := awaitWorkers(ctx, &p.Spec.Target, p.Queue, progress)
	if err != nil || p.SUTFoundBy != "" {
		return err
	}
	LocateWorkers(p.Sampling.ProcRoot, ws)
	hostname, _ := os.Hostname()
	for _, w := range ws {
		if w.Host == hostname && w.PID > 0 && w.PID != os.Getpid() {
			if host.Exists("", w.PID) {
				p.Sampling.SUT = append(p.Sampling.SUT, w.PID)
			}
		}
	}
	if len(p.Sampling.SUT) > 0 {
		p.SUTFoundBy = fmt.Sprintf("workers registered on queue %q from this host", p.Queue.Queue())
	}
	return nil
}

// LocateWorkers fills in the pid and host name of the workers that
// register none (BullMQ's) but hold their connection to the broker from
// this host: the process holding that TCP connection under procRoot
// (host.DefaultProcRoot when ""), the lowest pid when several share it (a
// parent and the children it forked). Workers it cannot find keep pid 0.
func LocateWorkers(procRoot string, ws []queue.WorkerInfo) {
	var conns []host.TCPConn
	at := map[int]host.TCPConn{}
	for i, w := range ws {
		if w.PID != 0 || w.ClientAddr == "" {
			continue
		}
		local, err := netip.ParseAddrPort(w.ClientAddr)
		if err != nil {
			continue // a Unix socket's client, or not an address
		}
		c := host.TCPConn{Local: local}
		c.Remote, _ = netip.ParseAddrPort(w.ServerAddr) // none before Redis 6.2: any peer
		conns = append(conns, c)
		at[i] = c
	}
	if len(conns) == 0 {
		return
	}
	found, err := host.ConnectionPIDs(cmp.Or(procRoot, host.DefaultProcRoot), conns)
	if err != nil {
		return // not found, as when the worker runs elsewhere
	}
	hostname, _ := os.Hostname()
	for i, c := range at {
		if pids := found[c]; len(pids) > 0 {
			ws[i].PID, ws[i].Host = pids[0], hostname
		}
	}
}

func awaitWorkers(ctx context.Context, t *TargetSpec, q *queue.Target, progress io.Writer) ([]queue.WorkerInfo, error) {
	if t.WaitWorkers <= 0 {
		ws, _ := q.Workers(ctx) // only to find those on this host: none is fine
		return ws, nil
	}
	deadline := time.Now().Add(t.WaitWorkers)
	said := false
	for {
		ws, err := q.Workers(ctx)
		if err != nil {
			return nil, tare.Errorf(tare.EUNAVAILABLE, "list the workers of queue %q at %s: %w", t.QueueName, queue.RedactURL(t.Queue), err)
		}
		if len(ws) > 0 {
			// A task the workers do not know would fail every job.
			if err := q.CheckTask(ctx); err != nil {
				return nil, Flagged(err, "queue")
			}
			return ws, nil
		}
		if hint := q.WorkerHint(); hint != "" && time.Now().After(deadline) {
			return nil, tare.SettingErrorf(tare.EUNAVAILABLE, "", "no worker serves %s at %s: none seen within %s %s; %s, and run again (or %s 0 for workers that send no heartbeat)",
				q, queue.RedactURL(t.Queue), settings.Name("wait-workers"), t.WaitWorkers, hint, settings.Name("wait-workers"))
		}
		if time.Now().After(deadline) {
			// tare worker's flags are a command to run, not settings of the plan.
			return nil, tare.SettingErrorf(tare.EUNAVAILABLE, "", "no worker serves queue %q at %s: none registered within %s %s; start one with `tare worker --queue %s --queue-name %s --model http://HOST:PORT/v1` (or your own, docs/job-protocol.md) and run again",
				t.QueueName, queue.RedactURL(t.Queue), settings.Name("wait-workers"), t.WaitWorkers, queue.RedactURL(t.Queue), t.QueueName)
		}
		if !said && progress != nil {
			fmt.Fprintf(progress, "tare: waiting up to %s for a worker on queue %q (--wait-workers)\n", t.WaitWorkers, q.Queue())
			said = true
		}
		if tare.Sleep(ctx, min(200*time.Millisecond, time.Until(deadline)+time.Millisecond)) != nil {
			return nil, tare.Errorf(tare.EUNAVAILABLE, "interrupted while waiting for a worker on queue %q: no load was sent", t.QueueName)
		}
	}
}

// APIKey is the model endpoint's key, from the environment only: a flag
// would leave it in shell history and process listings.
func APIKey() string {
	if k := os.Getenv("TARE_API_KEY"); k != "" {
		return k
	}
	return os.Getenv("OPENAI_API_KEY")
}
