package stats

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tare-dev/tare"
)

// blameTotals accumulates the blame of every host sample, measured and
// estimated both, for the run's: measured when every sample that had
// either had the probe's, else estimated throughout.
type blameTotals struct {
	measured, estimated blameSum
	samples             int // with a blame of either source
	missing             int // with an estimate but no measurement
	dropped, unseen     int64
	probeCPU            optSum

	truth     tare.TruthCheck
	truthSum  float64 // schedstat's run delay, weighted
	probeSum  float64 // the probe's
	truthSeen float64 // the weight of the ticks they were compared in
}

func (t *blameTotals) add(s *tare.HostSample, w float64) {
	est := s.EstimatedBlame()
	if est == nil && s.Blame == nil {
		return
	}
	t.samples++
	if est != nil {
		t.estimated.add(est, w)
	}
	if s.Blame == nil {
		t.missing++
		return
	}
	t.measured.add(s.Blame, w)
	t.dropped += s.Blame.DroppedEvents
	t.probeCPU.add(s.Blame.ProbeCPUPct, w)
	t.unseen += s.Blame.UnseenSwitches
	// Both count a wait when it ends: a sample of a few milliseconds (the
	// last of a run) holds a whole wait or none, by a hair, and is not
	// compared.
	if s.RunDelay != nil && s.Blame.RunDelayPct != nil && w >= (tare.MinTick/2).Seconds() {
		t.truth.Ticks++
		t.truthSum += *s.RunDelay * w
		t.probeSum += *s.Blame.RunDelayPct * w
		t.truthSeen += w
		if s.Disagrees() {
			t.truth.Disagreed++
		}
	}
}

// summary is the run's blame; nil when no sample had one.
func (t *blameTotals) summary() *tare.Blame {
	switch {
	case t.samples == 0:
		return nil
	case t.measured.w > 0 && t.missing == 0:
		b := t.measured.blame(tare.BlameMeasured)
		b.DroppedEvents, b.UnseenSwitches = t.dropped, t.unseen
		b.ProbeCPUPct = t.probeCPU.mean()
		if t.truth.Ticks > 0 {
			truth := t.truth
			truth.WaitPct = *round(t.truthSum/t.truthSeen, 2)
			truth.ProbeWaitPct = *round(t.probeSum/t.truthSeen, 2)
			b.Schedstat = &truth
		}
		return b
	case t.estimated.w == 0:
		return nil
	}
	b := t.estimated.blame(tare.BlameEstimated)
	if t.measured.w > 0 {
		b.Why = fmt.Sprintf("the scheduler probe's counts were missing in %d of %d ticks", t.missing, t.samples)
	}
	return b
}

// blameSum is the weighted sum of several Blames of one source.
type blameSum struct {
	w       float64 // the samples' lengths
	wait    float64
	behind  map[tare.BehindKey]*behindSum
	cpus    map[int]float64
	waiters map[waiterKey]*waiterSum
}

// waiterKey is a busiest process of tare check: its service.
type waiterKey struct {
	name string
	root int
}

type behindSum struct {
	pct  float64
	pids []int
}

// waiterSum is one busiest process of tare check over the samples it was
// watched in: its shares are means over those alone.
type waiterSum struct {
	w      float64
	pids   []int
	behind blameSum
}

func (b *blameSum) add(x *tare.Blame, w float64) {
	if b.behind == nil {
		b.behind, b.cpus, b.waiters = map[tare.BehindKey]*behindSum{}, map[int]float64{}, map[waiterKey]*waiterSum{}
	}
	b.w += w
	b.wait += x.WaitPct * w
	for _, o := range x.Behind {
		k := o.Key()
		s := b.behind[k]
		if s == nil {
			s = &behindSum{pids: []int{}}
			b.behind[k] = s
		}
		s.pct += o.WaitPct * w
		for _, pid := range o.PIDs {
			s.pids = tare.AddPID(s.pids, pid)
		}
	}
	for _, c := range x.OthersByCPU {
		b.cpus[c.CPU] += c.WaitPct * w
	}
	for _, wt := range x.Waiters {
		k := waiterKey{wt.Name, wt.Root}
		s := b.waiters[k]
		if s == nil {
			s = &waiterSum{pids: []int{}}
			b.waiters[k] = s
		}
		s.w += w
		for _, pid := range wt.PIDs {
			s.pids = tare.AddPID(s.pids, pid)
		}
		s.behind.add(&tare.Blame{WaitPct: wt.WaitPct, Behind: wt.Behind}, w)
	}
}

