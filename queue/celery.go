package queue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
)

// Celery is a Source on a Celery queue in Redis: it publishes Celery task
// messages (message protocol version 2, JSON) onto the queue's list, the
// way Celery's Redis transport carries them, and reads each task's state
// from the Redis result backend. docs/celery.md gives the exact keys and
// messages.
//
//	LPUSH <queue> {"body": base64(JSON [args, kwargs, embed]), "headers": {"task", "id", …}, "properties": {…}}
//	celery-task-meta-<id>   the backend's state of task <id>, also PUBLISHed on that channel when stored
//	/<db>.celeryev/worker.* the workers' heartbeats (pid, host name), every 2 s by default
//
// A job's start is the moment its STARTED state is published, which a
// worker does only with task_track_started; its end is the state's
// date_done. Without STARTED, jobs have no queue wait (Notes says what to
// turn on).
type Celery struct {
	rdb, backend *redis.Client
	f            frameworkURL
	fw           FrameworkConfig
	origin       string
	epoch        epochKeeper
	pending      *pendingJobs

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex // guards workers, unstarted, started
	workers   map[string]celeryWorker
	unstarted int64 // results without a STARTED state before them
	started   int64 // results with one
}

// celeryWorker is a worker seen by its heartbeat.
type celeryWorker struct {
	info    WorkerInfo
	expires time.Time
}

var _ Source = (*Celery)(nil)

// The names Celery's Redis transport and backend use.
const (
	celeryMetaPrefix = "celery-task-meta-"
	// celeryPrioritySep joins a queue's name and a priority step in the
	// names of its priority lists (kombu's default steps 3, 6, 9).
	celeryPrioritySep = "\x06\x16"
)

// celeryPriorityLists are the queue's lists: the queue's own name holds
// priority 0, the default.
func celeryPriorityLists(q string) []string {
	return []string{q, q + celeryPrioritySep + "3", q + celeryPrioritySep + "6", q + celeryPrioritySep + "9"}
}

// OpenCelery connects to the Celery queue rawURL names,
// celery+redis://[user:password@]host:port/db?queue=celery&task=tasks.answer
// (backend=redis://… when the result backend is another Redis), and starts
// listening to task states and worker heartbeats. Close stops it.
func OpenCelery(ctx context.Context, rawURL string, fw FrameworkConfig) (*Celery, error) {
	f, err := parseFrameworkURL(rawURL, ProtocolCelery, true)
	if err != nil {
		return nil, err
	}
	rdb, err := dialFramework(ctx, f, rawURL)
	if err != nil {
		return nil, err
	}
	backend := rdb
	if f.backend != f.redis {
		opt, _ := parseURL(f.backend)
		backend = redis.NewClient(opt)
		if err := backend.Ping(ctx).Err(); err != nil {
			rdb.Close()
			backend.Close()
			return nil, tare.Errorf(tare.EUNAVAILABLE, "celery result backend at %s: %w", RedactURL(f.backend), err)
		}
	}
	host, _ := os.Hostname()
	c := &Celery{rdb: rdb, backend: backend, f: f, fw: fw, origin: fmt.Sprintf("tare%d@%s", os.Getpid(), host),
		epoch: epochKeeper{key: "tare:celery:" + f.queue + ":epoch"}, pending: newPendingJobs(), workers: map[string]celeryWorker{}}
	states := backend.PSubscribe(ctx, celeryMetaPrefix+jobIDPrefix+"*")
	beats := rdb.PSubscribe(ctx, fmt.Sprintf("/%d.celeryev/*", f.db))
	for _, ps := range []*redis.PubSub{states, beats} {
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			states.Close()
			beats.Close()
			c.closeClients()
			return nil, tare.Errorf(tare.EUNAVAILABLE, "open celery queue %q: subscribe: %w", f.queue, err)
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go c.listen(lctx, states, c.onState)
	go c.listen(lctx, beats, c.onEvent)
	return c, nil
}

// listen hands every message of ps to on until ctx ends. The client
// reconnects and subscribes again by itself after a Redis outage; states
// published meanwhile are found by Results' poll.
func (c *Celery) listen(ctx context.Context, ps *redis.PubSub, on func(*redis.Message, time.Time)) {
	defer c.wg.Done()
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			on(m, time.Now())
		}
	}
}

