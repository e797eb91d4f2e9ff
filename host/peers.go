package host

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// tcpEstablished is TCP_ESTABLISHED in the st column.
const tcpEstablished = 0x01

// peers finds the processes on this host that the system under test
// calls: the owners of the listening sockets at the far end of its
// established TCP connections to a loopback address. A worker's model
// server, a service's local database or cache: their CPU is the system's
// own cost, not a neighbour's. A listener's owners are looked up once per
// port (socketOwners reads every descriptor on the host); a port whose
// owners are gone is looked up again.
type peers struct {
	procRoot  string
	owners    map[uint16][]int           // listening port → its processes
	found     map[int]bool               // every peer found so far
	inodes    map[uint64]bool            // the system under test's sockets at the last look
	seen      map[uint64]bool            // scratch: its sockets now
	listening map[uint16]map[uint64]bool // scratch: listening sockets by port
	socks     []tcpSocket                // scratch
}

func newPeers(procRoot string) *peers {
	return &peers{procRoot: procRoot, owners: map[uint16][]int{}, found: map[int]bool{}, inodes: map[uint64]bool{},
		seen: map[uint64]bool{}, listening: map[uint16]map[uint64]bool{}}
}

// look adds to the peers found those of the processes of sut, leaving out
// the processes of sut themselves and of skip (tare's), and reports
// whether it found a new one.
func (p *peers) look(sut, skip map[int]bool) bool {
	clear(p.seen)
	for pid := range sut {
		fdDir := filepath.Join(p.procRoot, strconv.Itoa(pid), "fd")
		fds, err := readDirNames(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd)); err == nil {
				if ino, ok := socketInode(link); ok {
					p.seen[ino] = true
				}
			}
		}
	}
	// The socket tables list every socket of the host, and reading them
	// walks the kernel's whole connection hash: about as much CPU as the
	// sampler's every other reading together. The same sockets as at the
	// last look (a service's keep-alive connections) can lead nowhere new.
	if len(p.seen) == 0 || maps.Equal(p.seen, p.inodes) {
		return false
	}
	p.inodes, p.seen = p.seen, p.inodes
	// One reading of the socket tables gives both ends: the ports the
	// system under test is connected to, and who listens where.
	var ports []uint16
	clear(p.listening)
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(p.procRoot, "net", name))
		if err != nil {
			continue
		}
		if p.socks, err = parseNetTCP(b, p.socks[:0]); err != nil {
			continue
		}
		for _, s := range p.socks {
			switch {
			case s.State == tcpEstablished && p.inodes[s.Inode] && s.Remote.Addr().Unmap().IsLoopback():
				ports = append(ports, s.Remote.Port())
			case s.State == tcpListen && s.Inode != 0:
				if p.listening[s.Local.Port()] == nil {
					p.listening[s.Local.Port()] = map[uint64]bool{}
				}
				p.listening[s.Local.Port()][s.Inode] = true
			}
		}
	}
	added := false
	for _, port := range slices.Compact(slices.Sorted(slices.Values(ports))) {
		owners, ok := p.owners[port]
		if !ok || !p.alive(owners) {
			if inodes := p.listening[port]; len(inodes) > 0 {
				owners = socketOwners(p.procRoot, inodes)
			}
			p.owners[port] = owners
		}
		if len(owners) == 0 {
			clear(p.inodes) // look again next time: the owner may show yet
		}
		for _, pid := range owners {
			if !sut[pid] && !skip[pid] && !p.found[pid] {
				p.found[pid], added = true, true
			}
		}
	}
	return added
}

// alive reports whether any of pids still exists.
func (p *peers) alive(pids []int) bool {
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join(p.procRoot, strconv.Itoa(pid))); err == nil {
			return true
		}
	}
	return false
}

// list is the peers found, sorted.
func (p *peers) list() []int {
	return slices.Sorted(func(yield func(int) bool) {
		for pid := range p.found {
			if !yield(pid) {
				return
			}
		}
	})
}
