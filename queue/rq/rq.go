package rq

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// Source is a queue.Source on an RQ queue in Redis: it enqueues RQ jobs (a job hash
// whose data is the JSON serializer's [func, null, args, kwargs], and the
// job's id pushed onto the queue's list) and reads each job's status and
// timestamps back from its hash. docs/rq.md gives the exact keys.
//
//	HSET  rq:job:<id> status queued, data zlib(JSON), origin, enqueued_at, timeout, ttl, …
//	EXPIRE rq:job:<id> <ttl>: a job no worker took within --job-timeout is gone
//	RPUSH rq:queue:<queue> <id>;  SADD rq:queues rq:queue:<queue>
//	rq:job:<id> status, started_at, ended_at, worker_name: what the worker wrote
//	rq:results:<id>  the job's results stream (RQ 1.12 and later): a failure's traceback
//	rq:workers:<queue>, rq:worker:<name>  the workers (pid, hostname)
//
// RQ stamps started_at and ended_at on the worker's clock, to the
// microsecond: queue wait and service are always measured.
type Source struct {
	rdb     *redis.Client
	f       queue.FrameworkURL
	fw      queue.FrameworkConfig
	epoch   queue.EpochKeeper
	pending *queue.PendingJobs
	keys    rqKeys

	existed bool // the queue was registered (rq:queues) before tare opened it

	mu        sync.Mutex // guards marked, badFormat
	marked    bool       // beforeFirstJob has run
	badFormat int64      // jobs the worker could not decode: it uses another serializer
}

type rqKeys struct {
	queue, queues, workers, wip, tare string
}

func rqKeysOf(q string) rqKeys {
	return rqKeys{
		queue:   "rq:queue:" + q,
		queues:  "rq:queues",
		workers: "rq:workers:" + q,
		wip:     "rq:wip:" + q,
		tare:    "tare:rq:" + q + ":",
	}
}

// rqRegistries are the queue's job registries (sorted sets of job ids).
func rqRegistries(q string) []string {
	var out []string
	for _, r := range []string{"wip", "finished", "failed", "deferred", "scheduled", "canceled"} {
		out = append(out, "rq:"+r+":"+q)
	}
	return out
}

var _ queue.Source = (*Source)(nil)

// rqTimeLayout is how RQ writes times: UTC, microseconds, a Z.
const rqTimeLayout = "2006-01-02T15:04:05.000000Z"

// Open connects to the RQ queue rawURL names,
// rq+redis://[user:password@]host:port/db?queue=default&func=tasks.answer,
// and notes whether the queue existed, so cleanup removes only a queue
// tare created.
func Open(ctx context.Context, rawURL string, fw queue.FrameworkConfig) (*Source, error) {
	f, rdb, err := queue.DialFrameworkURL(ctx, rawURL, queue.ProtocolRQ, true)
	if err != nil {
		return nil, err
	}
	r := &Source{rdb: rdb, f: f, fw: fw, keys: rqKeysOf(f.Queue), pending: queue.NewPendingJobs()}
	r.epoch.Key = r.keys.tare + "epoch"
	if err := r.open(ctx); err != nil {
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open rq queue %q: %w", f.Queue, err)
	}
	return r, nil
}

func (r *Source) open(ctx context.Context) error {
	known, err := r.rdb.SIsMember(ctx, r.keys.queues, r.keys.queue).Result()
	if err != nil {
		return fmt.Errorf("read %q: %w", r.keys.queues, err)
	}
	r.existed = known
	return nil
}

// beforeFirstJob writes tare's keys beside the queue, once, before its
// first job: the epoch, and whether tare creates the queue (so cleanup may
// remove it).
func (r *Source) beforeFirstJob(ctx context.Context) error {
	r.mu.Lock()
	marked := r.marked
	r.mu.Unlock()
	if marked {
		return nil
	}
	if !r.existed {
		if err := r.rdb.SetNX(ctx, r.keys.tare+"created", "1", 0).Err(); err != nil {
			return fmt.Errorf("mark rq queue %q created by tare: %w", r.f.Queue, err)
		}
	}
	if err := r.epoch.Ensure(ctx, r.rdb); err != nil {
		return err
	}
	r.mu.Lock()
	r.marked = true
	r.mu.Unlock()
	return nil
}