// celeryMeta is a task's state in the result backend.
type celeryMeta struct {
	Status   string          `json:"status"`
	Result   json.RawMessage `json:"result"`
	DateDone *string         `json:"date_done"`
	TaskID   string          `json:"task_id"`
}

// celeryStarted is the result of a STARTED state: who runs the task.
type celeryStarted struct {
	PID      int    `json:"pid"`
	Hostname string `json:"hostname"`
}

// celeryException is the result of a FAILURE state.
type celeryException struct {
	Type    string `json:"exc_type"`
	Message any    `json:"exc_message"`
}

func (c *Celery) onState(m *redis.Message, at time.Time) {
	c.apply(strings.TrimPrefix(m.Channel, celeryMetaPrefix), []byte(m.Payload), at, true)
}

// apply takes one state of task id, seen at at; live says it was
// published just now (a start time is only taken from such a state).
func (c *Celery) apply(id string, payload []byte, at time.Time, live bool) {
	var meta celeryMeta
	if err := json.Unmarshal(payload, &meta); err != nil {
		return // not a state tare can read; its poll sees the final one
	}
	switch meta.Status {
	case "STARTED":
		if live {
			var s celeryStarted
			_ = json.Unmarshal(meta.Result, &s)
			c.pending.start(id, at, s.Hostname, false)
		}
	case "SUCCESS":
		c.finish(id, meta, at, "")
	case "FAILURE":
		var e celeryException
		_ = json.Unmarshal(meta.Result, &e)
		kind := raisedKind(e.Type)
		if e.Type == "NotRegistered" {
			kind = KindUnknownTask
		}
		c.finish(id, meta, at, kind)
	case "REVOKED":
		c.finish(id, meta, at, KindRevoked)
	}
	// PENDING, RECEIVED, RETRY: not final.
}

func (c *Celery) finish(id string, meta celeryMeta, at time.Time, kind string) {
	done := at
	if meta.DateDone != nil {
		if t, ok := parseCeleryTime(*meta.DateDone); ok {
			done = t
		}
	}
	c.pending.mu.Lock()
	j, ok := c.pending.jobs[id]
	hasStart := ok && !j.started.IsZero()
	c.pending.mu.Unlock()
	if !ok {
		return
	}
	c.mu.Lock()
	if hasStart {
		c.started++
	} else {
		c.unstarted++
	}
	c.mu.Unlock()
	c.pending.finish(id, done, "", kind)
}

// celeryTime is how Celery writes a time in a message (Python's
// isoformat of an aware datetime), as a task's expires.
const celeryTime = "2006-01-02T15:04:05.000000-07:00"

// parseCeleryTime parses date_done: ISO 8601, UTC, with an offset (Celery
// 5.3 and later) or without (earlier versions, naive UTC).
func parseCeleryTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// celeryEnvelope is a message as Celery's Redis transport carries it: the
// protocol's properties and headers beside the encoded body.
type celeryEnvelope struct {
	Body            string         `json:"body"`
	ContentEncoding string         `json:"content-encoding"`
	ContentType     string         `json:"content-type"`
	Headers         map[string]any `json:"headers"`
	Properties      map[string]any `json:"properties"`
}

// celeryEvent is an event's body: a worker's (worker-heartbeat, …) or,
// from a worker with events on (-E), a task's (task-started, …).
type celeryEvent struct {
	Type      string  `json:"type"`
	Hostname  string  `json:"hostname"`
	PID       int     `json:"pid"`
	Freq      float64 `json:"freq"`
	Timestamp float64 `json:"timestamp"` // unix seconds, the worker's clock
	UUID      string  `json:"uuid"`      // a task event's task id
}

// onEvent takes the workers' heartbeats, which every worker sends, and
// the task-started events of a worker with events on, whose stamp is the
// worker's own: a start more exact than the moment tare heard of it.
func (c *Celery) onEvent(m *redis.Message, at time.Time) {
	var env celeryEnvelope
	if json.Unmarshal([]byte(m.Payload), &env) != nil {
		return
	}
	body, err := base64.StdEncoding.DecodeString(env.Body)
	if err != nil {
		return
	}
	var b celeryEvent
	if json.Unmarshal(body, &b) != nil || b.Hostname == "" {
		return
	}
	if b.Type == "task-started" {
		if strings.HasPrefix(b.UUID, jobIDPrefix) && b.Timestamp > 0 {
			sec, frac := math.Modf(b.Timestamp)
			c.pending.start(b.UUID, time.Unix(int64(sec), int64(frac*1e9)), b.Hostname, true)
		}
		return
	}
	if !strings.HasPrefix(b.Type, "worker-") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.Type == "worker-offline" {
		delete(c.workers, b.Hostname)
		return
	}
	// Gone after three beats missed, as Celery's own monitor judges.
	life := max(3*time.Duration(b.Freq*float64(time.Second)), 5*time.Second)
	w := c.workers[b.Hostname]
	w.info.Name, w.info.PID = b.Hostname, b.PID
	_, w.info.Host, _ = strings.Cut(b.Hostname, "@")
	if w.info.Started.IsZero() {
		w.info.Started = at
	}
	w.expires = at.Add(life)
	c.workers[b.Hostname] = w
}

