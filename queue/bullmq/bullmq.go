package bullmq

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// Source is a queue.Source on a BullMQ queue in Redis: it adds jobs the way
// BullMQ 5's Queue.add does (its addStandardJob script: the job's hash,
// its id on the wait list, the events stream, the id counter), as a Lua
// script of tare's own, and follows each job through the queue's events
// stream and the job's hash. docs/bullmq.md gives the exact keys.
//
//	HSET   bull:<queue>:<id>  name, data (JSON), opts, timestamp, delay 0, priority 0
//	LPUSH  bull:<queue>:wait <id>   (bull:<queue>:paused when meta says paused)
//	ZADD   bull:<queue>:marker 0 "0"  wakes a worker blocked on the marker
//	XADD   bull:<queue>:events  added, waiting
//	bull:<queue>:events  active, completed (returnvalue), failed (failedReason): what the worker writes
//	bull:<queue>:<id>    processedOn, finishedOn (the worker's Date.now()), ats, pb, stacktrace
//
// A job's start and end are the worker's own stamps, processedOn and
// finishedOn, in whole milliseconds; when the worker removes a job as it
// finishes it (removeOnComplete, removeOnFail), the hash is gone and they
// come from the events stream's entry ids instead, on Redis's clock.
// BullMQ keeps no registry of workers: a worker names its blocking
// connection bull:<base64 queue>[:w:<name>], and CLIENT LIST finds it, as
// BullMQ's own Queue.getWorkers does.
type Source struct {
	rdb     *redis.Client
	f       queue.FrameworkURL
	fw      queue.FrameworkConfig
	keys    bullKeys
	epoch   queue.EpochKeeper
	pending *queue.PendingJobs
	from    string        // the events stream's last id when opened: where reading starts
	offset  time.Duration // Redis's clock − this host's, applied to stamps of event ids
	version string        // the library version a producer wrote into the queue's meta

	mu          sync.Mutex        // guards everything below
	lastPoll    time.Time         // the last read of the pending jobs' hashes
	adding      map[string]bool   // jobs whose add has not returned yet: no hash to miss
	missing     map[string]int    // pending jobs whose hash the last polls did not find, by id: polls in a row
	fromEvents  int64             // results whose stamps came from the events stream: the worker removed the job
	early       int64             // jobs whose processedOn was before tare added them (startFromHash)
	earlyMax    time.Duration     // by how much at most
	stalled     int64             // stalled events of this Source's jobs: a worker died or blocked holding them
	failed      int64             // failed jobs
	reasons     map[string]int    // failedReason → jobs, the first bullReasonsKept reasons
	reasonOrder []string          // reasons in the order first seen
	workerNames map[string]string // a worker's display name by its client address
}

// bullKeys are the keys of one BullMQ queue.
type bullKeys struct {
	base                                                            string // "bull:<queue>:", the job hashes' prefix
	wait, paused, meta, id, active, events, marker                  string
	prioritized, delayed, completed, failed, stalled, waitingChilds string
	client                                                          string // the name a worker gives its blocking connection
	tare                                                            string // tare's own keys beside the queue
}

func bullKeysOf(prefix, q string) bullKeys {
	base := prefix + ":" + q + ":"
	return bullKeys{
		base: base, wait: base + "wait", paused: base + "paused", meta: base + "meta", id: base + "id",
		active: base + "active", events: base + "events", marker: base + "marker",
		prioritized: base + "prioritized", delayed: base + "delayed", completed: base + "completed",
		failed: base + "failed", stalled: base + "stalled", waitingChilds: base + "waiting-children",
		client: prefix + ":" + base64.StdEncoding.EncodeToString([]byte(q)),
		tare:   "tare:bullmq:" + prefix + ":" + q + ":",
	}
}

var _ queue.Source = (*Source)(nil)

