package stats

import (
	"cmp"
	"slices"
	"time"

	"github.com/tare-dev/tare"
)

// addHost merges sample h into the tick. Several samples in one tick (a
// sampler faster than the timeline, or jitter at a boundary) become their
// mean weighted by each sample's length.
func (t *tick) addHost(h *tare.HostSample, fallback time.Duration) {
	w := h.End.Sub(h.Start)
	if h.Start.IsZero() || w <= 0 {
		w = fallback // length unknown: count it as a whole tick
	}
	if t.host == nil {
		c := copySample(h)
		t.host = &c
		t.hostWeight = w
		return
	}
	mergeSample(t.host, t.hostWeight, h, w)
	t.hostWeight += w
}

// copySample returns a copy of h that shares nothing with it: the sampler
// may reuse its PerCPU slice, and callers of Ticks may change theirs.
func copySample(h *tare.HostSample) tare.HostSample {
	c := *h
	if h.PerCPU != nil {
		c.PerCPU = append([]tare.CPUShares(nil), h.PerCPU...)
	}
	c.PSISome = clonePtr(h.PSISome)
	c.PSIFull = clonePtr(h.PSIFull)
	c.Throttled = clonePtr(h.Throttled)
	c.RunDelay = clonePtr(h.RunDelay)
	c.SUTRunDelay = clonePtr(h.SUTRunDelay)
	c.TareRunDelay = clonePtr(h.TareRunDelay)
	if h.CPUBy != nil {
		by := *h.CPUBy
		by.TopOthers = cloneShares(h.CPUBy.TopOthers)
		c.CPUBy = &by
	}
	c.Blame = copyBlame(h.Blame)
	c.PSIIOSome = clonePtr(h.PSIIOSome)
	c.IOBy = slices.Clone(h.IOBy)
	c.FixedWorkUS = clonePtr(h.FixedWorkUS)
	return c
}

// mergeIOBy adds up the bytes of two ticks' IOBy by process (bytes are
// counts, not shares: they add), busiest first, five at most, as the
// sampler names them.
func mergeIOBy(a, b []tare.ProcessIO) []tare.ProcessIO {
	if b == nil {
		return a
	}
	out := slices.Clone(a)
	for _, p := range b {
		if i := slices.IndexFunc(out, func(q tare.ProcessIO) bool { return q.PID == p.PID && q.Name == p.Name }); i >= 0 {
			out[i].Bytes += p.Bytes
		} else {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y tare.ProcessIO) int { return cmp.Or(cmp.Compare(y.Bytes, x.Bytes), cmp.Compare(x.PID, y.PID)) })
	return slices.Clip(out[:min(len(out), 5)])
}

// cloneShares returns a copy of ps that shares no slice with it.
func cloneShares(ps []tare.ProcessShare) []tare.ProcessShare {
	out := slices.Clone(ps)
	for i := range out {
		out[i].PIDs = slices.Clone(ps[i].PIDs)
	}
	return out
}

