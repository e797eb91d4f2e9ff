package host

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/schedprobe"
)

// The probe's groups of waiters: the system under test's threads, tare's,
// and for tare check (Config.WatchBusiest) the busiest other processes,
// one group each.
const (
	groupSUT     = 0
	groupTare    = 1
	groupBusiest = 2
)

// DefaultWatchBusiest is how many of the busiest other processes tare
// check has the probe watch (Config.WatchBusiest): each is shown with
// whom it waited behind.
const DefaultWatchBusiest = 3

// maxNamed is how many named owners (other processes, kernel threads) a
// tick's blame keeps; the rest are summed, unnamed, under their owner.
const maxNamed = 8

// blamer hands the scheduler probe the watched processes at every reading
// and turns what it counted into each sample's Blame. Without a probe it
// does nothing, and why says why.
type blamer struct {
	probe *schedprobe.Probe
	why   string

	// pending is what the probe counted since the last sample that was
	// made: a reading whose sample fails leaves it for the next one.
	pending schedprobe.Counts
	charges map[chargeKey]int // index in pending.Charges

	measured map[int]schedprobe.Watch  // the system under test's and tare's processes, at the last reading
	spare    map[int]schedprobe.Watch  // the one before: the two swap
	watch    map[int]schedprobe.Watch  // scratch: what apply hands the probe
	busiest  int                       // how many of the busiest other processes to watch (tare check)
	waiters  map[int]tare.ProcessShare // group → the busiest process it watches
	failed   bool                      // a Read failed since the last sample
	exits    []schedprobe.Exit         // exited threads read, not yet added to a reading of their group

	// fresh counts the samples whose run delay is not compared with
	// schedstat's since the measured processes changed: the one that
	// ends at the change (schedstat's run delay of a process seen for the
	// first time counts waits from before), and the one that starts at
	// it (the probe did not see the waits already under way).
	fresh int

	// ended are the probe's waits that ended, cumulative, at the moment
	// the sampler read schedstat's of the same group (around): the truth
	// check compares the two. runDelay is their growth since the last
	// sample. half is half the probe's growth while schedstat was read,
	// how far the two may be apart because of when each was read, and
	// spread the sum of that at both ends of the sample.
	ended, runDelay, half [2]time.Duration
	spread                time.Duration

	// The probe's stretches (waits.go): those read that ended after the
	// last tick's end (cut), the ones lost since, the clock that dates
	// them, and the holders' commands of the last tick's charges.
	stretches []schedprobe.Stretch
	mine      []schedprobe.Stretch // takeWaits' of a tick, its array reused
	cut       time.Duration
	waitsLost int64
	clock     waitClock
	named     map[chargeKey]string
}

// chargeKey is a charge's identity: the waiters' group and the holder.
type chargeKey struct {
	group int
	kind  schedprobe.Kind
	hgrp  int
	tgid  int
}

// newBlamer opens the probe when cfg asks for it. A probe that cannot run
// here is no error: blame is estimated, and why says so.
func newBlamer(cfg Config, types *schedprobe.KernelTypes) *blamer {
	b := &blamer{
		charges:  map[chargeKey]int{},
		measured: map[int]schedprobe.Watch{},
		spare:    map[int]schedprobe.Watch{},
		watch:    map[int]schedprobe.Watch{},
		waiters:  map[int]tare.ProcessShare{},
		busiest:  min(cfg.WatchBusiest, schedprobe.Groups-groupBusiest),
		named:    map[chargeKey]string{},
	}
	switch {
	case !cfg.SchedProbe:
		b.why = "the scheduler probe is off"
		return b
	case cfg.ProcRoot != DefaultProcRoot:
		b.why = "the scheduler probe watches the live /proc only, not " + cfg.ProcRoot
		return b
	}
	o := probeOptions()
	o.KernelTypes = types
	p, err := schedprobe.OpenWith(o)
	if err != nil {
		b.why = err.Error()
		return b
	}
	b.probe = p
	b.clock.measure()
	return b
}

// around runs read, the sampler's reading of schedstat's run delay of
// group's threads (groupSUT or groupTare), between two readings of the
// probe's ended waits of the group, and takes their midpoint as the
// probe's figure at the same moment: a sampler that waits for a CPU while
// it reads does not show as disagreement.
func (b *blamer) around(group int, read func() bool) bool {
	if b.probe == nil {
		return read()
	}
	before, err := b.probe.Waited()
	ok := read()
	after, err2 := b.probe.Waited()
	if err != nil || err2 != nil {
		b.failed = true
		return ok
	}
	half := (after[group] - before[group]) / 2
	mid := before[group] + half
	b.runDelay[group] += mid - b.ended[group]
	b.ended[group] = mid
	b.spread += half + b.half[group]
	b.half[group] = half
	return ok
}