// bullAdd adds one job as BullMQ 5's addStandardJob does for a job
// without a parent, delay, priority or deduplication: the counter, the
// events' cap in meta, the hash, the "added" event, the wait list (or
// paused, with no marker while the queue is paused or at its global
// concurrency), the "waiting" event. A job whose hash exists (a retried
// call whose first try went through) is left as it is: "duplicated", as
// BullMQ says of a job id added twice.
var bullAdd = redis.NewScript(`
local wait, paused, meta, counter, active, events, marker, job =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id, name = ARGV[1], ARGV[2]
redis.call("INCR", counter)
local maxEvents = redis.call("HGET", meta, "opts.maxLenEvents")
if not maxEvents then
  maxEvents = 10000
  redis.call("HSET", meta, "opts.maxLenEvents", maxEvents)
end
if redis.call("EXISTS", job) == 1 then
  redis.call("XADD", events, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", id)
  return 0
end
redis.call("HSET", job, "name", name, "data", ARGV[3], "opts", ARGV[4], "timestamp", ARGV[5], "delay", 0, "priority", 0)
redis.call("XADD", events, "*", "event", "added", "jobId", id, "name", name)
local state = redis.call("HMGET", meta, "paused", "concurrency")
local list, held = wait, false
if state[1] then
  list, held = paused, true
elseif state[2] then
  held = redis.call("LLEN", active) >= tonumber(state[2])
end
redis.call("LPUSH", list, id)
if not held then
  redis.call("ZADD", marker, 0, "0")
end
redis.call("XADD", events, "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", id)
return 1
`)

// Open connects to the BullMQ queue rawURL names,
// bullmq+redis://[user:password@]host:port/db?queue=Q&name=JOB (prefix=…
// when the queue's key prefix is not "bull"), notes where its events
// stream ends and Redis's clock against this host's.
func Open(ctx context.Context, rawURL string, fw queue.FrameworkConfig) (*Source, error) {
	f, rdb, err := queue.DialFrameworkURL(ctx, rawURL, queue.ProtocolBullMQ, true)
	if err != nil {
		return nil, err
	}
	b := &Source{rdb: rdb, f: f, fw: fw, keys: bullKeysOf(f.Prefix, f.Queue), pending: queue.NewPendingJobs(),
		adding: map[string]bool{}, missing: map[string]int{}, reasons: map[string]int{}, workerNames: map[string]string{}}
	b.epoch.Key = b.keys.tare + "epoch"
	if err := b.open(ctx); err != nil {
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open bullmq queue %q: %w", f.Queue, err)
	}
	return b, nil
}

func (b *Source) open(ctx context.Context) error {
	last, err := b.rdb.XRevRangeN(ctx, b.keys.events, "+", "-", 1).Result()
	if err != nil {
		return fmt.Errorf("read %q: %w", b.keys.events, err)
	}
	b.from = "0-0"
	if len(last) == 1 {
		b.from = last[0].ID
	}
	if b.version, err = b.rdb.HGet(ctx, b.keys.meta, "version").Result(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read %q: %w", b.keys.meta, err)
	}
	// Stamps taken from event ids are Redis's: moved onto this host's
	// clock only beyond the measurement's own error, as Target does.
	off, rtt, err := queue.ClockOffset(ctx, b, time.Now, 3)
	if err != nil {
		return err
	}
	if off.Abs() > max(2*rtt, 2*time.Millisecond) {
		b.offset = off
	}
	return nil
}

// Queue returns the queue's name.
func (b *Source) Queue() string { return b.f.Queue }

// String names the target for a run's description.
func (b *Source) String() string {
	return fmt.Sprintf("bullmq job %s on queue %s", b.f.Task, b.f.Queue)
}

