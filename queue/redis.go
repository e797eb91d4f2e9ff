package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/tare-dev/tare"
)

// Redis is a Broker on Redis Streams: jobs on a stream read by the consumer
// group Group (XADD, XREADGROUP, XAUTOCLAIM, XACK), results on a stream the
// generator reads (XREAD), and plain keys for the stop signal, the epoch and
// worker registrations, all under KeyPrefix(queue). docs/job-protocol.md
// gives the exact commands, for workers in other languages.
//
// Acknowledged jobs are deleted from the jobs stream (XDEL), so the stream
// holds only work not yet done, and the results stream is trimmed to about
// DefaultMaxResults entries.
type Redis struct {
	rdb   redis.UniversalClient
	own   bool // Close closes rdb
	queue string
	keys  redisKeys

	mu        sync.Mutex // guards token and claimFrom
	token     string     // the epoch this broker last saw; a different one means state was lost
	claimFrom string     // XAUTOCLAIM's cursor, so successive claims walk the whole pending list
}

type redisKeys struct {
	prefix, jobs, results, stop, epoch, worker string
}

func keysOf(q string) redisKeys {
	p := KeyPrefix(q)
	return redisKeys{
		prefix:  p,
		jobs:    p + keyJobs,
		results: p + keyResults,
		stop:    p + keyStop,
		epoch:   p + keyEpoch,
		worker:  p + keyWorker,
	}
}

var _ Broker = (*Redis)(nil)

// OpenRedis connects to the Redis server at rawURL
// (redis://[user:password@]host:port/db, or rediss:// for TLS) and opens
// queue on it. Close closes the connection. A bad URL or queue name is a
// *tare.Error with code EINVALID; a server that does not answer, one with
// code EUNAVAILABLE.
func OpenRedis(ctx context.Context, rawURL, queue string) (*Redis, error) {
	if err := ValidateName(queue); err != nil {
		return nil, err
	}
	opt, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	r, err := NewRedis(ctx, rdb, queue)
	if err != nil {
		rdb.Close()
		return nil, &tare.Error{Code: tare.ErrorCode(err), Message: "redis at " + RedactURL(rawURL) + ": " + tare.ErrorMessage(err), Err: err}
	}
	r.own = true
	return r, nil
}

// ParseRedisURL parses a redis:// or rediss:// URL; an error is a *tare.Error
// with code EINVALID, with any password redacted.
func ParseRedisURL(rawURL string) (*redis.Options, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, password included: keep only
		// its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, tare.Errorf(tare.EINVALID, "redis URL %q: want redis://[user:password@]host:port/db (%w)", RedactURL(rawURL), err)
	}
	return opt, nil
}

// NewRedis opens queue on an existing client, which the caller keeps and
// closes: it creates the jobs stream and its consumer group when they are
// missing, and notes the queue's epoch.
func NewRedis(ctx context.Context, rdb redis.UniversalClient, queue string) (*Redis, error) {
	if err := ValidateName(queue); err != nil {
		return nil, err
	}
	r := &Redis{rdb: rdb, queue: queue, keys: keysOf(queue), claimFrom: "0-0"}
	if err := r.ensureGroup(ctx); err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open queue %q on redis: %w", queue, err)
	}
	token, err := r.epoch(ctx)
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open queue %q on redis: %w", queue, err)
	}
	r.token = token
	return r, nil
}

// DiscardClientLogs stops the Redis client logging each failed dial of its
// pool to stderr, where the lines would break into a command's progress
// line and summary: tare reports a Redis outage itself. It holds for the
// whole process.
func DiscardClientLogs() { redis.SetLogger(&logging.VoidLogger{}) }

// RedactURL returns rawURL with any password replaced by "xxxxx", for
// messages, and the credentials in its query (a URL there, as Celery's
// backend=, with a password of its own, escaped or not) removed as
// tare.RedactText does.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "(unparsable query)"
		} else if shown := tare.RedactText(queryText(q)); shown != queryText(q) {
			u.RawQuery = shown
		}
	}
	return u.Redacted()
}