// exited adds to a reading of group's threads (delays and owner: thread
// id → its run delay, its process) those the probe saw exit since, with
// their final run delay, and marks them final. Schedstat alone loses the
// waits of a thread between the last reading and its exit, and all of a
// thread that came and went between two readings, while the probe counts
// them: on a pool that starts threads per task, most ticks.
func (b *blamer) exited(group int, delays map[int]uint64, owner map[int]int, final map[int]bool) {
	if b.probe == nil {
		return
	}
	exits, err := b.probe.Exited()
	if err != nil {
		b.failed = true
		return
	}
	b.exits = append(b.exits, exits...)
	kept := b.exits[:0]
	for _, e := range b.exits {
		switch e.Group {
		case group:
			delays[e.TID] = max(delays[e.TID], uint64(e.RunDelay))
			owner[e.TID] = e.TGID
			final[e.TID] = true
		case groupSUT, groupTare:
			kept = append(kept, e) // the other group's, for its reading
		}
	}
	b.exits = kept
}

// read takes what the probe counted since the last reading, then hands it
// the processes to watch from now: the system under test's (and what they
// fork), tare's (and what its trees fork), and the busiest others chosen
// at the last sample. procs is the process table of the reading (held:
// whether it was read).
func (b *blamer) read(m *members, tarePIDs []int, procs map[int]procStat, held bool) error {
	if b.probe == nil {
		return nil
	}
	c, err := b.probe.Read()
	if err != nil {
		b.failed = true
		return err
	}
	b.add(c)
	clear(b.spare)
	for pid := range m.tare {
		b.spare[pid] = schedprobe.Watch{Group: groupTare, Inherit: !slices.Contains(tarePIDs, pid)}
	}
	for pid := range m.sut {
		b.spare[pid] = schedprobe.Watch{Group: groupSUT, Inherit: true}
	}
	if b.unwatched(procs, held) {
		b.fresh = 2
	}
	b.measured, b.spare = b.spare, b.measured
	return b.apply()
}

// unwatched reports whether the measured processes changed (spare, from
// measured) in a way that makes the probe's run delay and schedstat's
// count different waits: a process joined that the probe did not watch
// (its waits under way, and those before it was watched, are in
// schedstat's counters only), or one still alive left (the probe counts
// its waits under way, schedstat no longer reads it). A process forked
// by a measured one was watched from its fork (Watch.Inherit), and one
// that exited left its threads' final run delays (exited): neither is a
// change.
func (b *blamer) unwatched(procs map[int]procStat, held bool) bool {
	for pid, w := range b.spare {
		old, ok := b.measured[pid]
		switch {
		case ok && old != w:
			return true
		case !ok && !b.probe.Watching(pid, w):
			return true
		}
	}
	for pid := range b.measured {
		if _, ok := b.spare[pid]; ok {
			continue
		}
		if _, alive := procs[pid]; alive || !held {
			return true
		}
	}
	return false
}

// apply hands the probe the measured processes and the busiest ones.
func (b *blamer) apply() error {
	clear(b.watch)
	for g, p := range b.waiters {
		for _, pid := range sharePIDs(p) {
			b.watch[pid] = schedprobe.Watch{Group: g}
		}
	}
	for pid, w := range b.measured {
		b.watch[pid] = w // a busiest process that is measured too is measured
	}
	return b.probe.Watch(b.watch)
}

// add folds c into pending; its ended waits are around's to count.
func (b *blamer) add(c schedprobe.Counts) {
	p := &b.pending
	for _, ch := range c.Charges {
		k := chargeKey{ch.Group, ch.Holder.Kind, ch.Holder.Group, ch.Holder.TGID}
		if i, ok := b.charges[k]; ok {
			p.Charges[i].Wait += ch.Wait
			p.Charges[i].Holder.Comm = ch.Holder.Comm
			continue
		}
		b.charges[k] = len(p.Charges)
		p.Charges = append(p.Charges, ch)
	}
	if len(p.OthersByCPU) < len(c.OthersByCPU) {
		p.OthersByCPU = append(p.OthersByCPU, make([]time.Duration, len(c.OthersByCPU)-len(p.OthersByCPU))...)
	}
	for i, d := range c.OthersByCPU {
		p.OthersByCPU[i] += d
	}
	p.Lost += c.Lost
	p.Unseen += c.Unseen
	p.Runtime += c.Runtime
	p.RuntimeCounted = c.RuntimeCounted
	p.Anomalies += c.Anomalies
}

// begin drops what was counted: a sample starts from now. No sample
// ends here, so a change of the measured processes now leaves only the
// sample that starts here uncompared.
func (b *blamer) begin(now time.Time) {
	b.beginWaits(now)
	b.reset()
	b.fresh = min(b.fresh, 1)
}

