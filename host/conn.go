package host

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// TCPConn is a TCP connection by its two ends as this host sees them:
// Local is this host's end. A zero Remote matches any peer.
type TCPConn struct {
	Local, Remote netip.AddrPort
}

// ConnectionPIDs returns, for each of conns that is a socket of this
// host (a row of procRoot/net/tcp or tcp6 with the same ends, IPv4 in
// IPv6 taken as IPv4), the processes holding it, sorted; conns not found
// are left out. It errs only when neither net/tcp nor net/tcp6 can be
// read.
//
// It is how tare finds a worker that says nothing of its pid (BullMQ's)
// on this host: the broker tells the worker's end of its connection
// (CLIENT LIST's addr) and its own (laddr), and the process holding that
// connection here is the worker. Like ListenerPIDs, it sees only this
// network namespace, and other users' processes only as root.
func ConnectionPIDs(procRoot string, conns []TCPConn) (map[TCPConn][]int, error) {
	if len(conns) == 0 {
		return nil, nil
	}
	socks, err := readNetTCP(procRoot)
	if err != nil {
		return nil, fmt.Errorf("find %d connections' processes: %w", len(conns), err)
	}
	want := map[TCPConn][]TCPConn{} // unmapped ends → as asked
	anyPeer := map[netip.AddrPort][]TCPConn{}
	for _, c := range conns {
		u := TCPConn{unmapped(c.Local), unmapped(c.Remote)}
		if c.Remote.IsValid() {
			want[u] = append(want[u], c)
		} else {
			anyPeer[u.Local] = append(anyPeer[u.Local], c)
		}
	}
	byInode := map[uint64][]TCPConn{} // a socket may answer several of conns
	for _, s := range socks {
		if s.Inode == 0 || s.State == tcpListen {
			continue
		}
		local := unmapped(s.Local)
		cs := slices.Concat(want[TCPConn{local, unmapped(s.Remote)}], anyPeer[local])
		if len(cs) > 0 {
			byInode[s.Inode] = cs
		}
	}
	out := map[TCPConn][]int{}
	if len(byInode) == 0 {
		return out, nil
	}
	names, err := readDirNames(procRoot)
	if err != nil {
		return nil, fmt.Errorf("find %d connections' processes: %w", len(conns), err)
	}
	var fds fdReader
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		fds.sockets(procRoot, pid, func(ino uint64) bool {
			for _, c := range byInode[ino] {
				if !slices.Contains(out[c], pid) {
					out[c] = append(out[c], pid)
				}
			}
			return true
		})
	}
	for c := range out {
		slices.Sort(out[c])
	}
	return out, nil
}

// unmapped is ap with an IPv4-mapped IPv6 address as IPv4.
func unmapped(ap netip.AddrPort) netip.AddrPort {
	if !ap.IsValid() {
		return ap
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
