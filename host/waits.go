package host

import (
	"cmp"
	"os"
	"slices"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/schedprobe"
)

// probeOptions are what the blamer asks of the probe: the stretches of
// the system under test's and tare's threads, each a tick's Wait. The
// environment's TARE_SCHED_PROBE_WAITS=off asks for none: the probe as it
// was before them, which bench/probe-overhead compares with.
func probeOptions() schedprobe.Options {
	if os.Getenv("TARE_SCHED_PROBE_WAITS") == "off" {
		return schedprobe.Options{}
	}
	return schedprobe.Options{Stretches: []int{groupSUT, groupTare}, WaitFloor: tare.WaitFloor}
}

// waitClock turns the probe's times (CLOCK_MONOTONIC) into wall-clock
// time, as the ticks' Start and End are: zero is the wall-clock time at
// which CLOCK_MONOTONIC read 0, taken as time.Now less the mean of two
// reads of CLOCK_MONOTONIC around it, the closest of three tries (a
// microsecond apart, unless the sampler lost its CPU between them). It
// is measured when the probe opens and again at every tick, so that a
// wall clock stepped or slewed (NTP) moves the Waits with the ticks.
type waitClock struct{ zero time.Time }

func (c *waitClock) measure() {
	best := time.Duration(-1)
	for range 3 {
		before := schedprobe.Monotonic()
		now := time.Now().Round(0) // the wall clock alone
		after := schedprobe.Monotonic()
		if best < 0 || after-before < best {
			best = after - before
			c.zero = now.Add(-(before + (after-before)/2))
		}
	}
}

func (c *waitClock) wall(d time.Duration) time.Time { return c.zero.Add(d) }

func (c *waitClock) mono(t time.Time) time.Duration { return t.Round(0).Sub(c.zero) }

// waitGroups are the probe's groups whose stretches are Waits, by owner.
var waitGroups = map[int]string{groupSUT: tare.OwnerSUT, groupTare: tare.OwnerTare}

// waitsOf turns a tick's stretches into its Waits, in order of Start, at
// most MaxTickWaits (the shortest dropped: dropped says how many). Each
// holder is named by its charge (names: its command) and placed by
// ownerOf, as the tick's Behind list places it.
func waitsOf(stretches []schedprobe.Stretch, names func(chargeKey) string, clock *waitClock, procs map[int]procStat, m *members) (waits []tare.Wait, dropped int) {
	type owner struct {
		owner, name string
		root        int
	}
	owners := map[chargeKey]owner{}
	waits = make([]tare.Wait, 0, len(stretches))
	for _, s := range stretches {
		group, ok := waitGroups[s.Group]
		if !ok {
			continue
		}
		k := chargeKey{s.Group, s.Holder.Kind, s.Holder.Group, s.Holder.TGID}
		o, ok := owners[k]
		if !ok {
			h := s.Holder
			h.Comm = names(k)
			o.owner, o.name, o.root = ownerOf(h, procs, m)
			owners[k] = o
		}
		waits = append(waits, tare.Wait{
			Start: clock.wall(s.Start), End: clock.wall(s.End), CPU: s.CPU, Group: group,
			Owner: o.owner, Name: o.name, PID: s.Holder.TGID, Root: o.root, Waited: s.Waited,
		})
	}
	return capWaits(waits, tare.MaxTickWaits)
}

// capWaits keeps the longest most of waits (by Waited; of equal ones, the
// earlier), in order of Start, and says how many it dropped. Both sorts
// order waits totally (byStart), so an unstable sort gives one order: a
// stable one moved a busy tick's 20,000 waits, 130 bytes each, by merges
// (13 µs a wait against 1.6 µs under the cap, BenchmarkWaitsOf).
func capWaits(waits []tare.Wait, most int) ([]tare.Wait, int) {
	dropped := 0
	if len(waits) > most {
		slices.SortFunc(waits, func(x, y tare.Wait) int {
			return cmp.Or(cmp.Compare(y.Waited, x.Waited), byStart(x, y))
		})
		dropped = len(waits) - most
		waits = waits[:most]
	}
	slices.SortFunc(waits, byStart)
	return waits, dropped
}

// byStart orders waits by Start, then by every other field: a total order.
func byStart(x, y tare.Wait) int {
	return cmp.Or(x.Start.Compare(y.Start), x.End.Compare(y.End), cmp.Compare(x.CPU, y.CPU),
		cmp.Compare(x.Waited, y.Waited), cmp.Compare(x.Group, y.Group), cmp.Compare(x.Owner, y.Owner),
		cmp.Compare(x.Name, y.Name), cmp.Compare(x.PID, y.PID), cmp.Compare(x.Root, y.Root))
}

// takeWaits gives blame (nil: none) the Waits of the tick that ends at
// end: the stretches read so far that ended in it, since the last tick's
// end. Those that ended after end wait for the next tick; those that
// ended before the last tick's end (read too late for their tick) are
// lost, and counted.
func (b *blamer) takeWaits(blame *tare.Blame, end time.Time, procs map[int]procStat, m *members) error {
	got, lost, err := b.probe.Stretches()
	b.clock.measure()
	b.stretches = append(b.stretches, got...)
	b.waitsLost += int64(lost)
	// The last tick's end as it was then, not converted again: the
	// clock's offset moves by microseconds between ticks, and a stretch
	// at the boundary would fall in neither tick.
	from, to := b.cut, b.clock.mono(end)
	b.cut = to
	mine := b.mine[:0] // the tick's, made into Waits below and not kept
	later := b.stretches[:0]
	for _, s := range b.stretches {
		switch {
		case s.End > to:
			later = append(later, s)
		case s.End <= from:
			b.waitsLost++
		default:
			mine = append(mine, s)
		}
	}
	clear(b.stretches[len(later):])
	b.stretches, b.mine = later, mine
	// The holder's command from its charge, this tick's or the last
	// one's: a stretch that ended just after the last tick's end was
	// charged before the probe was read for it.
	names := func(k chargeKey) string {
		if i, ok := b.charges[k]; ok {
			return b.pending.Charges[i].Holder.Comm
		}
		return b.named[k]
	}
	if blame != nil {
		var dropped int
		blame.Waits, dropped = waitsOf(mine, names, &b.clock, procs, m)
		blame.WaitsLost = b.waitsLost + int64(dropped)
	}
	b.waitsLost = 0
	clear(b.named)
	for k, i := range b.charges {
		b.named[k] = b.pending.Charges[i].Holder.Comm
	}
	return err
}

// beginWaits drops the stretches that ended before a tick that starts at
// start.
func (b *blamer) beginWaits(start time.Time) {
	if b.probe == nil {
		return
	}
	got, _, _ := b.probe.Stretches() // an error, if it lasts, comes again at the tick's end
	b.clock.measure()
	b.cut = b.clock.mono(start)
	b.stretches = slices.DeleteFunc(append(b.stretches, got...), func(s schedprobe.Stretch) bool { return s.End <= b.cut })
	b.waitsLost = 0
}
