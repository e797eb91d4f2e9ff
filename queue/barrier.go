package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
)

// The shards of one sharded run agree on when to start and on what time
// it is through a Redis server they all reach: no cluster protocol of
// tare's own.
//
// The barrier: each of N shards adds its index to a set keyed by the run
// (SADD), and the shard whose join makes the set whole writes the start
// instant, Redis's own TIME plus a lead, with SET NX, so exactly one value
// wins. Everyone polls for that key and starts at the instant it names.
//
//	shard 1 ─SADD─┐                          ┌─ GET start → T ─ wait ─▶ go at T
//	shard 2 ─SADD─┼─ SCARD = N ─ SET NX T ───┼─ GET start → T ─ wait ─▶ go at T
//	shard N ─SADD─┘   (the last to join)     └─ GET start → T ─ wait ─▶ go at T
//
// The clock: Offset reads Redis TIME between two local readings and takes
// the local midpoint as the instant Redis answered (Cristian's algorithm),
// so offset = redis − local midpoint, with an error of at most half the
// round trip. The start instant is in Redis's clock; each shard converts
// it to its own by subtracting its offset, so shards whose clocks disagree
// still start together, and records stored in local clocks can be put on
// one time axis again with the offsets recorded at start and end.
//
//	tare:barrier:<id>:joined    SET     the shard indexes that joined
//	tare:barrier:<id>:start     STRING  the agreed start, Unix nanoseconds of Redis TIME
//	tare:barrier:<id>:next      STRING  the counter Index hands out
//	tare:barrier:<id>:members   HASH    shard index → what it said of itself (Member)

// DefaultBarrierLead is how far after the last join the agreed start lies: long
// enough for every shard to read the start key at the poll interval and
// measure its clock.
const DefaultBarrierLead = 2 * time.Second

// DefaultBarrierTTL bounds how long a barrier's keys outlive their run, so a
// crashed shard leaves nothing behind for long.
const DefaultBarrierTTL = 10 * time.Minute

// barrierAfterStart is how long a barrier's keys live past its start instant.
const barrierAfterStart = 30 * time.Second

// barrierPoll is how often a waiting shard reads the start key.
const barrierPoll = 50 * time.Millisecond

// ErrStaleBarrier is wrapped when a barrier's start instant already passed: the
// key belongs to an earlier run with the same id.
var ErrStaleBarrier = errors.New("barrier already used")

// BarrierKey is the key prefix of the barrier of the run id (or
// "label:<label>"): "tare:barrier:<id>".
func BarrierKey(id string) string { return "tare:barrier:" + id }

// Coordinator is a connection to the Redis server at which the shards of
// a run meet: their barrier, and the clock each measures its own against.
type Coordinator struct {
	rdb *redis.Client
}

// NewCoordinator connects to the Redis server at rawURL
// (redis://[user:password@]host:port/db). The error, for a URL that does
// not parse, is the parser's. Close closes the connection.
func NewCoordinator(rawURL string) (*Coordinator, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return &Coordinator{rdb: redis.NewClient(opt)}, nil
}

// Offset measures this host's clock offset against the server's TIME,
// best of n readings.
func (c *Coordinator) Offset(ctx context.Context, n int) (Clock, error) {
	return readClock(ctx, c.rdb, n)
}

// Barrier is the barrier of the run id (BarrierKey) for count shards, on
// this server, with the default lead and TTL.
func (c *Coordinator) Barrier(id string, count int) *Barrier {
	return &Barrier{RDB: c.rdb, Key: BarrierKey(id), Count: count}
}

// Close closes the connection.
func (c *Coordinator) Close() error { return c.rdb.Close() }

// Clock is one reading of the offset between this host and the Redis
// server.
type Clock struct {
	Offset time.Duration // Redis TIME − the local midpoint of the call
	RTT    time.Duration // the round trip; |error| ≤ RTT/2
	At     time.Time     // local midpoint of the reading
}

// readClock measures the clock offset against Redis TIME: the best of n
// readings, the one with the shortest round trip, whose error bound is
// the tightest.
func readClock(ctx context.Context, rdb redis.UniversalClient, n int) (Clock, error) {
	off, rtt, at, err := tare.MeasureOffset(time.Now, func() (time.Time, error) { return rdb.Time(ctx).Result() }, n)
	if err != nil {
		return Clock{}, fmt.Errorf("read redis TIME: %w", err)
	}
	return Clock{Offset: off, RTT: rtt, At: at}, nil
}

// Barrier is one run's meeting point.
type Barrier struct {
	RDB   redis.UniversalClient
	Key   string        // the run's key prefix, like BarrierKey(run id)
	Count int           // N, the shards to wait for
	Lead  time.Duration // DefaultBarrierLead when zero
	TTL   time.Duration // DefaultBarrierTTL when zero
	// Member is what this shard tells the others as it joins (its host
	// and pid, say), read back with Members; "" tells nothing.
	Member string
}