// Enqueue adds job to the queue with the configuration's data, in one
// script (bullAdd).
func (b *Source) Enqueue(ctx context.Context, job queue.Job) error {
	id := queue.FrameworkJobID(job)
	if strings.Contains(id, ":") {
		return fmt.Errorf("add bullmq job %q: BullMQ job ids cannot contain ':'", id)
	}
	data, err := json.Marshal(b.fw.Args.ExpandData(job, id))
	if err != nil {
		return fmt.Errorf("encode bullmq job %q: %w", id, err)
	}
	// The options Queue.add(name, data, {jobId}) stores: no retries
	// (attempts 0, BullMQ's default), and the worker's own retention.
	opts := fmt.Sprintf(`{"attempts":0,"jobId":%q}`, id)
	if err := b.epoch.Ensure(ctx, b.rdb); err != nil {
		return fmt.Errorf("add bullmq job %q: %w", id, err)
	}
	k := b.keys
	b.mu.Lock()
	b.adding[id] = true
	b.mu.Unlock()
	// Pending before it is added: its events may be read before the
	// script returns.
	b.pending.Add(id, job)
	err = bullAdd.Run(ctx, b.rdb, []string{k.wait, k.paused, k.meta, k.id, k.active, k.events, k.marker, k.base + id},
		id, b.f.Task, data, opts, job.Enqueued.UnixMilli()).Err()
	b.mu.Lock()
	delete(b.adding, id)
	b.mu.Unlock()
	if err != nil {
		b.pending.Remove(id)
		return fmt.Errorf("add bullmq job %q onto %q: %w", id, k.wait, err)
	}
	return nil
}

// bullPollEvery is how often Results reads the pending jobs' hashes
// itself, beside the events: a job whose final event was missed (the
// stream trimmed past it, an outage) is found this way.
const bullPollEvery = time.Second

// bullReadCount bounds one read of the events stream.
const bullReadCount = 512

// Results checks the epoch, reads the pending jobs' hashes when
// bullPollEvery has passed, then reads the events stream from cursor (""
// is where it ended when the queue was opened), waiting up to block for
// an entry, and returns the results found and the next cursor.
func (b *Source) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]queue.Result, string, error) {
	if err := b.epoch.Check(ctx, b.rdb, b.f.Queue); err != nil {
		if errors.Is(err, queue.ErrLost) {
			b.pending.Lose()
			b.mu.Lock()
			clear(b.missing)
			b.mu.Unlock()
		}
		return nil, cursor, err
	}
	if out := b.pending.Take(ctx, limit, 0); len(out) > 0 {
		return out, cursor, nil
	}
	if cursor == "" {
		cursor = b.from
	}
	b.mu.Lock()
	nextPoll := b.lastPoll.Add(bullPollEvery)
	b.mu.Unlock()
	if !time.Now().Before(nextPoll) {
		if err := b.poll(ctx); err != nil {
			return nil, cursor, err
		}
		nextPoll = time.Now().Add(bullPollEvery)
	}
	wait := min(block, time.Until(nextPoll))
	blockArg := time.Duration(-1) // no BLOCK: XREAD's BLOCK 0 waits forever
	if wait >= time.Millisecond {
		blockArg = wait
	}
	streams, err := b.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{b.keys.events, cursor}, Count: bullReadCount, Block: blockArg}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		if ctx.Err() != nil {
			return nil, cursor, nil
		}
		return nil, cursor, fmt.Errorf("read %q: %w", b.keys.events, err)
	}
	finals := map[string]bullFinal{}
	for _, s := range streams {
		for _, m := range s.Messages {
			cursor = m.ID
			b.onEvent(m, finals)
		}
	}
	if err := b.settle(ctx, finals); err != nil {
		return nil, cursor, err
	}
	return b.pending.Take(ctx, limit, 0), cursor, nil
}

// bullFinal is what an event said of a job's end: when (the entry's id,
// Redis's clock, moved onto this host's), and for a failure its reason.
type bullFinal struct {
	at      time.Time
	failed  bool
	reason  string
	removed bool // the job was removed before it finished: Job.remove, Queue.clean, obliterate
}

// onEvent takes one entry of the events stream: a start (active) of one
// of this Source's jobs, or its end, which settle reads the hash of.
func (b *Source) onEvent(m redis.XMessage, finals map[string]bullFinal) {
	id, _ := m.Values["jobId"].(string)
	if !strings.HasPrefix(id, queue.JobIDPrefix) {
		return
	}
	at := b.brokerTime(m.ID)
	switch event, _ := m.Values["event"].(string); event {
	case "active":
		b.pending.Start(id, b.notBeforeEnqueue(id, at), "", false)
	case "completed":
		finals[id] = bullFinal{at: at}
	case "failed":
		reason, _ := m.Values["failedReason"].(string)
		finals[id] = bullFinal{at: at, failed: true, reason: reason}
	case "removed":
		finals[id] = bullFinal{at: at, removed: true}
	case "stalled":
		b.mu.Lock()
		b.stalled++
		b.mu.Unlock()
	}
}

