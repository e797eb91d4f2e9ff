package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/rabbitmq"
)

// The protocols a --queue URL can speak, chosen by its scheme as database
// URLs choose their driver.
const (
	ProtocolTare   = "tare"   // redis://, rediss://: tare's own job protocol (docs/job-protocol.md)
	ProtocolCelery = "celery" // celery+redis://, celery+amqp://: Celery task messages (docs/celery.md)
	ProtocolRQ     = "rq"     // rq+redis://: RQ jobs (docs/rq.md)
	ProtocolBullMQ = "bullmq" // bullmq+redis://: BullMQ jobs (docs/bullmq.md)
)

// URLForms explains the --queue URL forms, for help texts and errors.
const URLForms = `redis://HOST:6379/0 (tare's own job protocol: tare worker, or yours)
celery+redis://HOST:6379/0?queue=celery&task=tasks.answer (Celery task messages, JSON)
celery+amqp://USER:PASSWORD@HOST:5672/VHOST?queue=celery&task=tasks.answer&backend=redis://HOST:6379/0 (Celery on RabbitMQ; backend: the worker's result_backend, redis:// or rpc://)
rq+redis://HOST:6379/0?queue=default&func=tasks.answer (RQ jobs, JSON serializer)
bullmq+redis://HOST:6379/0?queue=agents&name=answer (BullMQ 5 jobs, as Queue.add writes them)`

// ProtocolOf names the protocol rawURL speaks by its scheme: "celery" for
// celery+redis:// and celery+amqp:// (or celery+rediss://,
// celery+amqps://), "rq" for rq+redis://, "bullmq" for bullmq+redis://,
// and "tare" for anything else, which OpenRedis then checks.
func ProtocolOf(rawURL string) string {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch strings.ToLower(scheme) {
	case "celery+redis", "celery+rediss", "celery+amqp", "celery+amqps":
		return ProtocolCelery
	case "rq+redis", "rq+rediss":
		return ProtocolRQ
	case "bullmq+redis", "bullmq+rediss":
		return ProtocolBullMQ
	}
	return ProtocolTare
}

// Kinds a framework's job fails with, beside KindTimeout and
// KindUnavailable.
const (
	// KindUnknownTask: the worker does not know the task (Celery's
	// NotRegistered) or could not import the function (RQ).
	KindUnknownTask = "unknown task"
	// KindRaisedPrefix starts the kind of a job whose task raised: "task
	// raised ValueError".
	KindRaisedPrefix = "task raised "
	// KindTaskFailed: the job failed without an exception type (an RQ
	// work horse that was killed).
	KindTaskFailed = "task failed"
	// KindRevoked: the job was revoked (Celery), stopped or canceled (RQ).
	KindRevoked = "task revoked"
	// KindUnconfirmed: the broker did not confirm the job's message (an
	// AMQP nack, or the connection closed before the confirm): it may or
	// may not be in the queue, so it is neither waited for nor counted as
	// never sent.
	KindUnconfirmed = "publish not confirmed"
	// KindUnroutable: the broker had no queue to put the job's message in
	// (AMQP: the queue does not exist, and returned the message).
	KindUnroutable = "no such queue"
)

// ErrUnconfirmed is what Source.Enqueue returns, wrapped, when the broker
// did not confirm the job's message; the Target counts the job
// KindUnconfirmed.
var ErrUnconfirmed = errors.New("publish not confirmed by the broker")

// raisedKind is the kind of a job whose task raised exception type exc.
func raisedKind(exc string) string {
	if exc == "" {
		return KindTaskFailed
	}
	return KindRaisedPrefix + exc
}

// FrameworkConfig is what a job of a Celery or RQ queue carries: the
// task's arguments, in which "{{seq}}", "{{id}}" and "{{prompt}}" are
// replaced per job (see JobArgs).
type FrameworkConfig struct {
	Args JobArgs
	// Timeout is the job's time limit, told to RQ as the job's timeout and
	// its queued-job TTL, and to Celery as the task's expiry; 0 leaves the
	// framework's default.
	Timeout time.Duration
}

