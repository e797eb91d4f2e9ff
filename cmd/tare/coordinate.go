package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/coord"
)

// coordFlags start the shards of a run together through a Redis barrier.
type coordFlags struct {
	url    string
	shards int
}

func (f *coordFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "coordinate", "", "start with the other shards through this Redis (redis://…): all start together once all have joined, and each measures its clock against Redis TIME")
	fs.IntVar(&f.shards, "shards", 0, "with --coordinate and no --shard: the number of shards; each takes the next free index")
}

// The keys a shard records in its run's configuration: its clock offset
// against the Redis server (Redis − local, in milliseconds) at the start
// and the end of the run, and the round trip that bounds their error.
const (
	configClockStart = "clock.offset_start_ms"
	configClockEnd   = "clock.offset_end_ms"
	configClockRTT   = "clock.rtt_ms"
)

// DefaultClockTolerance is the largest clock offset against the
// coordinating Redis a shard may have for its records to be merged onto
// one time axis with the others'.
const DefaultClockTolerance = 50 * time.Millisecond

// coordination is a joined barrier: the client, to read the clock again at
// the end of the run, and the offset read at its start.
type coordination struct {
	rdb   *redis.Client
	start coord.Clock
}

// coordinate joins the run's barrier and fills in the shard, the start
// instant and the run id. The caller closes the returned client.
func (f *coordFlags) coordinate(ctx context.Context, sf *shardFlags, label string, p *sharding) (*coordination, error) {
	if f.url == "" {
		if f.shards != 0 {
			return nil, tare.Errorf(tare.EINVALID, "--shards needs --coordinate redis://…; without it give each generator --shard i/N")
		}
		return nil, nil
	}
	if sf.startAt != "" {
		return nil, tare.Errorf(tare.EINVALID, "--coordinate agrees on the start through Redis: give it or --start-at, not both")
	}
	count := p.shard.Count
	switch {
	case count == 0 && f.shards < 1:
		return nil, tare.Errorf(tare.EINVALID, "--coordinate needs the number of shards: --shards N, or --shard i/N")
	case count != 0 && f.shards != 0 && f.shards != count:
		return nil, tare.Errorf(tare.EINVALID, "--shards %d disagrees with --shard %s", f.shards, p.shard)
	case count == 0:
		count = f.shards
	}
	barrierID := sf.runID
	if barrierID == "" {
		if label == "" {
			return nil, tare.Errorf(tare.EINVALID, "--coordinate needs the run id the shards share: give --run-id ID, or a --label (the same on every shard)")
		}
		barrierID = "label:" + label
	}
	opt, err := redis.ParseURL(f.url)
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "--coordinate must be a redis:// URL; got %q: %w", tare.RedactText(f.url), err)
	}
	rdb := redis.NewClient(opt)
	clock, err := coord.Offset(ctx, rdb, 5)
	if err != nil {
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "--coordinate %s: %w", tare.RedactText(f.url), err)
	}
	b := coord.Barrier{RDB: rdb, Key: "tare:barrier:" + barrierID, Count: count}
	if p.shard.Count == 0 {
		i, err := b.Index(ctx)
		if err != nil {
			rdb.Close()
			return nil, err
		}
		p.shard = arrival.Shard{Index: i, Count: count}
	}
	start, err := b.Join(ctx, p.shard.Index, clock)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("shard %s: %w", p.shard, err)
	}
	p.startAt = start.Local
	if p.group == "" {
		p.group = groupID(label, start.Redis)
	}
	return &coordination{rdb: rdb, start: clock}, nil
}

// record stores the clock offsets in the run's configuration: the start
// one now, and the end one when the run finishes.
func (c *coordination) record(run *tare.Run) {
	if c == nil {
		return
	}
	if run.Config == nil {
		run.Config = map[string]string{}
	}
	run.Config[configClockStart] = msString(c.start.Offset)
	run.Config[configClockRTT] = msString(c.start.RTT)
}

// finish reads the clock again at the end of the run and records it.
func (c *coordination) finish(s *tare.Summary) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	end, err := coord.Offset(ctx, c.rdb, 5)
	if err != nil {
		s.Verdict.Warnings = append(s.Verdict.Warnings, "the clock offset at the end of the run could not be read: "+err.Error())
		return
	}
	if s.Run.Config == nil {
		s.Run.Config = map[string]string{}
	}
	s.Run.Config[configClockEnd] = msString(end.Offset)
	s.Run.Config[configClockRTT] = msString(max(end.RTT, c.start.RTT))
}

func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// shardClock is a stored shard's clock offset against the coordinating
// Redis: the mean of its start and end readings, and the largest of them
// in size; ok is false when the shard was not coordinated.
func shardClock(run tare.Run) (mean, worst time.Duration, ok bool) {
	var sum time.Duration
	var n int
	for _, k := range []string{configClockStart, configClockEnd} {
		v, err := strconv.ParseFloat(run.Config[k], 64)
		if err != nil {
			continue
		}
		d := time.Duration(v * float64(time.Millisecond))
		sum, n = sum+d, n+1
		worst = max(worst, d.Abs())
	}
	if n == 0 {
		return 0, 0, false
	}
	return sum / time.Duration(n), worst, true
}