// brokerTime is the time of an events stream entry id ("<ms>-<seq>", on
// Redis's clock) on this host's clock.
func (b *Source) brokerTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Now()
	}
	return time.UnixMilli(n).Add(-b.offset)
}

// bullJobFields are the fields of a job's hash read for its state, in
// order.
var bullJobFields = []string{"processedOn", "finishedOn", "ats", "pb", "failedReason", "stacktrace", "returnvalue", "timestamp"}

// bullJob is what a job's hash says of its state; ok is false when there
// is no hash.
type bullJob struct {
	ok                      bool
	processedOn, finishedOn time.Time // the worker's clock, whole milliseconds; zero when not set
	attempts                int       // ats: how many times a worker started it
	worker                  string    // pb: the name of the worker that took it, when it has one
	failedReason            string
	stacktrace              string
	completed               bool // returnvalue is set
}

func parseBullJob(v []any) bullJob {
	field := func(n int) string { s, _ := v[n].(string); return s }
	ms := func(n int) time.Time {
		if t, err := strconv.ParseInt(field(n), 10, 64); err == nil && t > 0 {
			return time.UnixMilli(t)
		}
		return time.Time{}
	}
	// timestamp is set with the job: a hash without it is none.
	j := bullJob{ok: v[7] != nil, processedOn: ms(0), finishedOn: ms(1), worker: field(3), failedReason: field(4), stacktrace: field(5), completed: v[6] != nil}
	j.attempts, _ = strconv.Atoi(field(2))
	return j
}

// readJobs reads the hashes of jobs ids (HMGET, pipelined).
func (b *Source) readJobs(ctx context.Context, ids []string) ([]bullJob, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, b.keys.base+id, bullJobFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read bullmq job states: %w", err)
	}
	out := make([]bullJob, len(ids))
	for i, c := range cmds {
		out[i] = parseBullJob(c.Val())
	}
	return out, nil
}

// settle turns the jobs that ended by the events into results, with
// their stamps from their hashes when the worker kept them.
func (b *Source) settle(ctx context.Context, finals map[string]bullFinal) error {
	if len(finals) == 0 {
		return nil
	}
	ids := make([]string, 0, len(finals))
	for id := range finals {
		if b.pending.Has(id) { // not settled already by a poll
			ids = append(ids, id)
		}
	}
	jobs, err := b.readJobs(ctx, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		fin, j := finals[id], jobs[i]
		switch {
		case fin.removed:
			b.pending.Finish(id, fin.at, "", queue.KindRevoked)
		case !j.finishedOn.IsZero():
			b.finishFromHash(id, j)
		default:
			// The worker removed the job as it finished it: the start
			// the active event gave, and the end its own event.
			b.mu.Lock()
			b.fromEvents++
			b.mu.Unlock()
			kind := ""
			if fin.failed {
				kind = b.failureKind(fin.reason, "")
			}
			b.pending.Finish(id, fin.at, "", kind)
		}
	}
	return nil
}

// finishFromHash turns a job whose hash has finishedOn into its result.
func (b *Source) finishFromHash(id string, j bullJob) {
	if !b.pending.Has(id) {
		return
	}
	kind := ""
	if !j.completed {
		kind = b.failureKind(j.failedReason, j.stacktrace)
	}
	b.startFromHash(id, j)
	done := j.finishedOn
	b.pending.Update(id, func(p *queue.PendingJob) {
		if done.Before(p.Started) {
			done = p.Started // both stamps floored to the millisecond, the start moved up
		}
	})
	b.pending.Finish(id, done, j.worker, kind)
}