// Queue returns the queue's name.
func (r *Source) Queue() string { return r.f.Queue }

// String names the target for a run's description.
func (r *Source) String() string { return fmt.Sprintf("rq func %s on queue %s", r.f.Task, r.f.Queue) }

// Enqueue writes job's hash and pushes its id onto the queue, in one
// transaction.
func (r *Source) Enqueue(ctx context.Context, job queue.Job) error {
	id := queue.FrameworkJobID(job)
	args, kwargs := r.fw.Args.Expand(job, id)
	data, err := json.Marshal([]any{r.f.Task, nil, args, kwargs})
	if err != nil {
		return fmt.Errorf("encode rq job %q: %w", id, err)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(data)
	zw.Close()
	now := time.Now().UTC().Format(rqTimeLayout)
	timeout := "180" // RQ's default
	// With a job timeout the job's hash expires then, unless a worker took
	// it first (RQ persists the hash of a job it starts): a worker that
	// reaches a run's left-over backlog finds no job behind the id and
	// skips it, instead of running it into the next run's measurement.
	// This is RQ's own queued-job TTL (enqueue(…, ttl=)).
	var ttl time.Duration
	if r.fw.Timeout > 0 {
		secs := int(math.Ceil(r.fw.Timeout.Seconds()))
		timeout, ttl = strconv.Itoa(secs), time.Duration(secs)*time.Second
	}
	if err := r.beforeFirstJob(ctx); err != nil {
		return fmt.Errorf("enqueue rq job %q: %w", id, err)
	}
	argsText, _ := json.Marshal(args)
	fields := []any{
		"status", "queued", "created_at", now, "enqueued_at", now, "data", z.String(),
		"origin", r.f.Queue, "description", r.f.Task + "(" + strings.Trim(string(argsText), "[]") + ")",
		"timeout", timeout,
		"started_at", "", "ended_at", "", "worker_name", "", "last_heartbeat", "",
	}
	if ttl > 0 {
		fields = append(fields, "ttl", timeout)
	}
	_, err = r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, "rq:job:"+id, fields...)
		if ttl > 0 {
			p.Expire(ctx, "rq:job:"+id, ttl)
		}
		p.RPush(ctx, r.keys.queue, id)
		p.SAdd(ctx, r.keys.queues, r.keys.queue)
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue rq job %q onto %q: %w", id, r.keys.queue, err)
	}
	// Pending once its hash exists, so poll never takes a job not yet
	// written for one that vanished; its states stay in the hash, so none
	// is missed.
	r.pending.Add(id, job)
	return nil
}

// rqPollEvery is how often Results reads the pending jobs' hashes while
// it waits.
const rqPollEvery = 50 * time.Millisecond

// Results checks the epoch, then reads the pending jobs' hashes every
// rqPollEvery until one is final or block passes. The cursor is unused.
func (r *Source) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]queue.Result, string, error) {
	if err := r.epoch.Check(ctx, r.rdb, r.f.Queue); err != nil {
		if errors.Is(err, queue.ErrLost) {
			r.pending.Lose()
		}
		return nil, cursor, err
	}
	deadline := time.Now().Add(block)
	for {
		if err := r.poll(ctx); err != nil {
			return nil, cursor, err
		}
		if out := r.pending.Take(ctx, limit, 0); len(out) > 0 || !time.Now().Before(deadline) {
			return out, cursor, nil
		}
		if tare.Sleep(ctx, min(rqPollEvery, time.Until(deadline))) != nil {
			return nil, cursor, nil
		}
	}
}

// rqJobFields are the fields of a job hash poll reads, in order.
var rqJobFields = []string{"status", "started_at", "ended_at", "worker_name", "exc_info"}