// blame is the weighted mean of the Blames added.
func (b *blameSum) blame(source string) *tare.Blame {
	out := &tare.Blame{Source: source, Behind: []tare.Behind{}}
	if b.w == 0 {
		return out
	}
	out.WaitPct = *round(b.wait/b.w, 2)
	for k, s := range b.behind {
		out.Behind = append(out.Behind, tare.Behind{Owner: k.Owner, Name: k.Name, PIDs: s.pids, WaitPct: *round(s.pct/b.w, 2), Root: k.Root})
	}
	out.Sort()
	for cpu, sum := range b.cpus {
		out.OthersByCPU = append(out.OthersByCPU, tare.CPUWait{CPU: cpu, WaitPct: *round(sum/b.w, 2)})
	}
	slices.SortFunc(out.OthersByCPU, func(x, y tare.CPUWait) int { return cmp.Compare(x.CPU, y.CPU) })
	for k, s := range b.waiters {
		wb := s.behind.blame(source)
		out.Waiters = append(out.Waiters, tare.Waiter{Name: k.name, PIDs: s.pids, Root: k.root, WaitPct: wb.WaitPct, Behind: wb.Behind})
	}
	slices.SortFunc(out.Waiters, func(x, y tare.Waiter) int {
		return cmp.Or(cmp.Compare(y.WaitPct, x.WaitPct), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Root, y.Root))
	})
	return out
}

// mixBlame is the mean of two measured blames of the same tick, weighted
// by their samples' lengths; either may be nil (the other is kept).
func mixBlame(a *tare.Blame, wa float64, b *tare.Blame, wb float64) *tare.Blame {
	switch {
	case a == nil:
		return copyBlame(b)
	case b == nil:
		return a
	}
	var s blameSum
	s.add(a, wa)
	s.add(b, wb)
	m := s.blame(a.Source)
	m.DroppedEvents = a.DroppedEvents + b.DroppedEvents
	m.UnseenSwitches = a.UnseenSwitches + b.UnseenSwitches
	m.RunDelayPct = mixPtr(a.RunDelayPct, b.RunDelayPct, wa/(wa+wb), wb/(wa+wb))
	m.RunDelaySpreadPct = mixPtr(a.RunDelaySpreadPct, b.RunDelaySpreadPct, wa/(wa+wb), wb/(wa+wb))
	m.ProbeCPUPct = mixPtr(a.ProbeCPUPct, b.ProbeCPUPct, wa/(wa+wb), wb/(wa+wb))
	m.Waits = slices.SortedStableFunc(slices.Values(slices.Concat(a.Waits, b.Waits)), func(x, y tare.Wait) int { return x.Start.Compare(y.Start) })
	m.WaitsLost = a.WaitsLost + b.WaitsLost
	return m
}

// copyBlame returns a copy of b that shares nothing with it.
func copyBlame(b *tare.Blame) *tare.Blame {
	if b == nil {
		return nil
	}
	c := *b
	c.Behind = slices.Clone(b.Behind)
	for i := range c.Behind {
		c.Behind[i].PIDs = slices.Clone(b.Behind[i].PIDs)
	}
	c.OthersByCPU = slices.Clone(b.OthersByCPU)
	c.Waits = slices.Clone(b.Waits)
	c.RunDelayPct = clonePtr(b.RunDelayPct)
	c.RunDelaySpreadPct = clonePtr(b.RunDelaySpreadPct)
	c.ProbeCPUPct = clonePtr(b.ProbeCPUPct)
	c.Waiters = slices.Clone(b.Waiters)
	for i := range c.Waiters {
		c.Waiters[i].PIDs = slices.Clone(b.Waiters[i].PIDs)
		c.Waiters[i].Behind = copyBlame(&tare.Blame{Behind: b.Waiters[i].Behind}).Behind
	}
	if b.Schedstat != nil {
		t := *b.Schedstat
		c.Schedstat = &t
	}
	return &c
}