// Start is the agreed start of a run, in both clocks.
type Start struct {
	Redis time.Time // as the Redis server's clock has it: the same for every shard
	Local time.Time // in this host's clock: Redis − clock.Offset
}

// Join adds shard index (1..Count) to the barrier and waits until all
// Count have joined; it returns the agreed start instant. It returns ctx's error when
// ctx ends first, and an error wrapping ErrStaleBarrier when the barrier's start
// already passed.
func (b *Barrier) Join(ctx context.Context, index int, clock Clock) (Start, error) {
	lead, ttl := b.Lead, b.TTL
	if lead <= 0 {
		lead = DefaultBarrierLead
	}
	if ttl <= 0 {
		ttl = DefaultBarrierTTL
	}
	members, start, said := b.Key+":joined", b.Key+":start", b.Key+":members"
	pipe := b.RDB.TxPipeline()
	// What the shard says of itself goes in with its join, so that every
	// member has said it once all have joined.
	if b.Member != "" {
		pipe.HSet(ctx, said, strconv.Itoa(index), b.Member)
		pipe.Expire(ctx, said, ttl)
	}
	pipe.SAdd(ctx, members, index)
	pipe.Expire(ctx, members, ttl)
	card := pipe.SCard(ctx, members)
	if _, err := pipe.Exec(ctx); err != nil {
		return Start{}, fmt.Errorf("join barrier %q: %w", b.Key, err)
	}
	if int(card.Val()) >= b.Count {
		now, err := b.RDB.Time(ctx).Result()
		if err != nil {
			return Start{}, fmt.Errorf("join barrier %q: read redis TIME: %w", b.Key, err)
		}
		// Once the start is set, the keys need only outlive the lead and
		// the slowest reader: a rerun under the same key soon after works.
		keep := lead + barrierAfterStart
		at := now.Add(lead).UnixNano()
		pipe := b.RDB.TxPipeline()
		pipe.SetNX(ctx, start, strconv.FormatInt(at, 10), keep)
		pipe.Expire(ctx, members, keep)
		pipe.Expire(ctx, said, keep)
		if _, err := pipe.Exec(ctx); err != nil {
			return Start{}, fmt.Errorf("join barrier %q: set start: %w", b.Key, err)
		}
	}
	return b.wait(ctx, start, clock)
}

// Members returns what each shard that joined said of itself (Member),
// by shard index. Once Join has returned, every shard has joined, and so
// said it.
func (b *Barrier) Members(ctx context.Context) (map[int]string, error) {
	m, err := b.RDB.HGetAll(ctx, b.Key+":members").Result()
	if err != nil {
		return nil, fmt.Errorf("read the members of barrier %q: %w", b.Key, err)
	}
	out := make(map[int]string, len(m))
	for k, v := range m {
		if i, err := strconv.Atoi(k); err == nil {
			out[i] = v
		}
	}
	return out, nil
}

// wait polls the start key until it is set.
func (b *Barrier) wait(ctx context.Context, start string, clock Clock) (Start, error) {
	t := time.NewTicker(barrierPoll)
	defer t.Stop()
	for {
		v, err := b.RDB.Get(ctx, start).Result()
		switch {
		case err == nil:
			ns, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil {
				return Start{}, tare.Errorf(tare.EINVALID, "barrier %q: start key holds %q, not Unix nanoseconds", start, v)
			}
			agreed := time.Unix(0, ns)
			local := agreed.Add(-clock.Offset)
			if time.Since(local) > time.Second {
				return Start{}, fmt.Errorf("barrier %q started at %s: %w (give another run id, or wait %s for its keys to expire)",
					b.Key, local.UTC().Format(time.RFC3339), ErrStaleBarrier, barrierAfterStart)
			}
			return Start{Redis: agreed, Local: local}, nil
		case !errors.Is(err, redis.Nil):
			return Start{}, fmt.Errorf("wait at barrier %q: %w", b.Key, err)
		}
		select {
		case <-ctx.Done():
			return Start{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Index hands out shard indexes 1, 2, … in the order shards ask, for
// shards started with identical commands (a Kubernetes indexed Job or N
// copies of one script): the counter lives beside the barrier and
// expires with it.
func (b *Barrier) Index(ctx context.Context) (int, error) {
	ttl := b.TTL
	if ttl <= 0 {
		ttl = DefaultBarrierTTL
	}
	pipe := b.RDB.TxPipeline()
	n := pipe.Incr(ctx, b.Key+":next")
	pipe.Expire(ctx, b.Key+":next", ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("take a shard index at %q: %w", b.Key, err)
	}
	if int(n.Val()) > b.Count {
		return 0, tare.Errorf(tare.EINVALID, "barrier %q already has its %d shards: a shard too many was started, or the key is left from an earlier run (give another run id)", b.Key, b.Count)
	}
	return int(n.Val()), nil
}
