package host

import (
	"slices"

	"github.com/tare-dev/tare"
)

// A service, as tare names neighbours, is a process with the descendants
// it forked that kept its name: a pool's master and its workers
// (gunicorn, nginx, php-fpm), postgres's postmaster and its backends. Two
// processes of one name are not one service for that alone: the `sh` of a
// CPU hog and the `sh` of a broker's disk monitor are two neighbours, each
// with its own share, and stopping one does not stop the other. The
// processes of a container are one share already (byContainer).

// maxFamilyDepth bounds the walk up a family: no real line of same-named
// ancestors is this long, and a fixture tree may loop.
const maxFamilyDepth = 64

// serviceRoot returns the pid the service of process pid is known by:
// the top-most of its ancestors reached through parents of its own name,
// or pid itself when its parent has another name. 0 when procs does not
// hold pid.
//
//	systemd(1) ─ gunicorn(100) ┬ gunicorn(101)    all three: 100
//	                           └ gunicorn(102)
//	bash(7) ─ sh(8) ─ sh(9)                       8 and 9: 8
//	beam.smp(50) ─ sh(51)                         51: another `sh`
func serviceRoot(pid int, procs map[int]procStat) int {
	p, ok := procs[pid]
	if !ok {
		return 0
	}
	root := pid
	for range maxFamilyDepth {
		parent, ok := procs[p.PPID]
		if !ok || p.PPID == pid || p.PPID == root || parent.Comm != p.Comm || parent.KThread != p.KThread {
			break
		}
		root, p = p.PPID, parent
	}
	return root
}

// byService makes the shares of the processes of one service one share:
// their CPU summed, named by the service's root (serviceRoot), with the
// pids of those that used CPU and the root's (PIDs, when more than one),
// and the short-lived children charged to any of them. Shares in a
// container are left for byContainer. It works in place, in shares'
// array, and does not sort; at is scratch: root pid → index in the result.
func byService(shares []tare.ProcessShare, procs map[int]procStat, at map[int]int) []tare.ProcessShare {
	clear(at)
	out := shares[:0]
	for _, p := range shares {
		root := serviceRoot(p.PID, procs)
		if p.Container != nil || root == 0 {
			out = append(out, p)
			continue
		}
		i, ok := at[root]
		if !ok {
			at[root] = len(out)
			if root != p.PID {
				p.PIDs = []int{min(root, p.PID), max(root, p.PID)}
				p.PID = root
			}
			out = append(out, p)
			continue
		}
		o := &out[i]
		if o.PIDs == nil {
			o.PIDs = []int{o.PID}
		}
		o.PIDs = tare.AddPID(o.PIDs, p.PID)
		o.CPUPct += p.CPUPct
		for _, c := range p.Children {
			if !slices.Contains(o.Children, c) {
				o.Children = append(o.Children, c)
			}
		}
	}
	return out
}
