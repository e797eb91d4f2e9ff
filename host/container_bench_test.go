package host

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkLedgerContainers measures one tick's ledger of a 500-process
// host on which 50 processes ran as others, 25 of them in 5 docker
// containers: without naming containers, with the index warm (every
// later tick: a map lookup per busy process), and cold (the first tick,
// or 50 new processes: 50 cgroup files read, 5 containers described from
// the fixture's runtime files).
//
// On the 2-vCPU development VM at a load average of 11 to 15 (other
// agents' builds), in 8 interleaved pairs of 20,000 ledgers: none 47–139
// µs, warm 42–85 µs, no difference above the noise and the same 7
// allocations; cold 0.7–1.4 ms (median of 8), paid once per new busy
// process, about 15–30 µs each.
func BenchmarkLedgerContainers(b *testing.B) {
	root := b.TempDir()
	files := map[string]string{}
	prev, cur := map[int]procStat{}, map[int]procStat{}
	for i := range 500 {
		pid := 1000 + i
		p := procStat{PID: pid, Comm: fmt.Sprintf("worker-%d", i), PPID: 1, Ticks: 100, Start: 50}
		prev[pid], cur[pid] = p, p
		cgroup := "0::/system.slice/worker.service\n"
		if i < 50 {
			cur[pid] = procStat{PID: pid, Comm: p.Comm, PPID: 1, Ticks: 102, Start: 50}
			if i%2 == 0 {
				id := fmt.Sprintf("%064x", i%5)
				if i%5 == 0 {
					id = idDocker
				}
				cgroup = "0::/system.slice/docker-" + id + ".scope\n"
			}
		}
		files["proc/"+strconv.Itoa(pid)+"/cgroup"] = cgroup
	}
	writeFiles(b, root, files)
	procRoot := filepath.Join(root, "proc")
	all := cpuDelta{User: 100, System: 20, Idle: 80}
	m := newMembers()
	m.find(cur, nil, nil, nil)
	rt := Runtimes{Root: "testdata/runtimes"}

	b.Run("none", func(b *testing.B) {
		m.containers = nil
		b.ReportAllocs()
		for b.Loop() {
			ledger(all, prev, cur, 1000, m, 0)
		}
	})
	b.Run("warm", func(b *testing.B) {
		m.containers = newContainerIndex(procRoot, rt)
		ledger(all, prev, cur, 1000, m, 0)
		b.ReportAllocs()
		for b.Loop() {
			ledger(all, prev, cur, 1000, m, 0)
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.containers = newContainerIndex(procRoot, rt)
			ledger(all, prev, cur, 1000, m, 0)
		}
	})
}
