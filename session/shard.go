package session

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/settings"
)

// ShardSpec splits one run's load over several generators (tare run
// --shard i/N), all writing under one run id to a shared store, started
// together at an instant or through a Redis barrier.
type ShardSpec struct {
	Shard      string // i/N
	Index      string // --shard-index: 0-based, as Kubernetes numbers an Indexed Job's pods
	StartAt    string
	RunID      string
	Coordinate string // the barrier's Redis URL
	Shards     int
}

func (f *ShardSpec) Fields() []settings.Field {
	return []settings.Field{
		{Flag: "shard", Value: settings.String(&f.Shard), Usage: "this generator's share of the load, i/N like 2/4: poisson arrivals at rate/N from a seed of its own, other processes dealt round-robin; use one --db postgres://… for all N"},
		{Flag: "shard-index", Value: settings.String(&f.Index), Usage: "with --shards N: this generator is shard K+1 of N, K counted from 0 as an Indexed Job's JOB_COMPLETION_INDEX is (--shard-index=$(JOB_COMPLETION_INDEX) in a pod's args)"},
		{Flag: "start-at", Value: settings.String(&f.StartAt), Usage: "start the arrivals at this instant (RFC 3339, like 2026-11-29T14:00:00Z, or Unix seconds), so that the shards start together"},
		{Flag: "run-id", Value: settings.String(&f.RunID), Usage: "the run id the shards share (default with --shard: derived from --label and --start-at, the same on every shard)"},
		{Flag: "coordinate", Value: settings.String(&f.Coordinate), Usage: "start with the other shards through this Redis (redis://…): all start together once all have joined, and each measures its clock against Redis TIME"},
		{Flag: "shards", Value: settings.Int(&f.Shards), Usage: "the number of shards: with --shard-index K this is shard K+1; with --coordinate alone each takes the next free index"},
	}
}

// Sharding is what the shard settings decided, and the barrier joined.
type Sharding struct {
	Shard   arrival.Shard // zero when the run is not sharded
	StartAt time.Time     // zero: start now
	Group   string        // the run id all shards share; "" to let the store pick one
	co      *queue.Coordinator
	clock   queue.Clock // the offset read at the barrier
	peers   []int       // the pids of the other shards of the run on this host
}

