package host

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

// ClkTck is USER_HZ, the unit of the /proc/stat counters: 100 on every
// mainstream Linux architecture whatever the kernel's HZ, and the constant
// procfs divides by.
const ClkTck = 100

// errNoCPUTime says two readings of /proc/stat were too close together for
// any online CPU to have accrued a jiffy: no share can be computed.
var errNoCPUTime = errors.New("no cpu time elapsed between readings")

// cpuTimes are the /proc/stat counters of one CPU, in jiffies (1/ClkTck s):
// https://docs.kernel.org/filesystems/proc.html#miscellaneous-kernel-statistics-in-proc-stat
type cpuTimes struct {
	CPU       int
	User      uint64 // includes Guest
	Nice      uint64 // includes GuestNice
	System    uint64
	Idle      uint64
	IOWait    uint64
	IRQ       uint64
	SoftIRQ   uint64
	Steal     uint64
	Guest     uint64
	GuestNice uint64
}

// readCPUTimes reads the per-CPU lines of /proc/stat. Offline CPUs have no
// line, so they are absent from the result, which is sorted by CPU number.
func readCPUTimes(fs procfs.FS, buf []cpuTimes) ([]cpuTimes, error) {
	st, err := fs.Stat()
	switch {
	case errors.Is(err, procfs.ErrFileParse):
		return nil, fmt.Errorf("%w: /proc/stat: %w", ErrParse, err)
	case err != nil:
		return nil, fmt.Errorf("read /proc/stat: %w", err)
	}
	return cpuTimesFromStat(st, buf[:0]), nil
}

// cpuTimesFromStat converts procfs's per-CPU figures back to jiffies: procfs
// divides the kernel's integer counters by USER_HZ, and counting in integers
// is what keeps the deltas exact, as in mpstat.
func cpuTimesFromStat(st procfs.Stat, buf []cpuTimes) []cpuTimes {
	j := func(seconds float64) uint64 {
		if seconds <= 0 || math.IsNaN(seconds) {
			return 0
		}
		return uint64(math.Round(seconds * ClkTck))
	}
	for id, c := range st.CPU {
		buf = append(buf, cpuTimes{
			CPU:  int(id),
			User: j(c.User), Nice: j(c.Nice), System: j(c.System), Idle: j(c.Idle),
			IOWait: j(c.Iowait), IRQ: j(c.IRQ), SoftIRQ: j(c.SoftIRQ), Steal: j(c.Steal),
			Guest: j(c.Guest), GuestNice: j(c.GuestNice),
		})
	}
	slices.SortFunc(buf, func(a, b cpuTimes) int { return a.CPU - b.CPU })
	return buf
}

// cpuDelta is how one CPU spent the tick, in jiffies.
type cpuDelta struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// total is the tick's jiffies on this CPU. Guest and guest_nice are not
// added: the kernel already counts them inside user and nice.
func (d cpuDelta) total() uint64 {
	return d.User + d.Nice + d.System + d.Idle + d.IOWait + d.IRQ + d.SoftIRQ + d.Steal
}

func (d *cpuDelta) add(o cpuDelta) {
	d.User += o.User
	d.Nice += o.Nice
	d.System += o.System
	d.Idle += o.Idle
	d.IOWait += o.IOWait
	d.IRQ += o.IRQ
	d.SoftIRQ += o.SoftIRQ
	d.Steal += o.Steal
}

// shares turns the delta into percent of its own total; total must not be 0.
func (d cpuDelta) shares(cpu int) tare.CPUShares {
	t := float64(d.total())
	p := func(v uint64) float64 { return float64(v) * 100 / t }
	return tare.CPUShares{
		CPU: cpu, User: p(d.User), Nice: p(d.Nice), System: p(d.System),
		IOWait: p(d.IOWait), IRQ: p(d.IRQ), SoftIRQ: p(d.SoftIRQ),
		Steal: p(d.Steal), Idle: p(d.Idle),
	}
}

// sub is cur − prev, clamped to 0 when the counter went backwards (a CPU
// back from offline restarts idle and iowait from 0; iowait is known to
// decrease when the kernel re-accounts it as idle).
func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

func deltaOf(prev, cur cpuTimes) cpuDelta {
	return cpuDelta{
		User:    sub(cur.User, prev.User),
		Nice:    sub(cur.Nice, prev.Nice),
		System:  sub(cur.System, prev.System),
		Idle:    sub(cur.Idle, prev.Idle),
		IOWait:  sub(cur.IOWait, prev.IOWait),
		IRQ:     sub(cur.IRQ, prev.IRQ),
		SoftIRQ: sub(cur.SoftIRQ, prev.SoftIRQ),
		Steal:   sub(cur.Steal, prev.Steal),
	}
}

// cpuShares computes the shares of the tick between two readings of
// /proc/stat, both sorted by CPU number, the way mpstat -P ALL does:
//
//	share(field) = Δfield / Δtotal × 100
//	Δtotal       = Δ(user + nice + system + idle + iowait + irq + softirq + steal)
//
// per CPU, and for the aggregate the same over the sum of the per-CPU deltas,
// which it also returns (the whose-CPU ledger splits it).
// A CPU is left out (of PerCPU and of the aggregate) when it is missing from
// either reading (offline now, or just back online with no reference) or
// when its Δtotal is 0 (mpstat prints such a CPU as 0 or 100 % idle; here it
// carries no information about the tick). per is appended to and returned.
//
// Where this differs from mpstat: a counter that goes backwards contributes 0
// to its field and to Δtotal, so the shares still add up to 100; mpstat
// subtracts it from the total instead (and, for idle, counts it from 0).
// User and Nice include guest time, as in /proc/stat; mpstat's %usr and %nice
// subtract it and print it as %guest and %gnice.
func cpuShares(prev, cur []cpuTimes, per []tare.CPUShares) (agg tare.CPUShares, perCPU []tare.CPUShares, all cpuDelta, err error) {
	i, j := 0, 0
	for i < len(prev) && j < len(cur) {
		p, c := prev[i], cur[j]
		switch {
		case p.CPU < c.CPU:
			i++ // offline now
			continue
		case p.CPU > c.CPU:
			j++ // back online: no reference yet
			continue
		}
		i++
		j++
		d := deltaOf(p, c)
		if d.total() == 0 {
			continue
		}
		per = append(per, d.shares(c.CPU))
		all.add(d)
	}
	if all.total() == 0 {
		return tare.CPUShares{CPU: -1}, per, all, errNoCPUTime
	}
	return all.shares(-1), per, all, nil
}
