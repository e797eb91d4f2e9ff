package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
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

// FrameworkURL is a parsed celery+redis://, celery+amqp://, rq+redis:// or
// bullmq+redis:// URL.
type FrameworkURL struct {
	Protocol string
	Redis    string // the broker's redis:// URL, without tare's parameters; "" for an AMQP broker
	AMQP     string // the broker's amqp:// URL, without tare's parameters; "" for a Redis broker
	Backend  string // Celery's result backend, a redis:// URL, or rpc://; Redis when not given
	Queue    string
	Task     string // Celery's task name, RQ's function, BullMQ's job name
	Prefix   string // BullMQ's key prefix ("bull")
	DB       int    // the Redis broker's database
}

// Broker is the broker's URL, without tare's parameters.
func (f FrameworkURL) Broker() string { return cmp.Or(f.Redis, f.AMQP) }

// RPC reports whether the result backend is rpc://: task states sent back
// as messages to the queue the task message names (AMQP only).
func (f FrameworkURL) RPC() bool { return f.Backend == "rpc://" }

// ValidTask reports whether s is a Python dotted name: what Celery task
// names and RQ function paths are in practice.
func ValidTask(s string) bool {
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

// ParseFrameworkURL parses rawURL for protocol p; needTask says the task
// must be named (cleanup needs none). Errors are *tare.Error with code
// EINVALID, naming what is wrong and the form that is right, with any
// password redacted.
func ParseFrameworkURL(rawURL, p string, needTask bool) (FrameworkURL, error) {
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
		return FrameworkURL{}, bad("%v", err)
	}
	q := u.Query()
	f := FrameworkURL{Protocol: p, Queue: q.Get("queue"), Task: q.Get(ff.param), Backend: q.Get("backend")}
	own := []string{"queue", ff.param, "backend"}
	if p == ProtocolBullMQ {
		f.Prefix, own = cmp.Or(q.Get("prefix"), "bull"), append(own, "prefix")
	}
	for _, k := range own {
		q.Del(k)
	}
	if f.Queue == "" {
		f.Queue = map[string]string{ProtocolCelery: "celery", ProtocolRQ: "default"}[p]
	}
	valid := ValidTask
	if p == ProtocolBullMQ {
		valid = validJobName
	}
	switch {
	case f.Queue == "":
		return FrameworkURL{}, bad("no queue: give the queue the worker consumes, queue=NAME as in new Worker(\"NAME\", …)")
	case (needTask || f.Task != "") && !valid(f.Task):
		return FrameworkURL{}, bad("%s=%q: give the %s", ff.param, f.Task, ff.what)
	case !nameRE.MatchString(f.Queue):
		return FrameworkURL{}, bad("queue=%q: want 1 to 64 letters, digits, '.', '_' or '-'", f.Queue)
	case p == ProtocolBullMQ && !prefixRE.MatchString(f.Prefix):
		return FrameworkURL{}, bad("prefix=%q: want BullMQ's key prefix, 1 to 64 letters, digits, '.', '_', '-', '{' or '}' (default bull)", f.Prefix)
	case p == ProtocolBullMQ && f.Backend != "":
		return FrameworkURL{}, bad("backend=%q: a BullMQ job keeps its result in its own hash, drop backend", RedactURL(f.Backend))
	}
	_, scheme, _ = strings.Cut(u.Scheme, "+")
	u.Scheme, u.RawQuery = scheme, q.Encode()
	if amqpBroker {
		return parseAMQPBroker(f, u.String(), bad)
	}
	f.Redis = u.String()
	opt, err := ParseRedisURL(f.Redis)
	if err != nil {
		return FrameworkURL{}, bad("%s", tare.ErrorMessage(err))
	}
	f.DB = opt.DB
	if f.Backend == "" {
		f.Backend = f.Redis
	} else if _, err := ParseRedisURL(f.Backend); err != nil {
		return FrameworkURL{}, bad("backend: %s", tare.ErrorMessage(err))
	}
	return f, nil
}

// parseAMQPBroker completes f, a Celery queue on the AMQP broker at
// broker: its result backend must be named (RabbitMQ holds no task
// state), a Redis, or rpc:// (the states sent back as messages).
func parseAMQPBroker(f FrameworkURL, broker string, bad func(string, ...any) error) (FrameworkURL, error) {
	if _, _, err := rabbitmq.ParseURL(broker); err != nil {
		return FrameworkURL{}, bad("%v", err)
	}
	f.AMQP = broker
	scheme, _, found := strings.Cut(strings.ToLower(f.Backend), "://")
	switch {
	case f.Backend == "":
		return FrameworkURL{}, bad("no backend: give the worker's result_backend, backend=redis://HOST:6379/0 or backend=rpc://, where tare reads each task's state")
	case !found || strings.ContainsFunc(scheme, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+') }):
		return FrameworkURL{}, bad("backend: want a URL, redis://HOST:6379/0 (the worker's result_backend)") // not repeated: a password, perhaps
	case scheme == "rpc":
		if f.Backend != "rpc://" {
			return FrameworkURL{}, bad("backend: want rpc://, nothing after it (the replies come to tare's own queue)")
		}
		return f, nil
	case scheme != "redis" && scheme != "rediss":
		return FrameworkURL{}, bad("backend=%s://…: tare reads task states from a Redis result backend (the worker's result_backend = \"redis://…\") or from rpc:// replies; the others are not supported", scheme)
	}
	if _, err := ParseRedisURL(f.Backend); err != nil {
		return FrameworkURL{}, bad("backend: %s", tare.ErrorMessage(err))
	}
	return f, nil
}

// DialFramework connects to the broker of f and checks that it answers.
func DialFramework(ctx context.Context, f FrameworkURL, rawURL string) (*redis.Client, error) {
	opt, _ := ParseRedisURL(f.Redis) // checked by ParseFrameworkURL
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "redis at %s: %w", RedactURL(rawURL), err)
	}
	return rdb, nil
}

// DialFrameworkURL parses rawURL, a queue of protocol p on a Redis broker
// (ParseFrameworkURL, needTask as there), and connects to its broker
// (DialFramework).
func DialFrameworkURL(ctx context.Context, rawURL, p string, needTask bool) (FrameworkURL, *redis.Client, error) {
	f, err := ParseFrameworkURL(rawURL, p, needTask)
	if err != nil {
		return FrameworkURL{}, nil, err
	}
	rdb, err := DialFramework(ctx, f, rawURL)
	return f, rdb, err
}