// Plan checks the settings against now. A coordinated run gets its id
// and start from the barrier (Join), not from here.
func (f *ShardSpec) Plan(label string, now time.Time) (*Sharding, error) {
	p, err := f.plan(label, now)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (f *ShardSpec) plan(label string, now time.Time) (Sharding, error) {
	var p Sharding
	coordinated := f.Coordinate != ""
	if f.Shard != "" {
		sh, err := arrival.ParseShard(f.Shard)
		if err != nil {
			return p, Flagged(err, "")
		}
		p.Shard = sh
	}
	if f.Index != "" {
		sh, err := f.indexed()
		if err != nil {
			return p, err
		}
		p.Shard = sh
	}
	if f.StartAt != "" {
		t, err := parseInstant(f.StartAt)
		if err != nil {
			return p, err
		}
		if now.Sub(t) > time.Second {
			return p, settings.Errorf("start-at", "%s is already past (it is %s): give an instant in the future", f.StartAt, now.UTC().Format(time.RFC3339))
		}
		p.StartAt = t
	}
	switch {
	case f.RunID != "":
		if strings.ContainsAny(f.RunID, " \t\n/") {
			return p, settings.Errorf("run-id", "must have no spaces or slashes; got %q", f.RunID)
		}
		p.Group = f.RunID
	case p.Shard.Sharded() && label != "" && !p.StartAt.IsZero():
		p.Group = groupID(label, p.StartAt)
	case p.Shard.Sharded() && !coordinated:
		return p, settings.Errorf("shard", "%s needs the run id the shards share: give %s ID, or %s and %s (the same on every shard)", f.Shard, settings.Name("run-id"), settings.Name("label"), settings.Name("start-at"))
	}
	return p, nil
}

// indexed is the shard --shard-index K --shards N names: K+1 of N.
func (f *ShardSpec) indexed() (arrival.Shard, error) {
	shards := f.Shards
	k, err := strconv.Atoi(f.Index)
	switch {
	case f.Shard != "":
		return arrival.Shard{}, settings.Errorf("", "give %s i/N or %s K with %s N, not both", settings.Name("shard"), settings.Name("shard-index"), settings.Name("shards"))
	case err != nil && strings.Contains(f.Index, "$("):
		return arrival.Shard{}, settings.Errorf("shard-index", "got %q: Kubernetes did not expand the variable; JOB_COMPLETION_INDEX is set only in the pods of a Job with completionMode: Indexed", f.Index)
	case err != nil || k < 0:
		return arrival.Shard{}, settings.Errorf("shard-index", "must be a whole number from 0 (Kubernetes' JOB_COMPLETION_INDEX); got %q", f.Index)
	case shards < 1:
		return arrival.Shard{}, settings.Errorf("shard-index", "%d needs the number of shards: %s N", k, settings.Name("shards"))
	case k >= shards || shards > arrival.MaxShards:
		return arrival.Shard{}, settings.Errorf("shard-index", "%d of %s %d: K must be below N, and N at most %d (an Indexed Job's completions are the shards)", k, settings.Name("shards"), shards, arrival.MaxShards)
	}
	return arrival.Shard{Index: k + 1, Count: shards}, nil
}

// groupNamespace scopes the name-based UUIDs of shard groups.
var groupNamespace = uuid.MustParse("6f0d3c8e-5a41-4f0e-9b1e-2a7d1c0e7a10")

// groupID is the run id shards derive without talking to each other: a
// UUIDv5 of the label and the start instant (to the nanosecond, in UTC),
// so every shard given the same two gets the same id, and a rerun with
// another --start-at gets another.
func groupID(label string, startAt time.Time) string {
	return uuid.NewSHA1(groupNamespace, []byte(label+"\x00"+startAt.UTC().Format(time.RFC3339Nano))).String()
}

// RowID is the stored id of this generator's part of the run.
func (p *Sharding) RowID() string {
	if p.Group == "" || !p.Shard.Sharded() {
		return p.Group
	}
	return fmt.Sprintf("%s%s%d-of-%d", p.Group, tare.ShardSep, p.Shard.Index, p.Shard.Count)
}

// parseInstant reads an RFC 3339 instant or Unix seconds (fractions allowed).
func parseInstant(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs > 0 && secs < 1e11 {
		whole := int64(secs)
		return time.Unix(whole, int64((secs-float64(whole))*1e9)), nil
	}
	return time.Time{}, settings.Errorf("start-at", "must be an RFC 3339 instant like 2026-11-29T14:00:00Z or Unix seconds like 1795960800; got %q", s)
}

// Join joins the run's barrier, when the spec names one, and fills in the
// shard, the start instant and the run id of p. Close p afterwards.
func (f *ShardSpec) Join(ctx context.Context, label string, p *Sharding) error {
	if f.Coordinate == "" {
		if f.Shards != 0 && f.Index == "" {
			return settings.Errorf("shards", "needs %s redis://… or %s K; without them give each generator %s i/N", settings.Name("coordinate"), settings.Name("shard-index"), settings.Name("shard"))
		}
		return nil
	}
	if f.StartAt != "" {
		return settings.Errorf("coordinate", "agrees on the start through Redis: give it or %s, not both", settings.Name("start-at"))
	}
	count := p.Shard.Count
	switch {
	case count == 0 && f.Shards < 1:
		return settings.Errorf("coordinate", "needs the number of shards: %s N, or %s i/N", settings.Name("shards"), settings.Name("shard"))
	case count != 0 && f.Shards != 0 && f.Shards != count:
		return settings.Errorf("shards", "%d disagrees with %s %s", f.Shards, settings.Name("shard"), p.Shard)
	case count == 0:
		count = f.Shards
	}
	barrierID := f.RunID
	if barrierID == "" {
		if label == "" {
			return settings.Errorf("coordinate", "needs the run id the shards share: give %s ID, or a %s (the same on every shard)", settings.Name("run-id"), settings.Name("label"))
		}
		barrierID = "label:" + label
	}
	co, err := queue.NewCoordinator(f.Coordinate)
	if err != nil {
		return settings.Errorf("coordinate", "must be a redis:// URL; got %q: %w", tare.RedactText(f.Coordinate), err)
	}
	clock, err := co.Offset(ctx, 5)
	if err != nil {
		co.Close()
		return tare.SettingErrorf(tare.EUNAVAILABLE, "coordinate", "%s: %w", tare.RedactText(f.Coordinate), err)
	}
	b := co.Barrier(barrierID, count)
	// Each shard says where it runs, so that shards on one host count
	// each other as tare, not as neighbours.
	table, tableErr := host.ProcessTable("")
	if tableErr == nil {
		b.Member = strconv.Itoa(os.Getpid()) + " " + table
	}
	if p.Shard.Count == 0 {
		i, err := b.Index(ctx)
		if err != nil {
			co.Close()
			return err
		}
		p.Shard = arrival.Shard{Index: i, Count: count}
	}
	start, err := b.Join(ctx, p.Shard.Index, clock)
	if err != nil {
		co.Close()
		return fmt.Errorf("shard %s: %w", p.Shard, err)
	}
	p.StartAt = start.Local
	if p.Group == "" {
		p.Group = groupID(label, start.Redis)
	}
	p.co, p.clock = co, clock
	if tableErr == nil {
		members, err := b.Members(ctx)
		if err != nil {
			co.Close()
			return fmt.Errorf("shard %s: %w", p.Shard, err)
		}
		p.peers = peersOf(members, p.Shard.Index, table)
	}
	return nil
}

// peersOf are the pids of the shards of members (index → "pid table")
// other than self that see the process table this one does.
func peersOf(members map[int]string, self int, table string) []int {
	var pids []int
	for i, m := range members {
		pidText, theirs, _ := strings.Cut(m, " ")
		pid, err := strconv.Atoi(pidText)
		if i != self && theirs == table && err == nil && pid > 0 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// Close closes the barrier's connection, if one was joined.
func (c *Sharding) Close() {
	if c.co != nil {
		c.co.Close()
	}
}

// Record stores the clock offsets in the run's configuration: the start
// one now, and the end one when the run finishes (Finish). The other
// shards of the run on this host are tare in its ledger (a process of the
// same run is no neighbour), and their pids are recorded too.
func (c *Sharding) Record(cfg *Config) {
	if c.co == nil {
		return
	}
	run := &cfg.Run
	if run.Config == nil {
		run.Config = map[string]string{}
	}
	run.Config[tare.ConfigClockStart] = msString(c.clock.Offset)
	run.Config[tare.ConfigClockRTT] = msString(c.clock.RTT)
	var peers []string
	for _, pid := range c.peers {
		// One that is gone already (it failed) is no process to count.
		if host.Exists("", pid) && !slices.Contains(cfg.Host.Tare, pid) {
			cfg.Host.Tare = append(slices.Clip(cfg.Host.Tare), pid)
			peers = append(peers, strconv.Itoa(pid))
		}
	}
	if len(peers) > 0 {
		run.Config[tare.ConfigShardPeers] = strings.Join(peers, ",")
	}
}

// Finish reads the clock again at the end of the run and records it.
func (c *Sharding) Finish(s *tare.Summary) {
	if c.co == nil {
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
	s.Run.Config[tare.ConfigClockRTT] = msString(max(end.RTT, c.clock.RTT))
}

func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}
