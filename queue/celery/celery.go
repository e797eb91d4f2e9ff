package celery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// Source is a queue.Source on a Celery queue: it publishes Celery task messages
// (message protocol version 2, JSON) onto the queue the worker consumes,
// through its broker, Redis or an AMQP broker (RabbitMQ), and reads each
// task's state from the Redis result backend. docs/celery.md gives the
// exact keys and messages.
//
//	Redis:  LPUSH <queue> {"body": base64(JSON [args, kwargs, embed]), "headers": {"task", "id", …}, "properties": {…}}
//	AMQP:   basic.publish to the default exchange, routing key <queue>: body JSON [args, kwargs, embed], the same headers
//	celery-task-meta-<id>   the backend's state of task <id>, also PUBLISHed on that channel when stored
//	events                  the workers' heartbeats (pid, host name), every 2 s by default:
//	                        /<db>.celeryev/worker.* on Redis, exchange celeryev on AMQP
//
// A job's start is the moment its STARTED state is published, which a
// worker does only with task_track_started; its end is the state's
// date_done. Without STARTED, jobs have no queue wait (Notes says what to
// turn on).
type Source struct {
	broker  celeryBroker
	backend *redis.Client // nil with rpc://
	inbox   string        // with rpc://, the queue the task states come back to
	f       queue.FrameworkURL
	fw      queue.FrameworkConfig
	origin  string
	epoch   queue.EpochKeeper
	pending *queue.PendingJobs

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex // guards workers, unstarted, started
	workers   map[string]celeryWorker
	unstarted int64 // results without a STARTED state before them
	started   int64 // results with one
}

// celeryBroker carries a Celery queue's task messages to its workers, and
// their events back to Source.onEvent: Redis lists and pub/sub
// (celeryRedis), or an AMQP broker (celeryAMQP, celery_amqp.go).
type celeryBroker interface {
	// publish puts one task message at the queue's tail.
	publish(ctx context.Context, m celeryTask) error
	// depth counts the messages waiting in the queue.
	depth(ctx context.Context) (int64, error)
	// serving reports whether the queue has a consumer, where the broker
	// can tell (AMQP); Redis cannot, and says true once it answers.
	serving(ctx context.Context) (bool, error)
	close() error
}

// celeryWorker is a worker seen by its heartbeat.
type celeryWorker struct {
	info    queue.WorkerInfo
	expires time.Time
}

var _ queue.Source = (*Source)(nil)

// celeryMetaPrefix starts the result backend's key of a task's state.
const celeryMetaPrefix = "celery-task-meta-"

// Open connects to the Celery queue rawURL names,
// celery+redis://[user:password@]host:port/db?queue=celery&task=tasks.answer
// (backend=redis://… when the result backend is another Redis) or
// celery+amqp://user:password@host:port/vhost?queue=celery&task=tasks.answer&backend=redis://…,
// and starts listening to task states and worker heartbeats. Close stops
// it.
func Open(ctx context.Context, rawURL string, fw queue.FrameworkConfig) (*Source, error) {
	f, err := queue.ParseFrameworkURL(rawURL, queue.ProtocolCelery, true)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	c := &Source{f: f, fw: fw, origin: fmt.Sprintf("tare%d@%s", os.Getpid(), host),
		epoch: queue.EpochKeeper{Key: "tare:celery:" + f.Queue + ":epoch"}, pending: queue.NewPendingJobs(), workers: map[string]celeryWorker{}}
	if f.RPC() {
		c.inbox = "tare.reply." + uuid.NewString()
	}
	if f.AMQP != "" {
		c.broker, err = openCeleryAMQP(ctx, f, rawURL, c.origin, c.inbox, c.onEvent, c.onReturn, c.onReply)
	} else {
		c.broker, err = openCeleryRedis(ctx, f, rawURL, c.onEvent)
	}
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if f.RPC() {
		return c, nil
	}
	opt, _ := queue.ParseRedisURL(f.Backend) // checked by ParseFrameworkURL
	c.backend = redis.NewClient(opt)
	if err := c.backend.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "celery result backend at %s: %w", queue.RedactURL(f.Backend), err)
	}
	states := c.backend.PSubscribe(ctx, celeryMetaPrefix+queue.JobIDPrefix+"*")
	if _, err := states.Receive(ctx); err != nil { // the subscription's confirmation
		states.Close()
		c.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open celery queue %q: subscribe to task states: %w", f.Queue, err)
	}
	c.wg.Add(1)
	go listen(lctx, &c.wg, states, func(m *redis.Message, at time.Time) {
		c.apply(strings.TrimPrefix(m.Channel, celeryMetaPrefix), []byte(m.Payload), at, true)
	})
	return c, nil
}