// queryText is q unescaped, in order, for a message: the way a user wrote
// it, so RedactText finds the URLs in its values.
func queryText(q url.Values) string {
	keys := slices.Sorted(maps.Keys(q))
	var parts []string
	for _, k := range keys {
		for _, v := range q[k] {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

// Queue returns the queue's name.
func (r *Redis) Queue() string { return r.queue }

// Client returns the underlying client, for Stop and Cleanup.
func (r *Redis) Client() redis.UniversalClient { return r.rdb }

// ensureGroup creates the jobs stream and its group, reading from the
// stream's first entry: jobs enqueued before any worker started are not
// skipped.
func (r *Redis) ensureGroup(ctx context.Context) error {
	err := r.rdb.XGroupCreateMkStream(ctx, r.keys.jobs, Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group %q of %q: %w", Group, r.keys.jobs, err)
	}
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// retryNoGroup runs op, and once more after recreating the group when the
// group is missing: after a server restart or a cleanup, workers recreate
// it by themselves.
func (r *Redis) retryNoGroup(ctx context.Context, op func() error) error {
	err := op()
	if !isNoGroup(err) {
		return err
	}
	if err := r.ensureGroup(ctx); err != nil {
		return err
	}
	return op()
}

// epoch returns the queue's epoch token, creating one when there is none.
func (r *Redis) epoch(ctx context.Context) (string, error) {
	return readEpoch(ctx, r.rdb, r.keys.epoch)
}

// Enqueue adds a job with XADD.
func (r *Redis) Enqueue(ctx context.Context, job Job) error {
	err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.jobs, Values: fieldArgs(job.fields())}).Err()
	if err != nil {
		return fmt.Errorf("enqueue job %q on %q: %w", job.ID, r.keys.jobs, err)
	}
	return nil
}

// blockArg converts a wait to XREAD's BLOCK: -1 leaves BLOCK out (no wait);
// a positive wait is at least 1 ms, since BLOCK 0 would wait forever.
func blockArg(block time.Duration) time.Duration {
	if block <= 0 {
		return -1
	}
	return max(block, time.Millisecond)
}

// Fetch delivers new jobs with XREADGROUP … STREAMS jobs >.
func (r *Redis) Fetch(ctx context.Context, consumer string, limit int, block time.Duration) ([]Delivery, error) {
	if err := validateConsumer(consumer); err != nil {
		return nil, err
	}
	var streams []redis.XStream
	err := r.retryNoGroup(ctx, func() error {
		var err error
		streams, err = r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group:    Group,
			Consumer: consumer,
			Streams:  []string{r.keys.jobs, ">"},
			Count:    int64(max(limit, 1)),
			Block:    blockArg(block),
		}).Result()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("fetch jobs from %q for %q: %w", r.keys.jobs, consumer, err)
	}
	var out []Delivery
	for _, s := range streams {
		for _, m := range s.Messages {
			out = append(out, delivery(m, 1))
		}
	}
	return out, nil
}

func delivery(m redis.XMessage, count int) Delivery {
	job, err := parseJob(stringFields(m.Values))
	if err != nil {
		err = fmt.Errorf("job entry %s: %w", m.ID, err)
	}
	return Delivery{ID: m.ID, Job: job, Count: count, Err: err}
}

// maxClaimRounds bounds one Claim's walk over the pending entries list.
const maxClaimRounds = 16

// Claim takes over idle jobs with XAUTOCLAIM, then reads their delivery
// counts with XPENDING (XAUTOCLAIM counts the delivery but does not return
// the count).
func (r *Redis) Claim(ctx context.Context, consumer string, minIdle time.Duration, limit int) ([]Delivery, error) {
	if err := validateConsumer(consumer); err != nil {
		return nil, err
	}
	limit = max(limit, 1)
	r.mu.Lock()
	start := r.claimFrom
	r.mu.Unlock()

	var claimed []redis.XMessage
	for round := 0; len(claimed) < limit && round < maxClaimRounds; round++ {
		var msgs []redis.XMessage
		var next string
		err := r.retryNoGroup(ctx, func() error {
			var err error
			msgs, next, err = r.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream:   r.keys.jobs,
				Group:    Group,
				Consumer: consumer,
				MinIdle:  minIdle,
				Start:    start,
				Count:    int64(limit - len(claimed)),
			}).Result()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("claim jobs idle for %v from %q for %q: %w", minIdle, r.keys.jobs, consumer, err)
		}
		claimed = append(claimed, msgs...)
		wrapped := next == "0-0" || next == ""
		start = next
		if wrapped {
			start = "0-0"
			break
		}
	}
	r.mu.Lock()
	r.claimFrom = start
	r.mu.Unlock()
	if len(claimed) == 0 {
		return nil, nil
	}

	pipe := r.rdb.Pipeline()
	counts := make([]*redis.XPendingExtCmd, len(claimed))
	for i, m := range claimed {
		counts[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: r.keys.jobs, Group: Group, Start: m.ID, End: m.ID, Count: 1,
		})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read delivery counts of claimed jobs in %q: %w", r.keys.jobs, err)
	}
	out := make([]Delivery, 0, len(claimed))
	for i, m := range claimed {
		count := 2 // at least: it was delivered before this claim
		if p := counts[i].Val(); len(p) == 1 && p[0].RetryCount > 1 {
			count = int(p[0].RetryCount)
		}
		out = append(out, delivery(m, count))
	}
	return out, nil
}