// startFromHash takes a job's start, processedOn, and its attempts from
// its hash.
//
// processedOn is the worker's Date.now() taken as it begins the call that
// takes the job, in whole milliseconds (floored). A worker ending a job
// takes the next in the same call (moveToFinished fetches it), so a job
// tare added while that call was on its way gets a processedOn before it
// was added, by up to the worker's round trip to Redis. Such a job started
// when Redis moved it: at its active event, when tare read that, and no
// earlier than its add.
func (b *Source) startFromHash(id string, j bullJob) {
	if j.processedOn.IsZero() {
		return
	}
	start := j.processedOn
	b.pending.Update(id, func(p *queue.PendingJob) {
		p.Deliveries = j.attempts
		if sent := p.Job.Enqueued; start.Before(sent) {
			early := sent.Sub(start)
			start = sent
			if !p.Started.IsZero() && !p.Exact && p.Started.After(sent) {
				start = p.Started
			}
			b.mu.Lock()
			b.early++
			b.earlyMax = max(b.earlyMax, early)
			b.mu.Unlock()
		}
	})
	b.pending.Start(id, start, j.worker, true)
}

// notBeforeEnqueue is t, a start of job id in whole milliseconds
// (floored), or the job's enqueue when t falls in the millisecond before
// it: the job cannot have started before it was added.
func (b *Source) notBeforeEnqueue(id string, t time.Time) time.Time {
	b.pending.Update(id, func(p *queue.PendingJob) {
		if sent := p.Job.Enqueued; t.Before(sent) && t.Add(time.Millisecond).After(sent) {
			t = sent
		}
	})
	return t
}

// bullStalledReason is the failedReason BullMQ gives a job that stalled
// more often than the worker's maxStalledCount.
const bullStalledReason = "job stalled more than allowable limit"

// bullEarlyNoted is how far before its add a job's processedOn may fall
// before Notes says the worker's clock may be behind: a worker's round
// trip to Redis, on a loaded host.
const bullEarlyNoted = 50 * time.Millisecond

// bullReasonsKept bounds the distinct failure reasons Notes tells.
const bullReasonsKept = 3

// failureKind names a failed job's kind: the error class its stack trace
// starts with ("TypeError: boom" → "task raised TypeError"), "task failed"
// without one (a job that stalled too often: its worker died holding
// it); and counts its reason for Notes.
func (b *Source) failureKind(reason, stacktrace string) string {
	b.mu.Lock()
	b.failed++
	if _, ok := b.reasons[reason]; ok || len(b.reasons) < bullReasonsKept {
		if !ok {
			b.reasonOrder = append(b.reasonOrder, reason)
		}
		b.reasons[reason]++
	}
	b.mu.Unlock()
	if reason == bullStalledReason {
		return queue.KindTaskFailed
	}
	return queue.RaisedKind(errorClass(stacktrace))
}

// errorClass is the class of the last error in a job's stacktrace field
// (a JSON list of Error.stack texts, "TypeError: boom\n    at …"), "" when
// there is none.
func errorClass(stacktrace string) string {
	var stacks []string
	if json.Unmarshal([]byte(stacktrace), &stacks) != nil || len(stacks) == 0 {
		return ""
	}
	first, _, _ := strings.Cut(stacks[len(stacks)-1], "\n")
	class, _, _ := strings.Cut(first, ":")
	if !queue.ValidTask(class) {
		return "" // not "Name: message"
	}
	return class
}