// listen hands every message of ps to on until ctx ends, then closes ps
// and marks wg done. The client reconnects and subscribes again by itself
// after a Redis outage; task states published meanwhile are found by
// Results' poll.
func listen(ctx context.Context, wg *sync.WaitGroup, ps *redis.PubSub, on func(*redis.Message, time.Time)) {
	defer wg.Done()
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

// apply takes one state of task id, seen at at; live says it was
// published just now (a start time is only taken from such a state).
func (c *Source) apply(id string, payload []byte, at time.Time, live bool) {
	var meta celeryMeta
	if err := json.Unmarshal(payload, &meta); err != nil {
		return // not a state tare can read; its poll sees the final one
	}
	switch meta.Status {
	case "STARTED":
		if live {
			var s celeryStarted
			_ = json.Unmarshal(meta.Result, &s)
			c.pending.Start(id, at, s.Hostname, false)
		}
	case "SUCCESS":
		c.finish(id, meta, at, "")
	case "FAILURE":
		var e celeryException
		_ = json.Unmarshal(meta.Result, &e)
		kind := queue.RaisedKind(e.Type)
		if e.Type == "NotRegistered" {
			kind = queue.KindUnknownTask
		}
		c.finish(id, meta, at, kind)
	case "REVOKED":
		c.finish(id, meta, at, queue.KindRevoked)
	}
	// PENDING, RECEIVED, RETRY: not final.
}

func (c *Source) finish(id string, meta celeryMeta, at time.Time, kind string) {
	done := at
	if meta.DateDone != nil {
		if t, ok := parseCeleryTime(*meta.DateDone); ok {
			done = t
		}
	}
	hasStart := false
	if !c.pending.Update(id, func(j *queue.PendingJob) { hasStart = !j.Started.IsZero() }) {
		return
	}
	c.mu.Lock()
	if hasStart {
		c.started++
	} else {
		c.unstarted++
	}
	c.mu.Unlock()
	c.pending.Finish(id, done, "", kind)
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

// onEvent takes one event's body (JSON), seen at at: the workers'
// heartbeats, which every worker sends, and the task-started events of a
// worker with events on, whose stamp is the worker's own: a start more
// exact than the moment tare heard of it.
func (c *Source) onEvent(body []byte, at time.Time) {
	var b celeryEvent
	if json.Unmarshal(body, &b) != nil || b.Hostname == "" {
		return
	}
	if b.Type == "task-started" {
		if strings.HasPrefix(b.UUID, queue.JobIDPrefix) && b.Timestamp > 0 {
			sec, frac := math.Modf(b.Timestamp)
			c.pending.Start(b.UUID, time.Unix(int64(sec), int64(frac*1e9)), b.Hostname, true)
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
func (c *Source) Queue() string { return c.f.Queue }

// String names the target for a run's description.
func (c *Source) String() string {
	return fmt.Sprintf("celery task %s on queue %s", c.f.Task, c.f.Queue)
}

// Enqueue publishes one task message of job, with the arguments of the
// configuration, onto the queue.
func (c *Source) Enqueue(ctx context.Context, job queue.Job) error {
	id := queue.FrameworkJobID(job)
	args, kwargs := c.fw.Args.Expand(job, id)
	msg, err := c.message(id, args, kwargs, job.Enqueued)
	if err != nil {
		return err
	}
	if c.backend != nil {
		if err := c.epoch.Ensure(ctx, c.backend); err != nil {
			return fmt.Errorf("publish celery task %q: %w", id, err)
		}
	}
	c.pending.Add(id, job)
	if err := c.broker.publish(ctx, msg); err != nil {
		c.pending.Remove(id)
		return fmt.Errorf("publish celery task %q onto %q: %w", id, c.f.Queue, err)
	}
	return nil
}

// onReply takes a task state sent back to the inbox (rpc://): the same
// state as the Redis backend stores, without date_done, so the moment tare
// receives it stands for its time.
func (c *Source) onReply(id string, body []byte, at time.Time) { c.apply(id, body, at, true) }

// onReturn fails the job whose message the broker returned, having no
// queue to put it in.
func (c *Source) onReturn(id string) {
	if strings.HasPrefix(id, queue.JobIDPrefix) {
		c.pending.Finish(id, time.Now(), "", queue.KindUnroutable)
	}
}

// celeryTask is one task message, as every transport carries it:
// protocol 2's headers beside a body of JSON [args, kwargs, embed].
type celeryTask struct {
	id      string
	queue   string
	headers map[string]any
	body    []byte
	replyTo string // where an rpc:// backend sends the task's states; "" for none
	// expiry is how long the message may wait in the queue (the job
	// timeout; 0 for no limit): an AMQP broker drops it after that.
	expiry time.Duration
}

// message is the task message of task id, enqueued at enqueued: protocol
// version 2, JSON. With a job timeout the task expires then: a worker
// that reaches it later (a backlog left when the run ended) revokes it
// instead of running it into the next run's measurement.
func (c *Source) message(id string, args []any, kwargs map[string]any, enqueued time.Time) (celeryTask, error) {
	embed := map[string]any{"callbacks": nil, "errbacks": nil, "chain": nil, "chord": nil}
	body, err := json.Marshal([]any{args, kwargs, embed})
	if err != nil {
		return celeryTask{}, fmt.Errorf("encode celery task %q: %w", id, err)
	}
	var expires any
	if c.fw.Timeout > 0 {
		expires = enqueued.Add(c.fw.Timeout).UTC().Format(celeryTime)
	}
	argsRepr, _ := json.Marshal(args)
	kwargsRepr, _ := json.Marshal(kwargs)
	return celeryTask{id: id, queue: c.f.Queue, body: body, expiry: c.fw.Timeout, replyTo: c.inbox, headers: map[string]any{
		"lang": "py", "task": c.f.Task, "id": id, "root_id": id, "parent_id": nil, "group": nil,
		"shadow": nil, "eta": nil, "expires": expires, "retries": 0, "timelimit": []any{nil, nil},
		"argsrepr": string(argsRepr), "kwargsrepr": string(kwargsRepr), "origin": c.origin,
	}}, nil
}

// pollEvery is how often Results reads the states of pending tasks
// itself, beside the published ones: a state published while the
// subscription was down (a Redis outage) is found this way.
const pollEvery = time.Second

// Results checks the epoch, then waits up to block for final states. The
// cursor is unused: each job's final state is handed over once.
func (c *Source) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]queue.Result, string, error) {
	if c.backend != nil {
		if err := c.epoch.Check(ctx, c.backend, c.f.Queue); err != nil {
			if errors.Is(err, queue.ErrLost) {
				c.pending.Lose()
			}
			return nil, cursor, err
		}
		if err := c.poll(ctx); err != nil {
			return nil, cursor, err
		}
	}
	return c.pending.Take(ctx, limit, min(block, pollEvery)), cursor, nil
}

// poll reads the stored states of the pending tasks (MGET).
func (c *Source) poll(ctx context.Context) error {
	ids := c.pending.IDs()
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

// Depth is the broker's count of the queue's waiting messages, and the
// tasks of this Target that started and have not finished.
func (c *Source) Depth(ctx context.Context) (queue.Depth, error) {
	n, err := c.broker.depth(ctx)
	if err != nil {
		return queue.Depth{}, fmt.Errorf("read depth of celery queue %q: %w", c.f.Queue, err)
	}
	d := queue.Depth{Waiting: n}
	d.OldestPending, d.Pending = c.pending.OldestStarted(time.Now())
	return d, nil
}

// Time is the result backend's clock; with rpc://, this host's (AMQP
// has no clock to read).
func (c *Source) Time(ctx context.Context) (time.Time, error) {
	if c.backend == nil {
		return time.Now(), nil
	}
	return c.backend.Time(ctx).Result()
}

// Workers lists the workers whose heartbeats are current: every Celery
// worker on this Redis database or AMQP virtual host, whichever queues it
// consumes; none while an AMQP broker says the queue has no consumer.
func (c *Source) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	serving, err := c.broker.serving(ctx)
	if err != nil {
		return nil, fmt.Errorf("list celery workers: %w", err)
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []queue.WorkerInfo
	for name, w := range c.workers {
		if now.After(w.expires) {
			delete(c.workers, name)
			continue
		}
		if serving {
			out = append(out, w.info)
		}
	}
	queue.SortWorkers(out)
	return out, nil
}

// taskAsker is a broker through which the workers can be asked which
// tasks they register (AMQP); tare does not ask through Redis.
type taskAsker interface {
	registered(ctx context.Context, want int, wait time.Duration) (map[string][]string, error)
}

// askWait bounds how long CheckTask waits for the workers' answers,
// when one does not answer (all that answer end the wait): a worker just
// started on a loaded machine took over 2 s (CI, the whole suite
// running), and the run then went on to fail every job as an unknown
// task.
const askWait = 5 * time.Second

// CheckTask asks the workers which tasks they register (Celery's remote
// control, as `celery inspect registered`) and returns a *tare.Error with
// code EINVALID when every worker whose heartbeat is current answered and
// none registers the task: a run would only fail every job as "unknown
// task". It returns nil when one does; when one did not answer in time (a
// solo pool busy with a task, a worker started without remote control),
// as that one may know the task; and on a Redis broker, where tare does
// not ask.
func (c *Source) CheckTask(ctx context.Context) error {
	a, ok := c.broker.(taskAsker)
	if !ok {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	live := 0
	for _, w := range c.workers {
		if !now.After(w.expires) {
			live++
		}
	}
	c.mu.Unlock()
	if live == 0 {
		return nil
	}
	reg, err := a.registered(ctx, live, askWait)
	if err != nil || len(reg) < live {
		return nil // not known: the jobs will say
	}
	var all []string
	for _, tasks := range reg {
		if slices.Contains(tasks, c.f.Task) {
			return nil
		}
		all = append(all, tasks...)
	}
	slices.Sort(all)
	names := strings.Join(slices.Compact(all), ", ")
	if names == "" {
		names = "no task"
	}
	return tare.Errorf(tare.EINVALID, "unknown task %q: the Celery %s of queue %q that answered register %s; give task= one of them, as the worker lists it under [tasks]",
		c.f.Task, map[bool]string{true: "worker", false: "workers"}[len(reg) == 1], c.f.Queue, names)
}

// WorkerHint says how to start a Celery worker on the queue.
func (c *Source) WorkerHint() string {
	module, _, _ := cutLast(c.f.Task, ".")
	return fmt.Sprintf("start one with `celery -A %s worker -Q %s` (with task_track_started = True for queue wait), on the broker %s", module, c.f.Queue, queue.RedactURL(c.f.Broker()))
}

// Notes says what the worker did not tell: when its jobs started.
func (c *Source) Notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var notes []string
	if c.f.RPC() && c.unstarted+c.started > 0 {
		notes = append(notes, "with the rpc:// result backend each Celery job's end is when tare received its final state (the reply carries no date_done): service and end-to-end include the reply's trip through RabbitMQ")
	}
	if c.unstarted == 0 {
		return notes
	}
	return append(notes, fmt.Sprintf("%d of %d Celery jobs had no STARTED state, so their queue wait is unknown (null) and their service counts from the enqueue: set task_track_started = True in the worker's configuration (app.conf.task_track_started = True) to measure both",
		c.unstarted, c.unstarted+c.started))
}

// Close stops listening and closes the connections.
func (c *Source) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.closeClients()
}

func (c *Source) closeClients() error {
	err := c.broker.close()
	if c.backend != nil {
		err = errors.Join(err, c.backend.Close())
	}
	return err
}

// Cleanup removes what tare's runs put in the Celery queue rawURL names,
// and nothing else (see queueurl.Cleanup), and returns what it removed,
// sorted.
func Cleanup(ctx context.Context, rawURL string) ([]string, error) {
	f, err := queue.ParseFrameworkURL(rawURL, queue.ProtocolCelery, false)
	if err != nil {
		return nil, err
	}
	return cleanup(ctx, f, rawURL)
}

// cleanup deletes the states of tare's tasks and tare's keys from
// the result backend, and takes tare's messages out of a Redis broker's
// lists. An AMQP broker's messages are left: a queue gives no way to take
// some out and leave the others, and tare's expire by themselves (the
// job timeout is their AMQP expiration).
func cleanup(ctx context.Context, f queue.FrameworkURL, rawURL string) ([]string, error) {
	if f.RPC() {
		return nil, nil // the replies went to a queue gone with tare's connection
	}
	opt, _ := queue.ParseRedisURL(f.Backend) // checked by ParseFrameworkURL
	backend := redis.NewClient(opt)
	defer backend.Close()
	if err := backend.Ping(ctx).Err(); err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "celery result backend at %s: %w", queue.RedactURL(f.Backend), err)
	}
	var removed []string
	for _, prefix := range []string{celeryMetaPrefix + queue.JobIDPrefix, "tare:celery:" + f.Queue + ":"} {
		keys, err := queue.ScanKeys(ctx, backend, prefix+"*")
		if err != nil {
			return nil, err
		}
		if err := queue.UnlinkKeys(ctx, backend, prefix, keys); err != nil {
			return nil, err
		}
		removed = append(removed, keys...)
	}
	if f.Redis == "" {
		slices.Sort(removed)
		return removed, nil
	}
	rdb, err := queue.DialFramework(ctx, f, rawURL)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	for _, list := range celeryPriorityLists(f.Queue) {
		msgs, err := rdb.LRange(ctx, list, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("clean up celery queue %q: read %q: %w", f.Queue, list, err)
		}
		for _, m := range msgs {
			var env celeryEnvelope
			if json.Unmarshal([]byte(m), &env) != nil {
				continue
			}
			id, _ := env.Headers["id"].(string)
			if !strings.HasPrefix(id, queue.JobIDPrefix) {
				continue
			}
			if err := rdb.LRem(ctx, list, 1, m).Err(); err != nil {
				return nil, fmt.Errorf("clean up celery queue %q: remove task %q from %q: %w", f.Queue, id, list, err)
			}
			removed = append(removed, fmt.Sprintf("%s entry %s", strconv.Quote(list), id))
		}
	}
	slices.Sort(removed)
	return removed, nil
}

// cutLast slices s around the last sep: "tasks.answer" → "tasks", "answer".
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
