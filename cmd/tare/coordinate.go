package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/queue"
)

// coordFlags start the shards of a run together through a Redis barrier.
type coordFlags struct {
	url    string
	shards int
}

func (f *coordFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "coordinate", "", "start with the other shards through this Redis (redis://…): all start together once all have joined, and each measures its clock against Redis TIME")
	fs.IntVar(&f.shards, "shards", 0, "the number of shards: with --shard-index K this is shard K+1; with --coordinate alone each takes the next free index")
}

// coordination is a joined barrier: the connection, to read the clock
// again at the end of the run, and the offset read at its start.
type coordination struct {
	co    *queue.Coordinator
	start queue.Clock
}

// coordinate joins the run's barrier and fills in the shard, the start
// instant and the run id. The caller closes the returned coordination.
func (f *coordFlags) coordinate(ctx context.Context, sf *shardFlags, label string, p *sharding) (*coordination, error) {
	if f.url == "" {
		if f.shards != 0 && sf.index == "" {
			return nil, tare.Errorf(tare.EINVALID, "--shards needs --coordinate redis://… or --shard-index K; without them give each generator --shard i/N")
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
	co, err := queue.NewCoordinator(f.url)
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "--coordinate must be a redis:// URL; got %q: %w", tare.RedactText(f.url), err)
	}
	clock, err := co.Offset(ctx, 5)
	if err != nil {
		co.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "--coordinate %s: %w", tare.RedactText(f.url), err)
	}
	b := co.Barrier(barrierID, count)
	if p.shard.Count == 0 {
		i, err := b.Index(ctx)
		if err != nil {
			co.Close()
			return nil, err
		}
		p.shard = arrival.Shard{Index: i, Count: count}
	}
	start, err := b.Join(ctx, p.shard.Index, clock)
	if err != nil {
		co.Close()
		return nil, fmt.Errorf("shard %s: %w", p.shard, err)
	}
	p.startAt = start.Local
	if p.group == "" {
		p.group = groupID(label, start.Redis)
	}
	return &coordination{co: co, start: clock}, nil
}

// close closes the connection; a nil coordination has none.
func (c *coordination) close() {
	if c != nil {
		c.co.Close()
	}
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
	run.Config[tare.ConfigClockStart] = msString(c.start.Offset)
	run.Config[tare.ConfigClockRTT] = msString(c.start.RTT)
}

// finish reads the clock again at the end of the run and records it.
func (c *coordination) finish(s *tare.Summary) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	end, err := c.co.Offset(ctx, 5)
	if err != nil {
		s.Verdict.Warnings = append(s.Verdict.Warnings, "the clock offset at the end of the run could not be read: "+err.Error())
		return
	}
	if s.Run.Config == nil {
		s.Run.Config = map[string]string{}
	}
	s.Run.Config[tare.ConfigClockEnd] = msString(end.Offset)
	s.Run.Config[tare.ConfigClockRTT] = msString(max(end.RTT, c.start.RTT))
}

func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}