// poll reads the hashes of the pending jobs: a job that finished without
// its end being read from the events is settled from its hash; one whose
// hash is gone at two polls in a row was removed without an event tare
// read, or lost.
func (b *Source) poll(ctx context.Context) error {
	b.mu.Lock()
	b.lastPoll = time.Now()
	b.mu.Unlock()
	all := b.pending.IDs()
	ids := all[:0]
	b.mu.Lock()
	for _, id := range all {
		if !b.adding[id] {
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	for i := 0; i < len(ids); i += bullReadCount {
		part := ids[i:min(len(ids), i+bullReadCount)]
		jobs, err := b.readJobs(ctx, part)
		if err != nil {
			return err
		}
		now := time.Now()
		for n, id := range part {
			j := jobs[n]
			b.mu.Lock()
			gone := 0
			if j.ok {
				delete(b.missing, id)
			} else {
				b.missing[id]++
				gone = b.missing[id]
			}
			b.mu.Unlock()
			switch {
			case gone >= 2:
				b.mu.Lock()
				delete(b.missing, id)
				b.mu.Unlock()
				kind := queue.KindUnavailable
				if b.fw.Timeout > 0 && b.pending.OlderThan(id, b.fw.Timeout, now) {
					kind = queue.KindTimeout
				}
				b.pending.Finish(id, now, "", kind)
			case !j.finishedOn.IsZero():
				b.finishFromHash(id, j)
			case !j.processedOn.IsZero():
				b.startFromHash(id, j)
			}
		}
	}
	return nil
}

// Depth is the backlog the way BullMQ counts it: the wait, paused and
// prioritized jobs (LLEN, ZCARD) waiting, and the active list pending.
func (b *Source) Depth(ctx context.Context) (queue.Depth, error) {
	pipe := b.rdb.Pipeline()
	wait := pipe.LLen(ctx, b.keys.wait)
	paused := pipe.LLen(ctx, b.keys.paused)
	prio := pipe.ZCard(ctx, b.keys.prioritized)
	active := pipe.LLen(ctx, b.keys.active)
	if _, err := pipe.Exec(ctx); err != nil {
		return queue.Depth{}, fmt.Errorf("read depth of bullmq queue %q: %w", b.f.Queue, err)
	}
	d := queue.Depth{Waiting: wait.Val() + paused.Val() + prio.Val(), Pending: active.Val()}
	d.OldestPending, _ = b.pending.OldestStarted(time.Now())
	return d, nil
}

// Time is the Redis server's clock.
func (b *Source) Time(ctx context.Context) (time.Time, error) { return b.rdb.Time(ctx).Result() }

// Workers lists the queue's workers by their blocking connections, which
// a BullMQ worker names bull:<base64 queue>, or bull:<base64 queue>:w:<name>
// when it has a name (CLIENT LIST, as BullMQ's Queue.getWorkers). Their
// pids are not known here: the connections' addresses find them on this
// host (WorkerInfo.ClientAddr).
func (b *Source) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	list, err := b.rdb.ClientList(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("list bullmq workers of queue %q by their connections (CLIENT LIST, as BullMQ's getWorkers; a server that refuses it needs --wait-workers 0): %w", b.f.Queue, err)
	}
	ws := parseBullClients(list, b.keys.client, time.Now())
	queue.SortWorkers(ws)
	return ws, nil
}

// parseBullClients returns the workers among CLIENT LIST's lines
// ("id=7 addr=127.0.0.1:52144 laddr=127.0.0.1:6379 fd=9 name=bull:YWdlbnRz age=3 …"),
// those whose connection name is client or starts client+":w:".
func parseBullClients(list, client string, now time.Time) []queue.WorkerInfo {
	var out []queue.WorkerInfo
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		fields := map[string]string{}
		for _, kv := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		name := fields["name"]
		worker, named := strings.CutPrefix(name, client+":w:")
		if name != client && !named {
			continue
		}
		if !named {
			worker = "bullmq worker at " + fields["addr"]
		}
		w := queue.WorkerInfo{Name: worker, ClientAddr: fields["addr"], ServerAddr: fields["laddr"]}
		if age, err := strconv.Atoi(fields["age"]); err == nil {
			w.Started = now.Add(-time.Duration(age) * time.Second).Truncate(time.Second)
		}
		out = append(out, w)
	}
	return out
}

// WorkerHint says how to start a BullMQ worker on the queue.
func (b *Source) WorkerHint() string {
	hint := fmt.Sprintf("start one with `new Worker(%q, processor, { connection })` in Node (BullMQ 5), its processor handling job name %q, on the Redis %s", b.f.Queue, b.f.Task, queue.RedactURL(b.f.Redis))
	if b.f.Prefix != "bull" {
		hint += fmt.Sprintf(" with prefix %q", b.f.Prefix)
	}
	return hint
}