// Touch resets idle times with XCLAIM … 0 ids… JUSTID, which does not count
// a delivery.
func (r *Redis) Touch(ctx context.Context, consumer string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	err := r.rdb.XClaimJustID(ctx, &redis.XClaimArgs{
		Stream: r.keys.jobs, Group: Group, Consumer: consumer, MinIdle: 0, Messages: ids,
	}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("touch %d jobs in %q for %q: %w", len(ids), r.keys.jobs, consumer, err)
	}
	return nil
}

// completeLua acknowledges a delivery and, only if that acknowledged it,
// deletes the job entry and publishes the result: one atomic step, in which
// a second completion of the same delivery publishes nothing.
// docs/job-protocol.md quotes it for workers in other languages.
//
//	KEYS[1] jobs stream, KEYS[2] results stream
//	ARGV[1] group, ARGV[2] entry id, ARGV[3] results max length, ARGV[4…] result fields
const completeLua = `local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if acked == 1 then
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(ARGV, 4))
end
return acked
`

var completeScript = redis.NewScript(completeLua)

// Complete runs completeScript. A missing group (the server restarted, or
// the queue was cleaned up) means the delivery is gone too: ErrNotPending.
func (r *Redis) Complete(ctx context.Context, d Delivery, res Result) error {
	args := append([]any{Group, d.ID, DefaultMaxResults}, fieldArgs(res.fields())...)
	acked, err := completeScript.Run(ctx, r.rdb, []string{r.keys.jobs, r.keys.results}, args...).Int()
	switch {
	case err != nil && strings.Contains(err.Error(), "NOGROUP"): // also when wrapped in a script error
		return fmt.Errorf("complete job %q (entry %s) in %q: %w (the consumer group is gone)", res.ID, d.ID, r.keys.jobs, ErrNotPending)
	case err != nil:
		return fmt.Errorf("complete job %q (entry %s) in %q: %w", res.ID, d.ID, r.keys.jobs, err)
	case acked == 0:
		return fmt.Errorf("complete job %q (entry %s) in %q: %w", res.ID, d.ID, r.keys.jobs, ErrNotPending)
	}
	return nil
}

// Ack acknowledges and deletes job entries.
func (r *Redis) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, r.keys.jobs, Group, ids...)
		p.XDel(ctx, r.keys.jobs, ids...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("acknowledge %d jobs in %q: %w", len(ids), r.keys.jobs, err)
	}
	return nil
}