// Queue returns the queue's name.
func (c *Celery) Queue() string { return c.f.queue }

// String names the target for a run's description.
func (c *Celery) String() string {
	return fmt.Sprintf("celery task %s on queue %s", c.f.task, c.f.queue)
}

// Enqueue publishes one task message of job, with the arguments of the
// configuration, onto the queue's list.
func (c *Celery) Enqueue(ctx context.Context, job Job) error {
	id := frameworkJobID(job)
	args, kwargs := c.fw.Args.expand(job, id)
	msg, err := c.message(id, args, kwargs, job.Enqueued)
	if err != nil {
		return err
	}
	if err := c.epoch.ensure(ctx, c.backend); err != nil {
		return fmt.Errorf("publish celery task %q: %w", id, err)
	}
	c.pending.add(id, job)
	if err := c.rdb.LPush(ctx, c.f.queue, msg).Err(); err != nil {
		c.pending.remove(id)
		return fmt.Errorf("publish celery task %q onto %q: %w", id, c.f.queue, err)
	}
	return nil
}

// message is the task message of task id, enqueued at enqueued: protocol
// version 2, JSON. With a job timeout the task expires then: a worker
// that reaches it later (a backlog left when the run ended) revokes it
// instead of running it into the next run's measurement.
func (c *Celery) message(id string, args []any, kwargs map[string]any, enqueued time.Time) ([]byte, error) {
	embed := map[string]any{"callbacks": nil, "errbacks": nil, "chain": nil, "chord": nil}
	body, err := json.Marshal([]any{args, kwargs, embed})
	if err != nil {
		return nil, fmt.Errorf("encode celery task %q: %w", id, err)
	}
	var expires any
	if c.fw.Timeout > 0 {
		expires = enqueued.Add(c.fw.Timeout).UTC().Format(celeryTime)
	}
	argsRepr, _ := json.Marshal(args)
	kwargsRepr, _ := json.Marshal(kwargs)
	env := celeryEnvelope{
		Body:            base64.StdEncoding.EncodeToString(body),
		ContentEncoding: "utf-8",
		ContentType:     "application/json",
		Headers: map[string]any{
			"lang": "py", "task": c.f.task, "id": id, "root_id": id, "parent_id": nil, "group": nil,
			"shadow": nil, "eta": nil, "expires": expires, "retries": 0, "timelimit": []any{nil, nil},
			"argsrepr": string(argsRepr), "kwargsrepr": string(kwargsRepr), "origin": c.origin,
		},
		Properties: map[string]any{
			"correlation_id": id, "reply_to": "", "delivery_mode": 2, "priority": 0,
			"delivery_info": map[string]any{"exchange": "", "routing_key": c.f.queue},
			"body_encoding": "base64", "delivery_tag": uuid.NewString(),
		},
	}
	return json.Marshal(env)
}

// pollEvery is how often Results reads the states of pending tasks
// itself, beside the published ones: a state published while the
// subscription was down (a Redis outage) is found this way.
const pollEvery = time.Second

// Results checks the epoch, then waits up to block for final states. The
// cursor is unused: each job's final state is handed over once.
func (c *Celery) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]Result, string, error) {
	if err := c.epoch.check(ctx, c.backend, c.f.queue); err != nil {
		if errors.Is(err, ErrLost) {
			c.pending.lose()
		}
		return nil, cursor, err
	}
	if err := c.poll(ctx); err != nil {
		return nil, cursor, err
	}
	return c.pending.take(ctx, limit, min(block, pollEvery)), cursor, nil
}

