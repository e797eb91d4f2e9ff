package host

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tare-dev/tare"
)

// members are the processes of the system under test and of tare at one
// reading, found again at every tick so that a worker forked mid-run, or a
// process that exits, is counted where it belongs.
type members struct {
	sut, tare map[int]bool
	measured  map[int]bool  // both: the processes the table reads at every tick
	kids      map[int][]int // ppid → pids, rebuilt at every reading
	queue     []int

	containers *containerIndex // the container of each other process; nil names none
}

func newMembers() *members {
	return &members{sut: map[int]bool{}, tare: map[int]bool{}, measured: map[int]bool{}, kids: map[int][]int{}}
}

// find fills the sets from the process table: the sut pids with all their
// descendants; the tare pids alone, and the tareTrees with their
// descendants. A process in both counts as the system under test: when the
// service runs inside tare's own process (a test's httptest server), its
// load is the service's.
func (m *members) find(procs map[int]procStat, sut, tare, tareTrees []int) {
	clear(m.sut)
	clear(m.tare)
	for k, v := range m.kids {
		m.kids[k] = v[:0]
	}
	for pid, p := range procs {
		m.kids[p.PPID] = append(m.kids[p.PPID], pid)
	}
	m.tree(m.sut, sut, procs)
	m.tree(m.tare, tareTrees, procs)
	for _, pid := range tare {
		m.tare[pid] = true
	}
	clear(m.measured)
	for pid := range m.sut {
		delete(m.tare, pid)
		m.measured[pid] = true
	}
	for pid := range m.tare {
		m.measured[pid] = true
	}
}

// tree adds roots and every descendant of theirs to set. Roots missing from
// the table are still added: their threads may yet be readable.
func (m *members) tree(set map[int]bool, roots []int, procs map[int]procStat) {
	m.queue = append(m.queue[:0], roots...)
	for i := 0; i < len(m.queue); i++ {
		pid := m.queue[i]
		if set[pid] {
			continue // a pid met twice must not loop
		}
		set[pid] = true
		m.queue = append(m.queue, m.kids[pid]...)
	}
}

// pids returns the members of set, sorted, appended to dst.
func pidsOf(set map[int]bool, dst []int) []int {
	for pid := range set {
		dst = append(dst, pid)
	}
	slices.Sort(dst)
	return dst
}

// ledger splits the tick's CPU time by owner. all is the tick's /proc/stat
// delta summed over the online CPUs; prev and cur are the process tables at
// the two readings, and prevUptime the first reading's uptime in clock
// ticks, which tells a process that started during the tick (all its time
// is the tick's) from one that was there but unread (no baseline: 0).
//
//	total        = user + nice + system + idle + iowait + irq + softirq + steal
//	processes    = Δ(utime + stime) of every process, by owner
//	kernel       = irq + softirq + the kernel threads' Δ
//	unattributed = user + nice + system − processes (≥ 0)
//	idle         = idle + iowait
//
// The process counters are read a moment after /proc/stat, so their sum
// can exceed the tasks' time by a jiffy or two: then they are scaled down
// to it, and unattributed is 0.
func ledger(all cpuDelta, prev, cur map[int]procStat, prevUptime uint64, m *members) tare.CPUBy {
	total := float64(all.total())
	if total == 0 {
		return tare.CPUBy{}
	}
	var sut, own, others, kthreads uint64
	var top []tare.ProcessShare
	for pid, p := range cur {
		d := procDelta(p, prev, prevUptime)
		if d == 0 {
			continue
		}
		switch {
		case m.sut[pid]:
			sut += d
		case m.tare[pid]:
			own += d
		case p.KThread:
			kthreads += d
		default:
			others += d
			top = append(top, tare.ProcessShare{Name: p.Comm, PID: pid, CPUPct: float64(d), Container: m.containers.of(pid, p.Start)})
		}
	}
	m.containers.forget(cur)
	top = m.containers.group(top)
	tasks := float64(all.User + all.Nice + all.System)
	seen := float64(sut + own + others + kthreads)
	scale := 1.0
	if seen > tasks && seen > 0 {
		scale = tasks / seen
	}
	pct := func(j float64) float64 { return j * scale * 100 / total }
	by := tare.CPUBy{
		SystemUnderTest: pct(float64(sut)),
		Tare:            pct(float64(own)),
		Others:          pct(float64(others)),
		Kernel:          float64(all.IRQ+all.SoftIRQ)*100/total + pct(float64(kthreads)),
		Unattributed:    max(tasks-seen, 0) * 100 / total,
		Steal:           float64(all.Steal) * 100 / total,
		Idle:            float64(all.Idle+all.IOWait) * 100 / total,
	}
	by.TopOthers = tare.Busiest(top)
	for i := range by.TopOthers {
		by.TopOthers[i].CPUPct = pct(by.TopOthers[i].CPUPct)
	}
	return by
}

// procDelta is the CPU time p used since the previous table, in clock
// ticks. A counter that went backwards counts 0; a pid whose start time
// changed is a new process.
func procDelta(p procStat, prev map[int]procStat, prevUptime uint64) uint64 {
	if q, ok := prev[p.PID]; ok && q.Start == p.Start {
		return sub(p.Ticks, q.Ticks)
	}
	if p.Start >= prevUptime {
		return p.Ticks
	}
	return 0
}

// parseUptime returns the first field of /proc/uptime, the seconds since
// boot with two decimals, in clock ticks: the unit of a process's start
// time (proc(5)).
func parseUptime(b []byte) (uint64, error) {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, fmt.Errorf("%w: uptime %q: empty", ErrParse, b)
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: uptime %q: want seconds since boot", ErrParse, b)
	}
	return uint64(math.Round(v * ClkTck)), nil
}

func readUptime(procRoot string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "uptime"))
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	return parseUptime(b)
}