// Results checks the epoch, then reads results with XREAD.
func (r *Redis) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]Result, string, error) {
	if err := r.checkEpoch(ctx); err != nil {
		return nil, "", err
	}
	if cursor == "" {
		cursor = "0-0"
	}
	streams, err := r.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{r.keys.results, cursor},
		Count:   int64(max(limit, 1)),
		Block:   blockArg(block),
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, cursor, nil
	case err != nil:
		return nil, cursor, fmt.Errorf("read results from %q after %s: %w", r.keys.results, cursor, err)
	}
	var out []Result
	for _, s := range streams {
		for _, m := range s.Messages {
			cursor = m.ID
			res, err := parseResult(stringFields(m.Values))
			if err != nil {
				// A result no job can be matched to is skipped, not fatal:
				// one bad worker must not stop the generator.
				continue
			}
			out = append(out, res)
		}
	}
	return out, cursor, nil
}

// checkEpoch returns ErrLost when the epoch key is gone or changed: the
// server restarted without persistence, or the queue was cleaned up.
func (r *Redis) checkEpoch(ctx context.Context) error {
	got, err := r.rdb.Get(ctx, r.keys.epoch).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("check %q: %w", r.keys.epoch, err)
	}
	r.mu.Lock()
	same := got == r.token
	r.mu.Unlock()
	if same {
		return nil
	}
	token, err := r.epoch(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.token = token
	r.mu.Unlock()
	return fmt.Errorf("read results of queue %q: %w (the server restarted or the queue was cleaned up)", r.queue, ErrLost)
}

// Time is the Redis server's clock (TIME).
func (r *Redis) Time(ctx context.Context) (time.Time, error) {
	t, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis TIME: %w", err)
	}
	return t, nil
}

// Depth reads the group's lag and pending count (XINFO GROUPS), the oldest
// pending entry (XPENDING) and the server's clock (TIME).
func (r *Redis) Depth(ctx context.Context) (Depth, error) {
	groups, err := r.rdb.XInfoGroups(ctx, r.keys.jobs).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return Depth{}, nil // no job was ever enqueued
		}
		return Depth{}, fmt.Errorf("read depth of %q: %w", r.keys.jobs, err)
	}
	i := slices.IndexFunc(groups, func(g redis.XInfoGroup) bool { return g.Name == Group })
	pipe := r.rdb.Pipeline()
	xlen := pipe.XLen(ctx, r.keys.jobs)
	now := pipe.Time(ctx)
	var summary *redis.XPendingCmd
	if i >= 0 {
		summary = pipe.XPending(ctx, r.keys.jobs, Group)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Depth{}, fmt.Errorf("read depth of %q: %w", r.keys.jobs, err)
	}
	if i < 0 {
		return Depth{Waiting: xlen.Val()}, nil // no worker has started yet
	}
	g := groups[i]
	d := Depth{Waiting: g.Lag, Pending: g.Pending}
	if d.Waiting < 0 {
		// Redis cannot compute the lag after some deletions. Workers
		// delete the entries they acknowledge, so every entry left is
		// either pending or waiting.
		d.Waiting = max(xlen.Val()-g.Pending, 0)
	}
	if p := summary.Val(); p != nil && p.Count > 0 {
		if ms, ok := entryMillis(p.Lower); ok {
			d.OldestPending = max(now.Val().Sub(time.UnixMilli(ms)), 0)
		}
	}
	return d, nil
}

// entryMillis is the millisecond part of a stream entry id: the server's
// clock when the entry was added.
func entryMillis(id string) (int64, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil
}

// Stop sets the stop key.
func (r *Redis) Stop(ctx context.Context) error { return Stop(ctx, r.rdb, r.queue) }

// Stopped reports whether the stop key exists.
func (r *Redis) Stopped(ctx context.Context) (bool, error) {
	n, err := r.rdb.Exists(ctx, r.keys.stop).Result()
	if err != nil {
		return false, fmt.Errorf("check %q: %w", r.keys.stop, err)
	}
	return n > 0, nil
}