// Notes says why jobs failed, when their start and end came from the
// events, when jobs stalled, and when the queue's producers run another
// BullMQ than the one tare writes jobs as.
func (b *Source) Notes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var notes []string
	if b.failed > 0 {
		var rs []string
		for _, r := range b.reasonOrder {
			rs = append(rs, fmt.Sprintf("%q (%d)", truncate(r, 120), b.reasons[r]))
		}
		notes = append(notes, fmt.Sprintf("%d BullMQ jobs failed in the worker; their failedReason: %s", b.failed, strings.Join(rs, ", ")))
	}
	if b.fromEvents > 0 {
		notes = append(notes, fmt.Sprintf("%d BullMQ jobs were removed by the worker as they finished (removeOnComplete, removeOnFail), so their start and end are the times Redis logged their events, not the worker's processedOn and finishedOn", b.fromEvents))
	}
	if b.earlyMax > bullEarlyNoted {
		notes = append(notes, fmt.Sprintf("%d BullMQ jobs had a processedOn before tare added them, by up to %s: more than a worker's round trip to Redis explains, so the worker's clock may be behind tare's (their start is taken as their add)", b.early, b.earlyMax.Round(time.Millisecond)))
	}
	if b.stalled > 0 {
		notes = append(notes, fmt.Sprintf("BullMQ found tare's jobs stalled %d times (a worker died, or blocked its event loop past lockDuration, holding them) and gave them to a worker again", b.stalled))
	}
	if v, ok := strings.CutPrefix(b.version, "bullmq:"); ok && !strings.HasPrefix(v, "5.") {
		notes = append(notes, fmt.Sprintf("the queue's meta says its producer runs BullMQ %s; tare adds jobs as BullMQ 5 does", v))
	}
	return notes
}

// truncate cuts s to n bytes at most, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Close closes the connection.
func (b *Source) Close() error { return b.rdb.Close() }

// Cleanup removes what tare's runs put in the BullMQ queue rawURL names,
// and nothing else (see queueurl.Cleanup), and returns what it removed,
// sorted.
func Cleanup(ctx context.Context, rawURL string) ([]string, error) {
	f, rdb, err := queue.DialFrameworkURL(ctx, rawURL, queue.ProtocolBullMQ, false)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	return cleanup(ctx, rdb, f)
}

// cleanup deletes tare's jobs (their hashes and the keys beside
// them, bull:<queue>:tare-*) and tare's keys, and takes tare's job ids out
// of the queue's lists and sets. The queue's own keys (its id counter,
// meta, events stream, marker) stay: they are the queue's, which its
// workers share.
func cleanup(ctx context.Context, rdb *redis.Client, f queue.FrameworkURL) ([]string, error) {
	k := bullKeysOf(f.Prefix, f.Queue)
	var removed []string
	for _, prefix := range []string{k.base + queue.JobIDPrefix, k.tare} {
		keys, err := queue.ScanKeys(ctx, rdb, prefix+"*")
		if err != nil {
			return nil, err
		}
		if err := queue.UnlinkKeys(ctx, rdb, prefix, keys); err != nil {
			return nil, err
		}
		removed = append(removed, keys...)
	}
	for _, list := range []string{k.wait, k.paused, k.active} {
		ids, err := rdb.LRange(ctx, list, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("clean up bullmq queue %q: read %q: %w", f.Queue, list, err)
		}
		for _, id := range ids {
			if strings.HasPrefix(id, queue.JobIDPrefix) {
				if err := rdb.LRem(ctx, list, 0, id).Err(); err != nil {
					return nil, fmt.Errorf("clean up bullmq queue %q: %w", f.Queue, err)
				}
				removed = append(removed, strconv.Quote(list)+" entry "+id)
			}
		}
	}
	for _, set := range []string{k.completed, k.failed, k.delayed, k.prioritized, k.waitingChilds} {
		gone, err := queue.RemoveTaresMembers(ctx, rdb, set)
		removed = append(removed, gone...)
		if err != nil {
			return nil, fmt.Errorf("clean up bullmq queue %q: %w", f.Queue, err)
		}
	}
	members, err := rdb.SMembers(ctx, k.stalled).Result()
	if err != nil {
		return nil, fmt.Errorf("clean up bullmq queue %q: read %q: %w", f.Queue, k.stalled, err)
	}
	for _, id := range members {
		if strings.HasPrefix(id, queue.JobIDPrefix) && rdb.SRem(ctx, k.stalled, id).Val() > 0 {
			removed = append(removed, strconv.Quote(k.stalled)+" entry "+id)
		}
	}
	slices.Sort(removed)
	return removed, nil
}