// frameworkURL is a parsed celery+redis://, celery+amqp://, rq+redis:// or
// bullmq+redis:// URL.
type frameworkURL struct {
	protocol string
	redis    string // the broker's redis:// URL, without tare's parameters; "" for an AMQP broker
	amqp     string // the broker's amqp:// URL, without tare's parameters; "" for a Redis broker
	backend  string // Celery's result backend, a redis:// URL; redis when not given
	queue    string
	task     string // Celery's task name, RQ's function, BullMQ's job name
	prefix   string // BullMQ's key prefix ("bull")
	db       int    // the Redis broker's database
}

// broker is the broker's URL, without tare's parameters.
func (f frameworkURL) broker() string { return cmp.Or(f.redis, f.amqp) }

// rpc reports whether the result backend is rpc://: task states sent back
// as messages to the queue the task message names (AMQP only).
func (f frameworkURL) rpc() bool { return f.backend == "rpc://" }

// taskRE is a Python dotted name: what Celery task names and RQ function
// paths are in practice.
func validTask(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
			if !ok {
				return false
			}
		}
	}
	return true
}

// validJobName is a BullMQ job name tare accepts: any printable text up
// to 256 bytes (BullMQ itself takes any string; the worker dispatches on
// it).
func validJobName(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// prefixRE is a BullMQ key prefix: "bull", or with a Redis Cluster hash
// tag, "{bull}".
var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._{}-]{1,64}$`)

// frameworkForms are, by protocol, the parameter naming the job's task and
// the URL form errors show.
var frameworkForms = map[string]struct{ param, what, form string }{
	ProtocolCelery: {"task", "task name the worker runs, a dotted Python name", "celery+redis://HOST:6379/0?queue=celery&task=tasks.answer"},
	ProtocolRQ:     {"func", "function the worker runs, a dotted Python name", "rq+redis://HOST:6379/0?queue=default&func=tasks.answer"},
	ProtocolBullMQ: {"name", "job name, what your processor dispatches on (job.name)", "bullmq+redis://HOST:6379/0?queue=agents&name=answer"},
}

// parseFrameworkURL parses rawURL for protocol p; needTask says the task
// must be named (cleanup needs none). Errors are *tare.Error with code
// EINVALID, naming what is wrong and the form that is right, with any
// password redacted.
func parseFrameworkURL(rawURL, p string, needTask bool) (frameworkURL, error) {
	scheme, _, _ := strings.Cut(strings.ToLower(rawURL), "://")
	amqpBroker := p == ProtocolCelery && (scheme == "celery+amqp" || scheme == "celery+amqps")
	ff := frameworkForms[p]
	if amqpBroker {
		ff.form = "celery+amqp://USER:PASSWORD@HOST:5672/VHOST?queue=celery&task=tasks.answer&backend=redis://HOST:6379/0"
	}
	bad := func(format string, a ...any) error {
		return tare.Errorf(tare.EINVALID, "queue URL %q: %s: want %s", RedactURL(rawURL), fmt.Sprintf(format, a...), ff.form)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return frameworkURL{}, bad("%v", err)
	}
	q := u.Query()
	f := frameworkURL{protocol: p, queue: q.Get("queue"), task: q.Get(ff.param), backend: q.Get("backend")}
	own := []string{"queue", ff.param, "backend"}
	if p == ProtocolBullMQ {
		f.prefix, own = cmp.Or(q.Get("prefix"), "bull"), append(own, "prefix")
	}
	for _, k := range own {
		q.Del(k)
	}
	if f.queue == "" {
		f.queue = map[string]string{ProtocolCelery: "celery", ProtocolRQ: "default"}[p]
	}
	valid := validTask
	if p == ProtocolBullMQ {
		valid = validJobName
	}
	switch {
	case f.queue == "":
		return frameworkURL{}, bad("no queue: give the queue the worker consumes, queue=NAME as in new Worker(\"NAME\", …)")
	case (needTask || f.task != "") && !valid(f.task):
		return frameworkURL{}, bad("%s=%q: give the %s", ff.param, f.task, ff.what)
	case !nameRE.MatchString(f.queue):
		return frameworkURL{}, bad("queue=%q: want 1 to 64 letters, digits, '.', '_' or '-'", f.queue)
	case p == ProtocolBullMQ && !prefixRE.MatchString(f.prefix):
		return frameworkURL{}, bad("prefix=%q: want BullMQ's key prefix, 1 to 64 letters, digits, '.', '_', '-', '{' or '}' (default bull)", f.prefix)
	case p == ProtocolBullMQ && f.backend != "":
		return frameworkURL{}, bad("backend=%q: a BullMQ job keeps its result in its own hash, drop backend", RedactURL(f.backend))
	}
	_, scheme, _ = strings.Cut(u.Scheme, "+")
	u.Scheme, u.RawQuery = scheme, q.Encode()
	if amqpBroker {
		return parseAMQPBroker(f, u.String(), bad)
	}
	f.redis = u.String()
	opt, err := parseURL(f.redis)
	if err != nil {
		return frameworkURL{}, bad("%s", tare.ErrorMessage(err))
	}
	f.db = opt.DB
	if f.backend == "" {
		f.backend = f.redis
	} else if _, err := parseURL(f.backend); err != nil {
		return frameworkURL{}, bad("backend: %s", tare.ErrorMessage(err))
	}
	return f, nil
}

// parseAMQPBroker completes f, a Celery queue on the AMQP broker at
// broker: its result backend must be named (RabbitMQ holds no task
// state), a Redis, or rpc:// (the states sent back as messages).
func parseAMQPBroker(f frameworkURL, broker string, bad func(string, ...any) error) (frameworkURL, error) {
	if _, _, err := rabbitmq.ParseURL(broker); err != nil {
		return frameworkURL{}, bad("%v", err)
	}
	f.amqp = broker
	scheme, _, found := strings.Cut(strings.ToLower(f.backend), "://")
	switch {
	case f.backend == "":
		return frameworkURL{}, bad("no backend: give the worker's result_backend, backend=redis://HOST:6379/0 or backend=rpc://, where tare reads each task's state")
	case !found || strings.ContainsFunc(scheme, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+') }):
		return frameworkURL{}, bad("backend: want a URL, redis://HOST:6379/0 (the worker's result_backend)") // not repeated: a password, perhaps
	case scheme == "rpc":
		if f.backend != "rpc://" {
			return frameworkURL{}, bad("backend: want rpc://, nothing after it (the replies come to tare's own queue)")
		}
		return f, nil
	case scheme != "redis" && scheme != "rediss":
		return frameworkURL{}, bad("backend=%s://…: tare reads task states from a Redis result backend (the worker's result_backend = \"redis://…\") or from rpc:// replies; the others are not supported", scheme)
	}
	if _, err := parseURL(f.backend); err != nil {
		return frameworkURL{}, bad("backend: %s", tare.ErrorMessage(err))
	}
	return f, nil
}

// OpenSource opens the queue rawURL names, by its scheme (ProtocolOf):
// tare's own protocol on queue name for redis://, a Celery or RQ queue,
// named in the URL, for the others, whose jobs carry fw's arguments. Close
// closes it. A bad URL is a *tare.Error with code EINVALID; a server that
// does not answer, one with code EUNAVAILABLE.
func OpenSource(ctx context.Context, rawURL, name string, fw FrameworkConfig) (Source, error) {
	switch ProtocolOf(rawURL) {
	case ProtocolCelery:
		return OpenCelery(ctx, rawURL, fw)
	case ProtocolRQ:
		return OpenRQ(ctx, rawURL, fw)
	case ProtocolBullMQ:
		return OpenBullMQ(ctx, rawURL, fw)
	}
	return OpenRedis(ctx, rawURL, name)
}

// Probe opens the queue rawURL names (as OpenSource) and waits up to wait
// for a worker, for a pre-flight check: it returns a line naming the
// queue and its workers, or an error saying what is wrong (a bad URL, a
// task the workers said they do not know: EINVALID; a server that does
// not answer: EUNAVAILABLE) or how to start a worker when none showed
// (EUNAVAILABLE).
func Probe(ctx context.Context, rawURL, name string, wait time.Duration) (string, error) {
	return ProbeLocating(ctx, rawURL, name, wait, nil)
}

// ProbeLocating is Probe, with locate (when not nil) filling in the pid
// and host of the workers it finds on this host by their connections,
// for those that register none (BullMQ's: see WorkerInfo.ClientAddr).
func ProbeLocating(ctx context.Context, rawURL, name string, wait time.Duration, locate func([]WorkerInfo)) (string, error) {
	src, err := OpenSource(ctx, rawURL, name, FrameworkConfig{})
	if err != nil {
		return "", err
	}
	defer src.Close()
	deadline := time.Now().Add(wait)
	for {
		ws, err := src.Workers(ctx)
		if err != nil {
			return "", tare.Errorf(tare.EUNAVAILABLE, "list the workers of queue %q at %s: %w", src.Queue(), RedactURL(rawURL), err)
		}
		if len(ws) > 0 {
			if locate != nil {
				locate(ws)
			}
			if c, ok := src.(taskChecker); ok {
				if err := c.CheckTask(ctx); err != nil {
					return "", err
				}
			}
			names := make([]string, len(ws))
			for i, w := range ws {
				names[i] = fmt.Sprintf("%s (pid %d on %s)", w.Name, w.PID, w.Host)
				if w.PID == 0 && w.ClientAddr != "" {
					names[i] = fmt.Sprintf("%s (connected from %s, not found on this host)", w.Name, w.ClientAddr)
				}
			}
			what := "queue " + src.Queue()
			if s, ok := src.(fmt.Stringer); ok {
				what = s.String()
			}
			return fmt.Sprintf("%s at %s: %d %s: %s", what, RedactURL(rawURL), len(ws), map[bool]string{true: "worker", false: "workers"}[len(ws) == 1], strings.Join(names, ", ")), nil
		}
		if time.Now().After(deadline) {
			hint := "start one with `tare worker --queue URL --queue-name NAME --model URL`"
			if h, ok := src.(hinter); ok {
				hint = h.WorkerHint()
			}
			return "", tare.Errorf(tare.EUNAVAILABLE, "no worker serves queue %q at %s within %s: %s", src.Queue(), RedactURL(rawURL), wait, hint)
		}
		if tare.Sleep(ctx, 200*time.Millisecond) != nil {
			return "", ctx.Err()
		}
	}
}

// dialFramework connects to the broker of f and checks that it answers.
func dialFramework(ctx context.Context, f frameworkURL, rawURL string) (*redis.Client, error) {
	opt, _ := parseURL(f.redis) // checked by parseFrameworkURL
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "redis at %s: %w", RedactURL(rawURL), err)
	}
	return rdb, nil
}

// frameworkJobID is the framework's id of job j: "tare-<run>-<seq>", so
// tare cleanup finds exactly the jobs tare made by their prefix.
func frameworkJobID(j Job) string { return jobIDPrefix + j.RunID + "-" + j.ID }

const jobIDPrefix = "tare-"

// JobArgs are a framework job's positional and keyword arguments, as JSON
// templates: every string in them has "{{seq}}" replaced by the job's
// number, "{{id}}" by its framework id and "{{prompt}}" by its prompt; a
// string that is exactly "{{seq}}" becomes the number itself.
type JobArgs struct {
	args   []any
	kwargs map[string]any
	data   any // a BullMQ job's data (ParseJobData); nil for none
}

// ParseJobArgs parses --job-args (a JSON list, "" for none) and
// --job-kwargs (a JSON object, "" for none); a bad one is a *tare.Error
// with code EINVALID naming the flag.
func ParseJobArgs(args, kwargs string) (JobArgs, error) {
	var a JobArgs
	if strings.TrimSpace(args) != "" {
		if err := json.Unmarshal([]byte(args), &a.args); err != nil || a.args == nil {
			return JobArgs{}, tare.Errorf(tare.EINVALID, "--job-args %q: want a JSON list, like '[\"{{seq}}\", \"hello\"]'", args)
		}
	}
	if strings.TrimSpace(kwargs) != "" {
		if err := json.Unmarshal([]byte(kwargs), &a.kwargs); err != nil || a.kwargs == nil {
			return JobArgs{}, tare.Errorf(tare.EINVALID, "--job-kwargs %q: want a JSON object, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", kwargs)
		}
	}
	return a, nil
}

// ParseJobData parses a BullMQ job's data: --job-args, any JSON value
// (an object, usually), "" for none; --job-kwargs must be "", as a
// BullMQ job has one data value, not arguments. A bad one is a
// *tare.Error with code EINVALID naming the flag.
func ParseJobData(args, kwargs string) (JobArgs, error) {
	if strings.TrimSpace(kwargs) != "" {
		return JobArgs{}, tare.Errorf(tare.EINVALID, "--job-kwargs %q: a BullMQ job has one data value, not keyword arguments: give it with --job-args, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", kwargs)
	}
	var a JobArgs
	if strings.TrimSpace(args) != "" {
		if err := json.Unmarshal([]byte(args), &a.data); err != nil {
			return JobArgs{}, tare.Errorf(tare.EINVALID, "--job-args %q: want the job's data as JSON, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", args)
		}
	}
	return a, nil
}

// ParseJobArgsFor parses --job-args and --job-kwargs for the protocol of
// the queue URL rawURL: a BullMQ job's data (ParseJobData), or a Celery
// or RQ task's arguments (ParseJobArgs).
func ParseJobArgsFor(rawURL, args, kwargs string) (JobArgs, error) {
	if ProtocolOf(rawURL) == ProtocolBullMQ {
		return ParseJobData(args, kwargs)
	}
	return ParseJobArgs(args, kwargs)
}

// expandData returns the data of one job, {} when none was given (what
// BullMQ stores for data left undefined).
func (a JobArgs) expandData(j Job, id string) any {
	if a.data == nil {
		return map[string]any{}
	}
	return a.walker(j, id)(a.data)
}

// walker returns the function that replaces the placeholders in a JSON
// value for one job, copying what it changes.
func (a JobArgs) walker(j Job, id string) func(any) any {
	seq, _ := strconv.ParseUint(j.ID, 10, 64)
	r := strings.NewReplacer("{{seq}}", j.ID, "{{id}}", id, "{{prompt}}", j.Prompt)
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if v == "{{seq}}" {
				return seq
			}
			return r.Replace(v)
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = walk(x)
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				out[k] = walk(x)
			}
			return out
		}
		return v
	}
	return walk
}

// expand returns the arguments of one job: never nil, so they encode as
// [] and {}.
func (a JobArgs) expand(j Job, id string) ([]any, map[string]any) {
	walk := a.walker(j, id)
	args := walk(append([]any{}, a.args...)).([]any)
	kwargs := map[string]any{}
	if a.kwargs != nil {
		kwargs = walk(a.kwargs).(map[string]any)
	}
	return args, kwargs
}

// pendingJob is one job of a framework queue that has no final state yet.
type pendingJob struct {
	job     Job
	started time.Time // when the framework said it started; zero until then
	exact   bool      // started is the worker's own stamp, not when tare heard of the start
	worker  string
	// deliveries is how many times a worker started the job, when the
	// framework says (BullMQ's attemptsStarted); 0 counts as 1.
	deliveries int
}

// pendingJobs are a framework queue's jobs waiting for their final state,
// by framework id, and the results found for them, until Results hands
// them to the Target.
type pendingJobs struct {
	mu     sync.Mutex // guards jobs and done
	jobs   map[string]*pendingJob
	done   []Result
	notify chan struct{} // a result was added to done; buffered 1
}

func newPendingJobs() *pendingJobs {
	return &pendingJobs{jobs: map[string]*pendingJob{}, notify: make(chan struct{}, 1)}
}

func (p *pendingJobs) add(id string, j Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs[id] = &pendingJob{job: j}
}

// remove forgets a job that was never enqueued.
func (p *pendingJobs) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.jobs, id)
}

// ids returns the framework ids of the pending jobs.
func (p *pendingJobs) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.jobs))
}

// start records that job id started at t on worker, unless a start is
// known already; exact says t is the worker's own stamp, which replaces
// one that is not.
func (p *pendingJobs) start(id string, t time.Time, worker string, exact bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if j, ok := p.jobs[id]; ok && (j.started.IsZero() || exact && !j.exact) {
		j.started, j.worker, j.exact = t, worker, exact
	}
}

// olderThan reports whether job id, pending, was enqueued age or more
// before now.
func (p *pendingJobs) olderThan(id string, age time.Duration, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	return ok && now.Sub(j.job.Enqueued) >= age
}

// finish turns job id into a result (done at done, failed with kind, or
// ok when kind is ""), once: a second final state of the same job is
// dropped.
func (p *pendingJobs) finish(id string, done time.Time, worker, kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if !ok {
		return
	}
	delete(p.jobs, id)
	if worker == "" {
		worker = j.worker
	}
	r := Result{ID: j.job.ID, RunID: j.job.RunID, Worker: worker, Start: j.started, Done: done, Status: StatusOK, Deliveries: max(1, j.deliveries)}
	if kind != "" {
		r.Status, r.Error = StatusError, kind
	}
	if r.Done.IsZero() {
		r.Done = time.Now()
	}
	if !j.exact && r.Start.After(r.Done) {
		// tare heard of the start after the worker had finished (the
		// generator was slow to read): the start was no later than that.
		r.Start = r.Done
	}
	p.done = append(p.done, r)
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// take returns up to limit results found, waiting up to block for one.
func (p *pendingJobs) take(ctx context.Context, limit int, block time.Duration) []Result {
	deadline := time.NewTimer(max(block, 0))
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if n := min(len(p.done), max(limit, 1)); n > 0 {
			out := append([]Result(nil), p.done[:n]...)
			p.done = p.done[n:]
			p.mu.Unlock()
			return out
		}
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// lose forgets every pending job: the queue's state, theirs included, is
// gone, and the Target fails them all.
func (p *pendingJobs) lose() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.jobs)
}

// oldestStarted is the age of the oldest job that started and has not
// finished, since its enqueue; and how many such jobs there are.
func (p *pendingJobs) oldestStarted(now time.Time) (time.Duration, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest time.Duration
	var n int64
	for _, j := range p.jobs {
		if j.started.IsZero() {
			continue
		}
		n++
		oldest = max(oldest, now.Sub(j.job.Enqueued))
	}
	return oldest, n
}

// epochKeeper notices a lost queue state the way Redis (the broker) does:
// a key holding a random token, set with the first job (so a Target that
// enqueued nothing, as tare check's, leaves no key); a different token, or
// none, means the server restarted without persistence or the keys were
// deleted.
type epochKeeper struct {
	key   string
	mu    sync.Mutex // guards token
	token string     // "" until the first job
}

// ensure sets the token before a job is enqueued, once.
func (e *epochKeeper) ensure(ctx context.Context, rdb redis.UniversalClient) error {
	e.mu.Lock()
	set := e.token != ""
	e.mu.Unlock()
	if set {
		return nil
	}
	t, err := readEpoch(ctx, rdb, e.key)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
	return nil
}

// check returns ErrLost once when the token changed since the last call,
// and takes the new one.
func (e *epochKeeper) check(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	e.mu.Lock()
	token := e.token
	e.mu.Unlock()
	if token == "" {
		return nil // no job yet: nothing to lose
	}
	got, err := rdb.Get(ctx, e.key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("check %q: %w", e.key, err)
	}
	if got == token {
		return nil
	}
	t, err := readEpoch(ctx, rdb, e.key)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
	return fmt.Errorf("read results of queue %q: %w (the server restarted or the keys were deleted)", queue, ErrLost)
}

// readEpoch returns the token at key, creating a random one when there is
// none.
func readEpoch(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if err := rdb.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return "", fmt.Errorf("set %q: %w", key, err)
	}
	t, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("get %q: %w", key, err)
	}
	return t, nil
}

// CleanupFramework removes, from the Celery, RQ or BullMQ queue rawURL
// names, what tare's runs put there (jobs whose id starts "tare-", their
// results and registry entries, tare's own keys beside the queue, and the
// queue's registration when tare created it) and nothing else, and returns
// what it removed, sorted: key names, and "LIST entry …" for entries taken
// out of lists and sets. On an AMQP broker it removes no message: tare's
// expire by themselves (see Celery). It never stops the workers: they are
// the user's.
func CleanupFramework(ctx context.Context, rawURL string) ([]string, error) {
	p := ProtocolOf(rawURL)
	if p == ProtocolTare {
		return nil, tare.Errorf(tare.EINVALID, "queue URL %q: not a Celery, RQ or BullMQ queue; want %s", RedactURL(rawURL), URLForms)
	}
	f, err := parseFrameworkURL(rawURL, p, false)
	if err != nil {
		return nil, err
	}
	if p == ProtocolCelery {
		return cleanupCelery(ctx, f, rawURL)
	}
	rdb, err := dialFramework(ctx, f, rawURL)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	if p == ProtocolBullMQ {
		return cleanupBullMQ(ctx, rdb, f)
	}
	return cleanupRQ(ctx, rdb, f)
}

// unlinkKeys deletes keys, which all start with prefix (checked, as
// deleting a foreign key is what cleanup must never do).
func unlinkKeys(ctx context.Context, rdb redis.UniversalClient, prefix string, keys []string) error {
	const batch = 256
	for i := 0; i < len(keys); i += batch {
		part := keys[i:min(len(keys), i+batch)]
		for _, k := range part {
			if !strings.HasPrefix(k, prefix) {
				return fmt.Errorf("clean up: scan returned foreign key %q", k)
			}
		}
		if err := rdb.Unlink(ctx, part...).Err(); err != nil {
			return fmt.Errorf("clean up: unlink %d keys: %w", len(part), err)
		}
	}
	return nil
}

// sortWorkers sorts workers by name.
func sortWorkers(ws []WorkerInfo) {
	slices.SortFunc(ws, func(a, b WorkerInfo) int { return cmp.Compare(a.Name, b.Name) })
}

// sortedStrings sorts s in place and returns it.
func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}

// cutLast slices s around the last sep: "tasks.answer" → "tasks", "answer".
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// removeTaresMembers removes tare's jobs (their ids start with jobIDPrefix)
// from the sorted set key, and says what it removed.
func removeTaresMembers(ctx context.Context, rdb *redis.Client, key string) ([]string, error) {
	var removed []string
	var cursor uint64
	for {
		members, next, err := rdb.ZScan(ctx, key, cursor, jobIDPrefix+"*", 512).Result()
		if err != nil {
			return removed, fmt.Errorf("scan %q: %w", key, err)
		}
		for i := 0; i < len(members); i += 2 { // member, score, …
			if err := rdb.ZRem(ctx, key, members[i]).Err(); err != nil {
				return removed, err
			}
			removed = append(removed, strconv.Quote(key)+" entry "+members[i])
		}
		if cursor = next; cursor == 0 {
			return removed, nil
		}
	}
}