// poll reads the status of every pending job (HMGET, pipelined), then the
// traceback of each that failed.
func (r *Source) poll(ctx context.Context) error {
	ids := r.pending.IDs()
	if len(ids) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, "rq:job:"+id, rqJobFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("read rq job states: %w", err)
	}
	for i, id := range ids {
		v := cmds[i].Val()
		field := func(n int) string { s, _ := v[n].(string); return s }
		status := field(0)
		started, _ := time.Parse(rqTimeLayout, field(1))
		ended, _ := time.Parse(rqTimeLayout, field(2))
		if !started.IsZero() {
			r.pending.Start(id, started, field(3), true)
		}
		switch status {
		case "finished":
			r.pending.Finish(id, ended, field(3), "")
		case "failed":
			r.pending.Finish(id, ended, field(3), r.failureKind(ctx, id, field(4)))
		case "stopped", "canceled":
			r.pending.Finish(id, ended, field(3), queue.KindRevoked)
		case "":
			// No hash: the job is gone without a final state: no worker
			// took it within its TTL, which is the job timeout; or it was
			// deleted, or the server lost it (which the epoch tells next).
			if v[0] == nil {
				kind := queue.KindUnavailable
				if r.fw.Timeout > 0 && r.pending.OlderThan(id, r.fw.Timeout, time.Now()) {
					kind = queue.KindTimeout
				}
				r.pending.Finish(id, time.Now(), "", kind)
			}
		}
	}
	return nil
}

// failureKind reads job id's traceback (its results stream, or the
// hash's exc_info in RQ before 1.12) and names its exception.
func (r *Source) failureKind(ctx context.Context, id, excInfo string) string {
	text := excInfo
	if msgs, err := r.rdb.XRevRangeN(ctx, "rq:results:"+id, "+", "-", 1).Result(); err == nil && len(msgs) == 1 {
		if s, ok := msgs[0].Values["exc_string"].(string); ok {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				text = string(b)
			}
		}
	}
	kind := rqFailureKind(inflate(text))
	if kind == queue.RaisedKind("DeserializationError") || kind == queue.RaisedKind("UnpicklingError") {
		r.mu.Lock()
		r.badFormat++
		r.mu.Unlock()
	}
	return kind
}

// inflate undoes the zlib compression RQ applies to what it stores; text
// that is not compressed is returned as it is.
func inflate(s string) string {
	zr, err := zlib.NewReader(strings.NewReader(s))
	if err != nil {
		return s
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return s
	}
	return string(b)
}

// rqFailureKind names a failed job's kind from its traceback: the
// exception type on its last line ("ValueError: boom" → "task raised
// ValueError"); the worker's failure to import the function (a traceback
// through RQ's import_attribute) is an unknown task.
func rqFailureKind(traceback string) string {
	lines := strings.Split(strings.TrimSpace(traceback), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	exc, _, _ := strings.Cut(last, ":")
	if !queue.ValidTask(exc) || strings.Contains(exc, " ") {
		exc = "" // not an exception line: "Work-horse terminated unexpectedly; …"
	}
	if strings.Contains(traceback, "in import_attribute") &&
		(exc == "AttributeError" || exc == "ModuleNotFoundError" || exc == "ImportError" || exc == "ValueError") {
		return queue.KindUnknownTask
	}
	return queue.RaisedKind(exc)
}

// Depth is the queue's length (LLEN) and its started registry's size
// (ZCARD rq:wip:<queue>), both the framework's own figures.
func (r *Source) Depth(ctx context.Context) (queue.Depth, error) {
	pipe := r.rdb.Pipeline()
	n := pipe.LLen(ctx, r.keys.queue)
	wip := pipe.ZCard(ctx, r.keys.wip)
	if _, err := pipe.Exec(ctx); err != nil {
		return queue.Depth{}, fmt.Errorf("read depth of rq queue %q: %w", r.f.Queue, err)
	}
	d := queue.Depth{Waiting: n.Val(), Pending: wip.Val()}
	d.OldestPending, _ = r.pending.OldestStarted(time.Now())
	return d, nil
}

// Time is the Redis server's clock.
func (r *Source) Time(ctx context.Context) (time.Time, error) { return r.rdb.Time(ctx).Result() }

// Workers lists the workers registered on the queue (rq:workers:<queue>)
// whose hash has not expired.
func (r *Source) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	names, err := r.rdb.SMembers(ctx, r.keys.workers).Result()
	if err != nil {
		return nil, fmt.Errorf("list rq workers of %q: %w", r.keys.workers, err)
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(names))
	for i, key := range names {
		cmds[i] = pipe.HMGet(ctx, key, "pid", "hostname", "birth")
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read rq workers: %w", err)
		}
	}
	var out []queue.WorkerInfo
	for i, key := range names {
		v := cmds[i].Val()
		pidText, _ := v[0].(string)
		host, _ := v[1].(string)
		if pidText == "" {
			continue // its hash expired: a worker that died
		}
		pid, _ := strconv.Atoi(pidText)
		birth, _ := v[2].(string)
		started, _ := time.Parse(rqTimeLayout, birth)
		out = append(out, queue.WorkerInfo{Name: strings.TrimPrefix(key, "rq:worker:"), Host: host, PID: pid, Started: started, Concurrency: 1})
	}
	queue.SortWorkers(out)
	return out, nil
}