// reset drops what was counted: the next sample starts from now.
func (b *blamer) reset() {
	b.pending = schedprobe.Counts{Charges: b.pending.Charges[:0], OthersByCPU: b.pending.OthersByCPU[:0]}
	clear(b.charges)
	b.failed = false
	b.runDelay = [2]time.Duration{}
	b.spread = 0
}

// take returns the blame of a sample from start to end, from what was
// counted since the last one (with the Waits that ended in it), and
// chooses the busiest processes to watch next from its ledger. procs,
// the process table at the sample's end, names the
// processes waited behind by their service (serviceRoot) and whole name. Nil without a probe, or when a read of it failed in the tick.
// gone says a measured thread exited in the tick: then, as when the
// measured processes changed, its run delay is not compared with
// schedstat's (RunDelayPct nil), which cannot read a thread that is gone,
// nor knew a new process before.
func (b *blamer) take(start, end time.Time, by *tare.CPUBy, gone bool, procs map[int]procStat, m *members) (*tare.Blame, error) {
	if b.probe == nil {
		return nil, nil
	}
	defer b.reset()
	tick := end.Sub(start)
	var blame *tare.Blame
	if !b.failed && tick > 0 {
		b.pending.Waited[groupSUT], b.pending.Waited[groupTare] = b.runDelay[groupSUT], b.runDelay[groupTare]
		blame = blameOf(&b.pending, tick, b.waiters, procs, m)
		blame.RunDelaySpreadPct = tare.Float(100 * b.spread.Seconds() / tick.Seconds())
		if gone || b.fresh > 0 {
			blame.RunDelayPct, blame.RunDelaySpreadPct = nil, nil
		}
	}
	b.fresh = max(b.fresh-1, 0)
	err := b.takeWaits(blame, end, procs, m)
	if b.chooseBusiest(by) {
		return blame, errors.Join(err, b.apply())
	}
	return blame, err
}

// chooseBusiest keeps watching the busiest processes that still are, and
// gives the groups of those that are not to the new ones. It reports
// whether the choice changed.
func (b *blamer) chooseBusiest(by *tare.CPUBy) bool {
	if b.busiest == 0 || by == nil {
		return false
	}
	top := by.TopOthers[:min(len(by.TopOthers), b.busiest)]
	next := make(map[int]tare.ProcessShare, len(top))
	var fresh []tare.ProcessShare
	for _, p := range top {
		g := -1
		for group, w := range b.waiters {
			if w.PID == p.PID {
				g = group
			}
		}
		if g < 0 {
			fresh = append(fresh, p)
			continue
		}
		next[g] = p
	}
	for g := groupBusiest; g < groupBusiest+b.busiest && len(fresh) > 0; g++ {
		if _, used := next[g]; !used {
			next[g], fresh = fresh[0], fresh[1:]
		}
	}
	changed := len(next) != len(b.waiters)
	for g, p := range next {
		changed = changed || b.waiters[g].PID != p.PID
	}
	b.waiters = next
	return changed
}

// blameOf turns a tick's counts into its Blame, in percent of one CPU:
// the waits of the system under test's and tare's threads by owner, and
// those of each watched busiest process (waiters: group → process). Other
// processes are told apart by service, as procs places them; those it
// does not hold are named by command alone. m, the members found in procs
// (nil: none), claims the processes the probe did not watch yet: a
// backend a database forked for a connection within the tick is the
// system under test's, as its parent is.
func blameOf(c *schedprobe.Counts, tick time.Duration, waiters map[int]tare.ProcessShare, procs map[int]procStat, m *members) *tare.Blame {
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / tick.Seconds() }
	b := &tare.Blame{Source: tare.BlameMeasured, Behind: []tare.Behind{}, DroppedEvents: int64(c.Lost), UnseenSwitches: int64(c.Unseen)}
	byGroup := map[int]*tare.Blame{}
	for _, ch := range c.Charges {
		owner, name, root := ownerOf(ch.Holder, procs, m)
		into := b
		if ch.Group >= groupBusiest {
			if _, ok := waiters[ch.Group]; !ok {
				continue // a group given up: the last waits of its old process
			}
			if into = byGroup[ch.Group]; into == nil {
				into = &tare.Blame{}
				byGroup[ch.Group] = into
			}
		}
		p := pct(ch.Wait)
		into.WaitPct += p
		into.AddWait(tare.BehindKey{Owner: owner, Name: name, Root: root}, ch.Holder.TGID, p)
	}
	fold(b)
	b.RunDelayPct = tare.Float(pct(c.Waited[groupSUT] + c.Waited[groupTare]))
	if c.RuntimeCounted {
		b.ProbeCPUPct = tare.Float(pct(c.Runtime))
	}
	for cpu, d := range c.OthersByCPU {
		if d > 0 {
			b.OthersByCPU = append(b.OthersByCPU, tare.CPUWait{CPU: cpu, WaitPct: pct(d)})
		}
	}
	for g, w := range waiters {
		wb := byGroup[g]
		if wb == nil {
			wb = &tare.Blame{}
		}
		fold(wb)
		b.Waiters = append(b.Waiters, tare.Waiter{Name: w.Name, PIDs: sharePIDs(w), Root: w.PID, WaitPct: wb.WaitPct, Behind: wb.Behind})
	}
	slices.SortFunc(b.Waiters, func(x, y tare.Waiter) int {
		return cmp.Or(cmp.Compare(y.WaitPct, x.WaitPct), cmp.Compare(x.PIDs[0], y.PIDs[0]))
	})
	return b
}

