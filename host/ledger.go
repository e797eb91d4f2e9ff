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
	node      map[int]int   // pid of the system under test → index of its node in the graph
	measured  map[int]bool  // both: the processes the table reads at every tick
	kids      map[int][]int // ppid → pids, rebuilt at every reading
	queue     []int

	containers *containerIndex // the container of each other process; nil names none
	services   map[int]int     // scratch of byService
	// excluded says which processes the user took out of the system
	// under test (by pid or command name): they and their descendants
	// are never in it. Nil excludes nothing.
	excluded func(pid int, comm string) bool
}

func newMembers() *members {
	return &members{sut: map[int]bool{}, tare: map[int]bool{}, node: map[int]int{}, measured: map[int]bool{}, kids: map[int][]int{}, services: map[int]int{}}
}

// find fills the sets from the process table: the roots of each node of
// the system under test's graph, in the graph's order, with all their
// descendants (a process reached from two nodes belongs to the first);
// the tare pids alone, and the tareTrees with their descendants. A process
// in both counts as the system under test: when the service runs inside
// tare's own process (a test's httptest server), its load is the service's.
func (m *members) find(procs map[int]procStat, nodes [][]int, tare, tareTrees []int) {
	clear(m.sut)
	clear(m.tare)
	clear(m.node)
	for k, v := range m.kids {
		m.kids[k] = v[:0]
	}
	for pid, p := range procs {
		m.kids[p.PPID] = append(m.kids[p.PPID], pid)
	}
	for i, roots := range nodes {
		m.tree(m.sut, roots, procs, m.excluded)
		for pid := range m.sut {
			if _, ok := m.node[pid]; !ok {
				m.node[pid] = i
			}
		}
	}
	m.tree(m.tare, tareTrees, procs, nil)
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

// tree adds roots and every descendant of theirs to set, leaving out the
// excluded processes and what descends from them. Roots missing from the
// table are still added: their threads may yet be readable.
func (m *members) tree(set map[int]bool, roots []int, procs map[int]procStat, excluded func(int, string) bool) {
	m.queue = append(m.queue[:0], roots...)
	for i := 0; i < len(m.queue); i++ {
		pid := m.queue[i]
		if set[pid] {
			continue // a pid met twice must not loop
		}
		if excluded != nil && excluded(pid, procs[pid].Comm) {
			continue
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
// nodes is the number of nodes of the system under test's graph.
//
//	total        = user + nice + system + idle + iowait + irq + softirq + steal
//	processes    = Δ(utime + stime) of every process, by owner
//	reaped       = Δ(cutime + cstime) of every process: its children that
//	               exited and were reaped in the tick, less what tare had
//	               already counted of those it saw, charged to its owner
//	kernel       = irq + softirq + the kernel threads' Δ
//	unattributed = user + nice + system − processes − reaped (≥ 0)
//	idle         = idle + iowait
//
// The process counters are read a moment after /proc/stat, so their sum
// can exceed the tasks' time by a jiffy or two: then they are scaled down
// to it, and unattributed is 0. Reaped time fills at most what the
// processes left unattributed: a child read alive a moment before its
// parent reaped it would otherwise count twice.
func ledger(all cpuDelta, prev, cur map[int]procStat, prevUptime uint64, m *members, nodes int) tare.CPUBy {
	total := float64(all.total())
	if total == 0 {
		return tare.CPUBy{}
	}
	// What tare already counted of the children that are gone: their
	// parent's reaped time includes it.
	counted := map[int]uint64{}
	names := map[int][]string{}
	for pid, q := range prev {
		if c, ok := cur[pid]; ok && c.Start == q.Start {
			continue
		}
		counted[q.PPID] += q.Ticks + q.Reaped
		if !slices.Contains(names[q.PPID], q.Comm) {
			names[q.PPID] = append(names[q.PPID], q.Comm)
		}
	}
	const (
		ownerSUT = iota
		ownerTare
		ownerKernel
		ownerOther
	)
	type use struct {
		pid         int
		owner, node int
		own, reaped uint64
	}
	var uses []use
	var own, reaped [4]uint64
	for pid, p := range cur {
		d := procDelta(p, prev, prevUptime)
		r := sub(reapedDelta(p, prev, prevUptime), counted[pid])
		if d == 0 && r == 0 {
			continue
		}
		u := use{pid: pid, own: d, reaped: r, node: -1}
		switch {
		case m.sut[pid]:
			u.owner, u.node = ownerSUT, m.node[pid]
		case m.tare[pid]:
			u.owner = ownerTare
		case p.KThread:
			u.owner = ownerKernel
		default:
			u.owner = ownerOther
		}
		own[u.owner] += d
		reaped[u.owner] += r
		uses = append(uses, u)
	}
	tasks := float64(all.User + all.Nice + all.System)
	seen := float64(own[0] + own[1] + own[2] + own[3])
	scale, rscale := 1.0, 0.0
	if seen > tasks && seen > 0 {
		scale = tasks / seen
	} else if r := float64(reaped[0] + reaped[1] + reaped[2] + reaped[3]); r > 0 {
		rscale = min((tasks-seen)/r, 1)
	}
	share := func(own, reaped uint64) float64 {
		return (float64(own)*scale + float64(reaped)*rscale) * 100 / total
	}
	by := tare.CPUBy{
		SystemUnderTest: share(own[ownerSUT], reaped[ownerSUT]),
		Tare:            share(own[ownerTare], reaped[ownerTare]),
		Others:          share(own[ownerOther], reaped[ownerOther]),
		Kernel:          float64(all.IRQ+all.SoftIRQ)*100/total + share(own[ownerKernel], reaped[ownerKernel]),
		Steal:           float64(all.Steal) * 100 / total,
		Idle:            float64(all.Idle+all.IOWait) * 100 / total,
	}
	by.Unattributed = max(tasks-seen*scale-float64(reaped[0]+reaped[1]+reaped[2]+reaped[3])*rscale, 0) * 100 / total
	var top []tare.ProcessShare
	if nodes > 0 {
		by.SUTNodes = make([]tare.NodeShare, nodes)
		for i := range by.SUTNodes {
			by.SUTNodes[i].Node = i
		}
	}
	for _, u := range uses {
		switch {
		case u.owner == ownerSUT && u.node >= 0 && u.node < nodes:
			by.SUTNodes[u.node].CPUPct += share(u.own, u.reaped)
		case u.owner == ownerOther:
			ps := tare.ProcessShare{Name: cur[u.pid].Comm, PID: u.pid, CPUPct: share(u.own, u.reaped), Container: m.containers.of(u.pid, cur[u.pid], cur)}
			if u.reaped > 0 && rscale > 0 {
				ps.Children = names[u.pid]
				for _, kid := range m.kids[u.pid] {
					if c := cur[kid].Comm; !slices.Contains(ps.Children, c) {
						ps.Children = append(ps.Children, c)
					}
				}
			}
			top = append(top, ps)
		}
	}
	m.containers.forget(cur)
	by.TopOthers = tare.Busiest(m.containers.group(byService(top, cur, m.services)))
	return by
}

// procDelta is the CPU time p used since the previous table, in clock
// ticks. A counter that went backwards counts 0; a pid whose start time
// changed is a new process.
func procDelta(p procStat, prev map[int]procStat, prevUptime uint64) uint64 {
	return counterDelta(p, prev, prevUptime, func(s procStat) uint64 { return s.Ticks })
}

// reapedDelta is the CPU time of p's children that p reaped since the
// previous table, in clock ticks, counted as procDelta counts its own.
func reapedDelta(p procStat, prev map[int]procStat, prevUptime uint64) uint64 {
	return counterDelta(p, prev, prevUptime, func(s procStat) uint64 { return s.Reaped })
}

func counterDelta(p procStat, prev map[int]procStat, prevUptime uint64, counter func(procStat) uint64) uint64 {
	if q, ok := prev[p.PID]; ok && q.Start == p.Start {
		return sub(counter(p), counter(q))
	}
	if p.Start >= prevUptime {
		return counter(p)
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