func clonePtr(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// mergeSample folds s (length ws) into acc (length wa) as their weighted
// mean. A CPU present in only one of them keeps that one's figures, and so
// does a source (PSI, throttling, run delay) present in only one.
func mergeSample(acc *tare.HostSample, wa time.Duration, s *tare.HostSample, ws time.Duration) {
	fa := float64(wa) / float64(wa+ws)
	fb := 1 - fa
	if s.Start.Before(acc.Start) {
		acc.Start = s.Start
	}
	if s.End.After(acc.End) {
		acc.End = s.End
	}
	acc.CPU = mixShares(acc.CPU, s.CPU, fa, fb)
	for _, c := range s.PerCPU {
		found := false
		for i := range acc.PerCPU {
			if acc.PerCPU[i].CPU == c.CPU {
				acc.PerCPU[i] = mixShares(acc.PerCPU[i], c, fa, fb)
				found = true
				break
			}
		}
		if !found {
			acc.PerCPU = append(acc.PerCPU, c)
		}
	}
	acc.PSISome = mixPtr(acc.PSISome, s.PSISome, fa, fb)
	acc.PSIFull = mixPtr(acc.PSIFull, s.PSIFull, fa, fb)
	acc.Throttled = mixPtr(acc.Throttled, s.Throttled, fa, fb)
	acc.RunDelay = mixPtr(acc.RunDelay, s.RunDelay, fa, fb)
	acc.SUTRunDelay = mixPtr(acc.SUTRunDelay, s.SUTRunDelay, fa, fb)
	acc.TareRunDelay = mixPtr(acc.TareRunDelay, s.TareRunDelay, fa, fb)
	acc.Blame = mixBlame(acc.Blame, fa, s.Blame, fb)
	acc.PSIIOSome = mixPtr(acc.PSIIOSome, s.PSIIOSome, fa, fb)
	acc.FixedWorkUS = mixPtr(acc.FixedWorkUS, s.FixedWorkUS, fa, fb)
	acc.IOBy = mergeIOBy(acc.IOBy, s.IOBy)
	switch {
	case acc.CPUBy == nil && s.CPUBy != nil:
		by := *s.CPUBy
		by.TopOthers = cloneShares(s.CPUBy.TopOthers)
		acc.CPUBy = &by
	case acc.CPUBy != nil && s.CPUBy != nil:
		var top topOthers
		top.add(acc.CPUBy.TopOthers, fa)
		top.add(s.CPUBy.TopOthers, fb)
		by := mixCPUBy(*acc.CPUBy, *s.CPUBy, fa, fb)
		by.TopOthers = top.top(1)
		acc.CPUBy = &by
	}
}

// mixCPUBy is the weighted mean of two ledgers, without their top others.
func mixCPUBy(a, b tare.CPUBy, fa, fb float64) tare.CPUBy {
	return tare.CPUBy{
		SystemUnderTest: a.SystemUnderTest*fa + b.SystemUnderTest*fb,
		Tare:            a.Tare*fa + b.Tare*fb,
		Others:          a.Others*fa + b.Others*fb,
		Kernel:          a.Kernel*fa + b.Kernel*fb,
		Unattributed:    a.Unattributed*fa + b.Unattributed*fb,
		Steal:           a.Steal*fa + b.Steal*fb,
		Idle:            a.Idle*fa + b.Idle*fb,
	}
}

// topOthers adds up the busiest other processes of several ledgers, each
// weighted, to name the busiest over all of them. A container's share is
// added up by container: the process that names it may change from tick
// to tick, and then the one whose CPU weighed most over them names it.
type topOthers map[procKey]*otherShare

// procKey names a process's share, a service (by its root's pid): a pid
// reused by another command is another one. Of a container's share, only
// the container.
type procKey struct {
	name      string
	pid       int
	container string // runtime/id
}

type otherShare struct {
	tare.ProcessShare
	names map[procKey]float64 // of a container: the weight of each process that named it
}

func keyOf(p tare.ProcessShare) procKey {
	if c := p.Container; c != nil {
		return procKey{container: c.Runtime + "/" + c.ID}
	}
	return procKey{name: p.Name, pid: p.PID}
}

func (t *topOthers) add(ps []tare.ProcessShare, weight float64) {
	if *t == nil {
		*t = topOthers{}
	}
	for _, p := range ps {
		k := keyOf(p)
		o := (*t)[k]
		if o == nil {
			o = &otherShare{ProcessShare: p}
			o.CPUPct, o.Children, o.PIDs = 0, nil, nil // the run's figures name no children, as before containers
			(*t)[k] = o
		}
		o.CPUPct += p.CPUPct * weight
		if p.Container == nil {
			o.addPIDs(p)
			continue
		}
		if o.names == nil {
			o.names = map[procKey]float64{}
		}
		named := procKey{name: p.Name, pid: p.PID}
		o.names[named] += p.CPUPct * weight
		if best := (procKey{name: o.Name, pid: o.PID}); o.names[named] > o.names[best] {
			o.Name, o.PID = p.Name, p.PID
		}
		o.Processes = max(o.Processes, p.Processes)
	}
}

// addPIDs adds the processes of p, a share of o's service in one ledger,
// to those o names: a service's processes over the run.
func (o *otherShare) addPIDs(p tare.ProcessShare) {
	if len(p.PIDs) == 0 && len(o.PIDs) == 0 && p.PID == o.PID {
		return
	}
	if len(o.PIDs) == 0 {
		o.PIDs = []int{o.PID}
	}
	o.PIDs = tare.AddPID(o.PIDs, p.PID)
	for _, pid := range p.PIDs {
		o.PIDs = tare.AddPID(o.PIDs, pid)
	}
}

// top returns the busiest, their summed shares divided by n, busiest first.
func (t topOthers) top(n float64) []tare.ProcessShare {
	out := make([]tare.ProcessShare, 0, len(t))
	for _, o := range t {
		p := o.ProcessShare
		p.CPUPct /= n
		out = append(out, p)
	}
	return tare.Busiest(out)
}

func mixShares(a, b tare.CPUShares, fa, fb float64) tare.CPUShares {
	return tare.CPUShares{
		CPU:     a.CPU,
		User:    a.User*fa + b.User*fb,
		Nice:    a.Nice*fa + b.Nice*fb,
		System:  a.System*fa + b.System*fb,
		IOWait:  a.IOWait*fa + b.IOWait*fb,
		IRQ:     a.IRQ*fa + b.IRQ*fb,
		SoftIRQ: a.SoftIRQ*fa + b.SoftIRQ*fb,
		Steal:   a.Steal*fa + b.Steal*fb,
		Idle:    a.Idle*fa + b.Idle*fb,
	}
}

func mixPtr(a, b *float64, fa, fb float64) *float64 {
	switch {
	case a == nil:
		return clonePtr(b)
	case b == nil:
		return a
	}
	return tare.Float(*a*fa + *b*fb)
}

// hostTotals are the run-wide host figures, accumulated sample by sample
// (not tick by tick: a sampler faster than the timeline keeps its peaks).
// Means are weighted by each sample's length: the last reading of a run
// covers its last few milliseconds, a jiffy or two whose shares are noise
// (one jiffy of steal in two is 50 %), and must not weigh as a whole tick.
// For the same reason a sample shorter than tare.MinTick/2 sets no maximum.
type hostTotals struct {
	n                     int
	w                     float64 // the samples' lengths, in seconds
	busy, steal           float64 // weighted sums of the aggregate's busy and steal
	stealMax, stealMaxCPU float64
	polluted              float64 // the length of the polluted samples
	psiSome, throttled    optSum
	runDelay              optSum
	neighbourWait         optSum
	sutRunDelay, sutCores optSum
	tareRunDelay          optSum
	last                  float64 // aggregate steal of the latest sample

	ledgers float64    // the length of the samples with a ledger
	cpuBy   tare.CPUBy // their weighted sum, without TopOthers
	top     topOthers
	nodes   []nodeSums // by node of the system under test's graph

	blame blameTotals
}

// nodeSums are one graph node's figures over the run.
type nodeSums struct {
	cores, runDelay optSum
}

// optSum sums a figure that a source may not provide, weighted.
type optSum struct {
	w, sum float64
}

func (o *optSum) add(p *float64, w float64) {
	if p != nil {
		o.w += w
		o.sum += *p * w
	}
}

// mean is the weighted mean in percent, nil when no sample had the figure.
func (o *optSum) mean() *float64 {
	if o.w == 0 {
		return nil
	}
	return round(o.sum/o.w, 2)
}

func (h *hostTotals) add(s *tare.HostSample, threshold float64, fallback time.Duration) {
	length := s.End.Sub(s.Start)
	if s.Start.IsZero() || length <= 0 {
		length = fallback // length unknown: count it as a whole tick
	}
	w := length.Seconds()
	if h.n == 0 || length >= tare.MinTick/2 {
		h.stealMax, h.stealMaxCPU = max(h.stealMax, s.CPU.Steal), max(h.stealMaxCPU, s.MaxCPUSteal())
	}
	h.n++
	h.w += w
	h.busy += s.CPU.Busy() * w
	h.steal += s.CPU.Steal * w
	if s.Polluted(threshold) {
		h.polluted += w
	}
	h.psiSome.add(s.PSISome, w)
	h.throttled.add(s.Throttled, w)
	h.runDelay.add(s.RunDelay, w)
	h.neighbourWait.add(s.NeighbourWait(), w)
	h.sutRunDelay.add(s.SUTRunDelay, w)
	h.tareRunDelay.add(s.TareRunDelay, w)
	h.blame.add(s, w)
	if by := s.CPUBy; by != nil {
		h.ledgers += w
		h.cpuBy = mixCPUBy(h.cpuBy, *by, 1, w)
		h.top.add(by.TopOthers, w)
		if s.SUTRunDelay != nil {
			// The system under test's share of the host, in cores.
			cpus := float64(max(len(s.PerCPU), 1))
			h.sutCores.add(tare.Float(by.SystemUnderTest*cpus), w)
			for _, n := range by.SUTNodes {
				if n.Node < 0 {
					continue
				}
				for len(h.nodes) <= n.Node {
					h.nodes = append(h.nodes, nodeSums{})
				}
				h.nodes[n.Node].cores.add(tare.Float(n.CPUPct*cpus), w)
				h.nodes[n.Node].runDelay.add(n.RunDelayPct, w)
			}
		}
	}
	h.last = s.CPU.Steal
}

// lastSteal is the latest sample's aggregate steal, nil before the first.
func (h *hostTotals) lastSteal() *float64 {
	if h.n == 0 {
		return nil
	}
	return tare.Float(h.last)
}

// summary returns the run-wide host figures; all nil when no sample came.
func (h *hostTotals) summary() tare.HostSummary {
	s := tare.HostSummary{Ticks: h.n}
	if h.n == 0 {
		return s
	}
	n := h.w
	s.CPUBusyPct = round(h.busy/n, 2)
	s.Steal = tare.StealStats{
		Mean:   round(h.steal/n, 2),
		Max:    round(h.stealMax, 2),
		MaxCPU: round(h.stealMaxCPU, 2),
	}
	s.PollutedTicksPct = round(100*h.polluted/n, 2)
	s.PSISomePct = h.psiSome.mean()
	s.ThrottledPct = h.throttled.mean()
	s.RunDelayPct = h.runDelay.mean()
	s.NeighbourWaitPct = h.neighbourWait.mean()
	if h.ledgers > 0 {
		by := mixCPUBy(h.cpuBy, tare.CPUBy{}, 1/h.ledgers, 0)
		by.TopOthers = h.top.top(h.ledgers)
		roundCPUBy(&by)
		s.CPUBy = &by
	}
	return s
}

// sut returns what the samples measured of the system under test: nil
// when none had its run delay (no system under test, or it never ran).
func (h *hostTotals) sut() *tare.SUTSummary {
	if h.sutRunDelay.w == 0 {
		return nil
	}
	s := &tare.SUTSummary{CPUPct: h.sutCores.mean(), RunDelayPct: h.sutRunDelay.mean(), ThrottledPct: h.throttled.mean()}
	for _, n := range h.nodes {
		// A node found late has no figure for the ticks before: its mean
		// is over the ticks it was part of, which is what it cost then.
		s.Graph = append(s.Graph, tare.SUTNode{CPUPct: n.cores.mean(), RunDelayPct: n.runDelay.mean()})
	}
	return s
}

func roundCPUBy(by *tare.CPUBy) {
	for _, v := range []*float64{&by.SystemUnderTest, &by.Tare, &by.Others, &by.Kernel, &by.Unattributed, &by.Steal, &by.Idle} {
		*v = *round(*v, 2)
	}
	for i := range by.TopOthers {
		by.TopOthers[i].CPUPct = *round(by.TopOthers[i].CPUPct, 2)
	}
}