// ownerOf says whom a holder of the CPU stands for in a Blame: its owner,
// its name (the whole one where procs holds it: the probe gives comm,
// which the kernel cuts at 15 bytes) and, of another process that procs
// holds, the root of its service. A holder the probe did not watch that
// m finds in the system under test or tare (forked since the probe was
// told whom to watch) is theirs; one that procs does not hold (forked and
// gone between two readings) is the system under test's when the nearest
// of its ancestors that procs holds is: a backend a database forked for
// one connection before the probe watched the postmaster is the
// postmaster's.
func ownerOf(h schedprobe.Holder, procs map[int]procStat, m *members) (owner, name string, root int) {
	name = h.Comm
	p, known := procs[h.TGID]
	// A pid given to another process since is not the holder's.
	known = known && h.TGID > 0 && strings.HasPrefix(p.Comm, h.Comm)
	if known {
		name = p.Comm
	}
	switch {
	case h.Kind == schedprobe.Idle:
		return tare.OwnerWakeup, "", 0
	case h.Kind == schedprobe.Kernel:
		return tare.OwnerKernel, h.Comm, 0
	case h.Kind == schedprobe.Watched && h.Group == groupSUT:
		return tare.OwnerSUT, name, 0
	case h.Kind == schedprobe.Watched && h.Group == groupTare:
		return tare.OwnerTare, name, 0
	case known && m != nil && m.sut[h.TGID]:
		return tare.OwnerSUT, name, 0
	case known && m != nil && m.tare[h.TGID]:
		return tare.OwnerTare, name, 0
	case !known && m != nil && descendsFrom(h.Ancestors, m.sut, procs):
		return tare.OwnerSUT, name, 0
	}
	if known {
		root = serviceRoot(h.TGID, procs)
	}
	return tare.OwnerOther, name, root // a busiest process tare check watches is another process all the same
}

// descendsFrom reports whether the nearest of ancestors (a process's
// parent first) that set or procs holds is in set. An ancestor gone too
// (a CGI script's shell) is passed over for its own parent.
func descendsFrom(ancestors [schedprobe.Ancestry]int, set map[int]bool, procs map[int]procStat) bool {
	for _, pid := range ancestors {
		if set[pid] {
			return true
		}
		if _, known := procs[pid]; known || pid <= 1 {
			return false
		}
	}
	return false
}

// sharePIDs are the processes of a ledger's share: a service's, or its one.
func sharePIDs(p tare.ProcessShare) []int {
	if len(p.PIDs) > 0 {
		return p.PIDs
	}
	return []int{p.PID}
}

// fold sorts b's owners, the largest first, and sums the named ones (other
// processes, kernel threads) past maxNamed into their owner, unnamed.
func fold(b *tare.Blame) {
	b.Sort()
	named := 0
	var kept []tare.Behind
	var rest []tare.Behind
	for _, w := range b.Behind {
		if w.Name == "" || w.Owner == tare.OwnerSUT || w.Owner == tare.OwnerTare {
			kept = append(kept, w)
			continue
		}
		if named++; named <= maxNamed {
			kept = append(kept, w)
			continue
		}
		rest = append(rest, w)
	}
	b.Behind = kept
	for _, w := range rest {
		b.AddWait(tare.BehindKey{Owner: w.Owner}, 0, w.WaitPct)
	}
	b.Sort()
	if b.Behind == nil {
		b.Behind = []tare.Behind{}
	}
}

// close detaches the probe.
func (b *blamer) close() error {
	if b.probe == nil {
		return nil
	}
	err := b.probe.Close()
	b.probe = nil
	if err != nil {
		return fmt.Errorf("close the scheduler probe: %w", err)
	}
	return nil
}

// threadsGone reports whether a thread of the measured processes read at
// prev was not there at cur: it exited, and its last waits with it, unless
// prev holds its final run delay (the probe saw it exit).
func threadsGone(prev, cur *reading) bool {
	for _, p := range []struct{ before, now map[int]uint64 }{{prev.SUT, cur.SUT}, {prev.Tare, cur.Tare}} {
		for tid := range p.before {
			if _, ok := p.now[tid]; !ok && !prev.Final[tid] {
				return true
			}
		}
	}
	return false
}
