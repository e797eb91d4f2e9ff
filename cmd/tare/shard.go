package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/session"
)

// shardFlags split one run's load over several generators (tare run
// --shard i/N), all writing under one run id to a shared store.
type shardFlags struct {
	shard   string
	index   string // --shard-index: 0-based, as Kubernetes numbers an Indexed Job's pods
	startAt string
	runID   string
}

func (f *shardFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.shard, "shard", "", "this generator's share of the load, i/N like 2/4: poisson arrivals at rate/N from a seed of its own, other processes dealt round-robin; use one --db postgres://… for all N")
	fs.StringVar(&f.index, "shard-index", "", "with --shards N: this generator is shard K+1 of N, K counted from 0 as an Indexed Job's JOB_COMPLETION_INDEX is (--shard-index=$(JOB_COMPLETION_INDEX) in a pod's args)")
	fs.StringVar(&f.startAt, "start-at", "", "start the arrivals at this instant (RFC 3339, like 2026-11-29T14:00:00Z, or Unix seconds), so that the shards start together")
	fs.StringVar(&f.runID, "run-id", "", "the run id the shards share (default with --shard: derived from --label and --start-at, the same on every shard)")
}

// sharding is what the shard flags decided.
type sharding struct {
	shard   arrival.Shard // zero when the run is not sharded
	startAt time.Time     // zero: start now
	group   string        // the run id all shards share; "" to let the store pick one
}

// plan validates the flags against now; shards is --shards. A
// coordinated run gets its id and start from the barrier
// (coordFlags.coordinate), not from here.
func (f *shardFlags) plan(label string, now time.Time, coordinated bool, shards int) (sharding, error) {
	var p sharding
	if f.shard != "" {
		sh, err := arrival.ParseShard(f.shard)
		if err != nil {
			return p, session.Flagged(err, "")
		}
		p.shard = sh
	}
	if f.index != "" {
		sh, err := f.indexed(shards)
		if err != nil {
			return p, err
		}
		p.shard = sh
	}
	if f.startAt != "" {
		t, err := parseInstant(f.startAt)
		if err != nil {
			return p, err
		}
		if now.Sub(t) > time.Second {
			return p, tare.Errorf(tare.EINVALID, "--start-at %s is already past (it is %s): give an instant in the future", f.startAt, now.UTC().Format(time.RFC3339))
		}
		p.startAt = t
	}
	switch {
	case f.runID != "":
		if strings.ContainsAny(f.runID, " \t\n/") {
			return p, tare.Errorf(tare.EINVALID, "--run-id must have no spaces or slashes; got %q", f.runID)
		}
		p.group = f.runID
	case p.shard.Sharded() && label != "" && !p.startAt.IsZero():
		p.group = groupID(label, p.startAt)
	case p.shard.Sharded() && !coordinated:
		return p, tare.Errorf(tare.EINVALID, "--shard %s needs the run id the shards share: give --run-id ID, or --label and --start-at (the same on every shard)", f.shard)
	}
	return p, nil
}

// indexed is the shard --shard-index K --shards N names: K+1 of N.
func (f *shardFlags) indexed(shards int) (arrival.Shard, error) {
	k, err := strconv.Atoi(f.index)
	switch {
	case f.shard != "":
		return arrival.Shard{}, tare.Errorf(tare.EINVALID, "give --shard i/N or --shard-index K with --shards N, not both")
	case err != nil && strings.Contains(f.index, "$("):
		return arrival.Shard{}, tare.Errorf(tare.EINVALID, "--shard-index got %q: Kubernetes did not expand the variable; JOB_COMPLETION_INDEX is set only in the pods of a Job with completionMode: Indexed", f.index)
	case err != nil || k < 0:
		return arrival.Shard{}, tare.Errorf(tare.EINVALID, "--shard-index must be a whole number from 0 (Kubernetes' JOB_COMPLETION_INDEX); got %q", f.index)
	case shards < 1:
		return arrival.Shard{}, tare.Errorf(tare.EINVALID, "--shard-index %d needs the number of shards: --shards N", k)
	case k >= shards || shards > arrival.MaxShards:
		return arrival.Shard{}, tare.Errorf(tare.EINVALID, "--shard-index %d of --shards %d: K must be below N, and N at most %d (an Indexed Job's completions are the shards)", k, shards, arrival.MaxShards)
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

// rowID is the stored id of this generator's part of the run.
func (p sharding) rowID() string {
	if p.group == "" || !p.shard.Sharded() {
		return p.group
	}
	return fmt.Sprintf("%s%s%d-of-%d", p.group, tare.ShardSep, p.shard.Index, p.shard.Count)
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
	return time.Time{}, tare.Errorf(tare.EINVALID, "--start-at must be an RFC 3339 instant like 2026-11-29T14:00:00Z or Unix seconds like 1795960800; got %q", s)
}

// waitUntil sleeps until t, or returns ctx's error if it ends first.
func waitUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d > 0 {
		return tare.Sleep(ctx, d)
	}
	return nil
}