// poll reads the stored states of the pending tasks (MGET).
func (c *Celery) poll(ctx context.Context) error {
	ids := c.pending.ids()
	for i := 0; i < len(ids); i += 256 {
		part := ids[i:min(len(ids), i+256)]
		keys := make([]string, len(part))
		for j, id := range part {
			keys[j] = celeryMetaPrefix + id
		}
		vals, err := c.backend.MGet(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("read celery task states: %w", err)
		}
		now := time.Now()
		for j, v := range vals {
			if s, ok := v.(string); ok {
				c.apply(part[j], []byte(s), now, false)
			}
		}
	}
	return nil
}

// Depth is the length of the queue's lists (LLEN), and the tasks of this
// Target that started and have not finished.
func (c *Celery) Depth(ctx context.Context) (Depth, error) {
	pipe := c.rdb.Pipeline()
	lens := make([]*redis.IntCmd, 0, 4)
	for _, l := range celeryPriorityLists(c.f.queue) {
		lens = append(lens, pipe.LLen(ctx, l))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Depth{}, fmt.Errorf("read depth of celery queue %q: %w", c.f.queue, err)
	}
	var d Depth
	for _, l := range lens {
		d.Waiting += l.Val()
	}
	d.OldestPending, d.Pending = c.pending.oldestStarted(time.Now())
	return d, nil
}

// Time is the Redis server's clock.
func (c *Celery) Time(ctx context.Context) (time.Time, error) { return c.rdb.Time(ctx).Result() }

// Workers lists the workers whose heartbeats are current: every Celery
// worker on this Redis database, whichever queues it consumes.
func (c *Celery) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("list celery workers: %w", err)
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []WorkerInfo
	for name, w := range c.workers {
		if now.After(w.expires) {
			delete(c.workers, name)
			continue
		}
		out = append(out, w.info)
	}
	sortWorkers(out)
	return out, nil
}

// WorkerHint says how to start a Celery worker on the queue.
func (c *Celery) WorkerHint() string {
	module, _, _ := cutLast(c.f.task, ".")
	return fmt.Sprintf("start one with `celery -A %s worker -Q %s` (with task_track_started = True for queue wait), on the broker %s", module, c.f.queue, RedactURL(c.f.redis))
}

// Notes says what the worker did not tell: when its jobs started.
func (c *Celery) Notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unstarted == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d Celery jobs had no STARTED state, so their queue wait is unknown (null) and their service counts from the enqueue: set task_track_started = True in the worker's configuration (app.conf.task_track_started = True) to measure both",
		c.unstarted, c.unstarted+c.started)}
}

// Close stops listening and closes the connections.
func (c *Celery) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.closeClients()
}

func (c *Celery) closeClients() error {
	err := c.rdb.Close()
	if c.backend != c.rdb {
		err = errors.Join(err, c.backend.Close())
	}
	return err
}

// cleanupCelery deletes the states of tare's tasks and tare's keys, and
// takes tare's messages out of the queue's lists.
func cleanupCelery(ctx context.Context, rdb *redis.Client, f frameworkURL) ([]string, error) {
	backend := rdb
	if f.backend != f.redis {
		opt, _ := parseURL(f.backend)
		backend = redis.NewClient(opt)
		defer backend.Close()
	}
	var removed []string
	for _, pat := range []struct {
		c      *redis.Client
		prefix string
	}{{backend, celeryMetaPrefix + jobIDPrefix}, {backend, "tare:celery:" + f.queue + ":"}} {
		keys, err := scanKeys(ctx, pat.c, pat.prefix+"*")
		if err != nil {
			return nil, err
		}
		if err := unlinkKeys(ctx, pat.c, pat.prefix, keys); err != nil {
			return nil, err
		}
		removed = append(removed, keys...)
	}
	for _, list := range celeryPriorityLists(f.queue) {
		msgs, err := rdb.LRange(ctx, list, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("clean up celery queue %q: read %q: %w", f.queue, list, err)
		}
		for _, m := range msgs {
			var env celeryEnvelope
			if json.Unmarshal([]byte(m), &env) != nil {
				continue
			}
			id, _ := env.Headers["id"].(string)
			if !strings.HasPrefix(id, jobIDPrefix) {
				continue
			}
			if err := rdb.LRem(ctx, list, 1, m).Err(); err != nil {
				return nil, fmt.Errorf("clean up celery queue %q: remove task %q from %q: %w", f.queue, id, list, err)
			}
			removed = append(removed, fmt.Sprintf("%s entry %s", strconv.Quote(list), id))
		}
	}
	return sortedStrings(removed), nil
}
