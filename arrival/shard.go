package arrival

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Shard is one of Count generators that together offer one run's load;
// Index counts from 1, as people write it: "2/4" is the second of four.
// The zero Shard, like 1/1, is the whole load on one generator.
type Shard struct {
	Index, Count int
}

// ParseShard reads "i/N" with 1 ≤ i ≤ N. Bad input is a *tare.Error with
// code tare.EINVALID naming the value and the accepted form.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n || n > MaxShards {
		return Shard{}, tare.Errorf(tare.EINVALID, "shard must be i/N with 1 <= i <= N <= %d, like 2/4; got %q", MaxShards, s)
	}
	return Shard{Index: i, Count: n}, nil
}

// MaxShards bounds N: more generators than this is a mistake, not a plan.
const MaxShards = 4096

// Sharded reports whether the load is split over more than one generator.
func (s Shard) Sharded() bool { return s.Count > 1 }

// String is "i/N", the form ParseShard reads.
func (s Shard) String() string {
	if s.Count == 0 {
		return "1/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Seed is shard i's own seed: the base seed and i mixed by SplitMix64
// (Steele, Lea and Flood, OOPSLA 2014), whose finaliser sends nearby
// inputs to unrelated outputs, so the N PCG streams are independent and
// no two shards of one run, nor shard i of seeds s and s+1, share one.
// An unsharded run keeps the base seed, so its schedule is the one tare
// always drew for that seed.
func (s Shard) Seed(base uint64) uint64 {
	if !s.Sharded() {
		return base
	}
	return splitMix64(base ^ splitMix64(uint64(s.Index)))
}

// Jobs is shard i's share of a total job count: the total divided by N,
// the first total mod N shards taking one more, so the shares add up.
func (s Shard) Jobs(total int) int {
	if !s.Sharded() || total <= 0 {
		return total
	}
	n := total / s.Count
	if s.Index <= total%s.Count {
		n++
	}
	return n
}

func splitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Split returns shard sh's part of the bounded process New(kind, rate,
// burstiness, seed) limited to jobs arrivals or duration (as Bound).
//
// Poisson splits exactly into independent streams: the superposition of N
// independent Poisson processes at λ/N is a Poisson process at λ, so
// each shard draws its own at rate/N with sh.Seed(seed), bounded at its
// share sh.Jobs(jobs). Gamma and constant do not superpose into
// themselves, so every shard draws the one full-rate schedule with the
// base seed and keeps every Nth arrival (round-robin): together the
// shards offer exactly that schedule.
func Split(kind string, rate, burstiness float64, seed uint64, jobs int, duration time.Duration, sh Shard) (Process, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	return split(kind, sh, jobs, duration, func(scale float64, seed uint64) (Process, error) {
		return New(kind, rate*scale, burstiness, seed)
	}, seed)
}

// split deals shard sh its part of the schedule newProcess makes: a
// Poisson process of its own at scale 1/N with the shard's seed, or every
// Nth arrival of the full schedule (scale 1, the base seed).
func split(kind string, sh Shard, jobs int, duration time.Duration, newProcess func(scale float64, seed uint64) (Process, error), seed uint64) (Process, error) {
	if sh.Count == 0 {
		sh = Shard{Index: 1, Count: 1}
	}
	if sh.Index < 1 || sh.Index > sh.Count {
		return nil, tare.Errorf(tare.EINVALID, "shard must be i/N with 1 <= i <= N; got %d/%d", sh.Index, sh.Count)
	}
	k := strings.ToLower(strings.TrimSpace(kind))
	if k == "" || k == KindPoisson {
		p, err := newProcess(1/float64(sh.Count), sh.Seed(seed))
		if err != nil {
			return nil, err
		}
		return &sharded{Process: Bound(p, sh.Jobs(jobs), duration), sh: sh}, nil
	}
	p, err := newProcess(1, seed)
	if err != nil {
		return nil, err
	}
	return RoundRobin(Bound(p, jobs, duration), sh), nil
}

// RoundRobin keeps arrivals sh.Index−1, sh.Index−1+N, … of p: shard i of N
// in a round-robin deal of one schedule.
func RoundRobin(p Process, sh Shard) Process {
	if !sh.Sharded() {
		return p
	}
	return &roundRobin{p: p, sh: sh}
}

type roundRobin struct {
	p    Process
	sh   Shard
	next int // index in p of the next arrival to yield
	done bool
}

func (r *roundRobin) Next() (time.Duration, bool) {
	if r.done {
		return 0, false
	}
	for {
		at, ok := r.p.Next()
		if !ok {
			r.done = true
			return 0, false
		}
		i := r.next
		r.next++
		if i%r.sh.Count == r.sh.Index-1 {
			return at, true
		}
	}
}

func (r *roundRobin) String() string {
	return fmt.Sprintf("%s, shard %s round-robin", r.p, r.sh)
}

// sharded names the shard in the description of its own Poisson stream.
type sharded struct {
	Process
	sh Shard
}

func (s *sharded) String() string {
	return fmt.Sprintf("%s, shard %s", s.Process, s.sh)
}