// WorkerHint says how to start an RQ worker on the queue.
func (r *Source) WorkerHint() string {
	return fmt.Sprintf("start one with `rq worker -u %s -S rq.serializers.JSONSerializer %s`", queue.RedactURL(r.f.Redis), r.f.Queue)
}

// Notes says when the worker could not read tare's jobs.
func (r *Source) Notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.badFormat == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d RQ jobs failed to decode in the worker: tare writes them with RQ's JSON serializer, so start the worker with --serializer rq.serializers.JSONSerializer (rq worker -S …, or Worker(…, serializer=JSONSerializer))", r.badFormat)}
}

// Close closes the connection.
func (r *Source) Close() error { return r.rdb.Close() }

// Cleanup removes what tare's runs put in the RQ queue rawURL names,
// and nothing else (see queueurl.Cleanup), and returns what it removed,
// sorted.
func Cleanup(ctx context.Context, rawURL string) ([]string, error) {
	f, rdb, err := queue.DialFrameworkURL(ctx, rawURL, queue.ProtocolRQ, false)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	return cleanup(ctx, rdb, f)
}

// cleanup deletes tare's jobs, their results and registry entries, and
// tare's keys; it takes tare's ids out of the queue's list, and the queue
// out of rq:queues when tare created it and it is empty.
func cleanup(ctx context.Context, rdb *redis.Client, f queue.FrameworkURL) ([]string, error) {
	k := rqKeysOf(f.Queue)
	var removed []string
	for _, prefix := range []string{"rq:job:" + queue.JobIDPrefix, "rq:results:" + queue.JobIDPrefix} {
		keys, err := queue.ScanKeys(ctx, rdb, prefix+"*")
		if err != nil {
			return nil, err
		}
		if err := queue.UnlinkKeys(ctx, rdb, prefix, keys); err != nil {
			return nil, err
		}
		removed = append(removed, keys...)
	}
	ids, err := rdb.LRange(ctx, k.queue, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("clean up rq queue %q: read %q: %w", f.Queue, k.queue, err)
	}
	for _, id := range ids {
		if strings.HasPrefix(id, queue.JobIDPrefix) {
			if err := rdb.LRem(ctx, k.queue, 0, id).Err(); err != nil {
				return nil, fmt.Errorf("clean up rq queue %q: %w", f.Queue, err)
			}
			removed = append(removed, strconv.Quote(k.queue)+" entry "+id)
		}
	}
	for _, reg := range rqRegistries(f.Queue) {
		gone, err := queue.RemoveTaresMembers(ctx, rdb, reg)
		removed = append(removed, gone...)
		if err != nil {
			return nil, fmt.Errorf("clean up rq queue %q: %w", f.Queue, err)
		}
	}
	created, err := rdb.Exists(ctx, k.tare+"created").Result()
	if err != nil {
		return nil, fmt.Errorf("clean up rq queue %q: %w", f.Queue, err)
	}
	if n, _ := rdb.LLen(ctx, k.queue).Result(); created > 0 && n == 0 {
		if rdb.SRem(ctx, k.queues, k.queue).Val() > 0 {
			removed = append(removed, strconv.Quote(k.queues)+" entry "+k.queue)
		}
	}
	keys, err := queue.ScanKeys(ctx, rdb, k.tare+"*")
	if err != nil {
		return nil, err
	}
	if err := queue.UnlinkKeys(ctx, rdb, k.tare, keys); err != nil {
		return nil, err
	}
	removed = append(removed, keys...)
	slices.Sort(removed)
	return removed, nil
}