// Register sets the worker's key, JSON, with a TTL of ttl.
func (r *Redis) Register(ctx context.Context, w WorkerInfo, ttl time.Duration) error {
	if err := validateConsumer(w.Name); err != nil {
		return err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("register worker %q: %w", w.Name, err)
	}
	key := r.keys.worker + w.Name
	if err := r.rdb.Set(ctx, key, b, max(ttl, time.Millisecond)).Err(); err != nil {
		return fmt.Errorf("register worker %q at %q: %w", w.Name, key, err)
	}
	return nil
}

// Unregister deletes the worker's key.
func (r *Redis) Unregister(ctx context.Context, name string) error {
	key := r.keys.worker + name
	if err := r.rdb.Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("unregister worker %q at %q: %w", name, key, err)
	}
	return nil
}

// Workers scans the worker keys and reads them.
func (r *Redis) Workers(ctx context.Context) ([]WorkerInfo, error) {
	keys, err := ScanKeys(ctx, r.rdb, r.keys.worker+"*")
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := r.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read workers of queue %q: %w", r.queue, err)
	}
	var out []WorkerInfo
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // expired between SCAN and MGET
		}
		var w WorkerInfo
		if err := json.Unmarshal([]byte(s), &w); err != nil {
			return nil, fmt.Errorf("worker key %q = %q: %w: %w", keys[i], s, ErrParse, err)
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Cleanup deletes every key of the queue; see the package function Cleanup.
func (r *Redis) Cleanup(ctx context.Context) ([]string, error) { return Cleanup(ctx, r.rdb, r.queue) }

// Close closes the client when OpenRedis opened it.
func (r *Redis) Close() error {
	if r.own {
		return r.rdb.Close()
	}
	return nil
}

// Stop tells the workers of queue to stop, by setting its stop key
// ("tare:<queue>:stop") to the time, in unix nanoseconds. Workers check it
// between fetches; the key stays until Cleanup deletes it, so a worker
// started in between exits at once.
func Stop(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	if err := ValidateName(queue); err != nil {
		return err
	}
	key := KeyPrefix(queue) + keyStop
	if err := rdb.Set(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 10), 0).Err(); err != nil {
		return fmt.Errorf("stop queue %q: set %q: %w", queue, key, err)
	}
	return nil
}

// Cleanup deletes exactly the keys of queue, those starting with
// "tare:<queue>:", found with SCAN (never KEYS, which blocks the server),
// and returns them sorted. Keys of other queues — "tare:<queue>x:…" or
// "tare:<other>:…" — and any other key are left alone.
func Cleanup(ctx context.Context, rdb redis.UniversalClient, queue string) ([]string, error) {
	if err := ValidateName(queue); err != nil {
		return nil, err
	}
	prefix := KeyPrefix(queue)
	keys, err := ScanKeys(ctx, rdb, prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("clean up queue %q: %w", queue, err)
	}
	const batch = 256
	for i := 0; i < len(keys); i += batch {
		part := keys[i:min(len(keys), i+batch)]
		for _, k := range part {
			// The pattern cannot match another queue's keys, since queue
			// names hold no ':' and no glob character; check anyway, as
			// deleting a foreign key is the one thing cleanup must not do.
			if !strings.HasPrefix(k, prefix) {
				return nil, fmt.Errorf("clean up queue %q: scan returned foreign key %q", queue, k)
			}
		}
		if err := rdb.Unlink(ctx, part...).Err(); err != nil {
			return nil, fmt.Errorf("clean up queue %q: unlink %d keys: %w", queue, len(part), err)
		}
	}
	return keys, nil
}

// ScanKeys returns the keys matching pattern, sorted and without the
// duplicates SCAN may return.
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	seen := map[string]bool{}
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 512).Result()
		if err != nil {
			return nil, fmt.Errorf("scan %q: %w", pattern, err)
		}
		for _, k := range keys {
			seen[k] = true
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
