package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readlinkat is readlinkat(2) with a NUL-terminated name in a buffer the
// caller reuses: unix.Readlinkat copies its string name to the heap at
// every call, and the graph reads every descriptor of the system under
// test at every look.
func readlinkat(dir int, name, buf []byte) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dir), uintptr(unsafe.Pointer(&name[0])),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// ListenerPIDs returns the processes that hold a listening TCP socket on
// port, on any local address, IPv4 or IPv6: the inodes of the listening
// sockets (listeningTCP: sock_diag's, or procRoot/net/tcp and tcp6's in
// state 0A) whose local port is port, matched against the socket:[inode]
// links in procRoot/<pid>/fd. Sorted, unique; empty (nil error) when no process is
// found. It returns an error only when neither net/tcp nor net/tcp6 can be read.
//
// It is how tare finds the system under test of a loopback target by
// itself. Several processes are normal: prefork servers (nginx, gunicorn)
// share one listening socket among their workers, and SO_REUSEPORT gives
// each its own. What it cannot see, it leaves out rather than guess:
//   - procRoot/net is the network namespace of the reader, so a server in
//     another namespace is not found; behind Docker's port publishing the
//     listener found is docker-proxy, not the container's process;
//   - another user's fd directory is readable only with CAP_SYS_PTRACE
//     (or as root), so without it only tare's own user's processes match.
//
// The cost is one readlink per open descriptor on the host (a few
// milliseconds for a few hundred processes): a lookup at the start of a
// run, not a per-tick reading. Files are described in proc(5),
// https://man7.org/linux/man-pages/man5/proc_pid_net_tcp.5.html and
// https://man7.org/linux/man-pages/man5/proc_pid_fd.5.html.
func ListenerPIDs(procRoot string, port int) ([]int, error) {
	socks, err := listeningTCP(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listening sockets on port %d: %w", port, err)
	}
	inodes := map[uint64]bool{}
	for _, s := range socks {
		if s.State == tcpListen && int(s.Local.Port()) == port && s.Inode != 0 {
			inodes[s.Inode] = true
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	return socketOwners(procRoot, inodes), nil
}

// readNetTCP returns the sockets of procRoot/net/tcp and
// procRoot/net/tcp6; an error only when neither can be read (a host
// without IPv6 has no tcp6), naming both faults.
func readNetTCP(procRoot string) ([]tcpSocket, error) {
	var socks []tcpSocket
	var errs []error
	for _, name := range []string{"tcp", "tcp6"} {
		p := filepath.Join(procRoot, "net", name)
		b, err := os.ReadFile(p)
		if err == nil {
			n := len(socks)
			if socks, err = parseNetTCP(b, socks); err != nil {
				socks = socks[:n]
				err = fmt.Errorf("%s: %w", p, err)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 2 {
		return nil, errors.Join(errs...)
	}
	return socks, nil
}

// tcpListen is TCP_LISTEN in the st column (include/net/tcp_states.h).
const tcpListen = 0x0A

// tcpSocket is what ListenerPIDs needs of one row of /proc/net/tcp or
// /proc/net/tcp6 (proc(5)): where the socket is bound, its state, and the
// inode that names it in the fd links of the processes holding it.
type tcpSocket struct {
	Local  netip.AddrPort
	Remote netip.AddrPort // the peer of a connected socket
	State  uint8          // TCP_ESTABLISHED 0x01 … TCP_LISTEN 0x0A
	Inode  uint64         // 0 for sockets no descriptor holds (TIME_WAIT, not yet accepted)
}

// parseNetTCP appends to dst the sockets of a /proc/net/tcp or tcp6 file,
// whose rows read (the header line, which names the columns, is skipped)
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 54719 ...
//
// The local address is hex ip:hex port. The port is the number itself; the
// ip is printed as the 32-bit words of the address in network order, each
// read as a host-order integer: 127.0.0.1 is 0100007F on a little-endian
// machine. IPv6 addresses are four such words. A TIME_WAIT row is shorter
// than the others; every row has the inode, field 10.
func parseNetTCP(b []byte, dst []tcpSocket) ([]tcpSocket, error) {
	for first := true; len(b) > 0; first = false {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		sl, rest := nextField(line)
		if sl == nil || (first && string(sl) == "sl") {
			continue
		}
		if len(sl) < 2 || sl[len(sl)-1] != ':' {
			return dst, fmt.Errorf("%w: net/tcp line %q: no slot number", ErrParse, line)
		}
		var local, remote, st, inode []byte
		for n := 2; n <= 10; n++ {
			var f []byte
			if f, rest = nextField(rest); f == nil {
				return dst, fmt.Errorf("%w: net/tcp line %q: %d fields, want at least 10", ErrParse, line, n-1)
			}
			switch n {
			case 2:
				local = f
			case 3:
				remote = f
			case 4:
				st = f
			case 10:
				inode = f
			}
		}
		addr, err := parseHexAddrPort(local)
		if err != nil {
			return dst, fmt.Errorf("%w: net/tcp line %q: local address %q: %w", ErrParse, line, local, err)
		}
		peer, err := parseHexAddrPort(remote)
		if err != nil {
			return dst, fmt.Errorf("%w: net/tcp line %q: remote address %q: %w", ErrParse, line, remote, err)
		}
		state, ok := parseHex(st)
		if !ok || len(st) != 2 {
			return dst, fmt.Errorf("%w: net/tcp line %q: bad state %q", ErrParse, line, st)
		}
		ino, ok := parseDec(inode)
		if !ok {
			return dst, fmt.Errorf("%w: net/tcp line %q: bad inode %q", ErrParse, line, inode)
		}
		dst = append(dst, tcpSocket{Local: addr, Remote: peer, State: uint8(state), Inode: ino})
	}
	return dst, nil
}

// errHexAddr is the cause in the error about a malformed address.
var errHexAddr = errors.New("want 8 or 32 hex digits, ':', 4 hex digits")

// parseHexAddrPort parses a net/tcp address, "0100007F:1F90" or the same
// with a 32-digit IPv6 address, as parseNetTCP describes.
func parseHexAddrPort(b []byte) (netip.AddrPort, error) {
	ip, port, ok := bytes.Cut(b, []byte{':'})
	if !ok || len(port) != 4 || (len(ip) != 8 && len(ip) != 32) {
		return netip.AddrPort{}, errHexAddr
	}
	p, ok := parseHex(port)
	if !ok {
		return netip.AddrPort{}, errHexAddr
	}
	var a [16]byte
	for i := 0; i < len(ip); i += 8 {
		w, ok := parseHex(ip[i : i+8])
		if !ok {
			return netip.AddrPort{}, errHexAddr
		}
		binary.NativeEndian.PutUint32(a[i/2:], uint32(w))
	}
	if len(ip) == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), uint16(p)), nil
	}
	return netip.AddrPortFrom(netip.AddrFrom16(a), uint16(p)), nil
}

// parseHex parses up to 16 hex digits, either case, reporting false for an
// empty field or any other byte.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// socketOwners returns, sorted, the pids under procRoot with a descriptor
// linked to one of inodes ("socket:[54719]", proc(5)). Processes that exit
// while being read, and fd directories it may not read, are passed over.
func socketOwners(procRoot string, inodes map[uint64]bool) []int {
	names, err := readDirNames(procRoot)
	if err != nil {
		return nil
	}
	var pids []int
	var fds fdReader
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		found := false
		fds.sockets(procRoot, pid, func(ino uint64) bool {
			found = inodes[ino]
			return !found
		})
		if found {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// fdReader lists the sockets a process holds: the inodes of its
// descriptors that link to a socket ("socket:[54719]", proc(5)). It reads
// the fd directory with getdents64 and each link with readlinkat, into
// buffers it reuses, so a listing allocates nothing but the path of the
// directory: the graph lists the system under test's descriptors at every
// look.
type fdReader struct {
	dents []byte
	link  []byte
	fds   []int
	name  []byte
}

// sockets calls yield with the inode of each socket pid holds, until
// yield returns false. A process that is gone or unreadable has none.
func (r *fdReader) sockets(procRoot string, pid int, yield func(inode uint64) bool) {
	if r.dents == nil {
		r.dents, r.link = make([]byte, 8<<10), make([]byte, 64)
	}
	dir, err := unix.Open(procRoot+"/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dir)
	r.fds = r.fds[:0]
	for {
		n, err := unix.Getdents(dir, r.dents)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		r.fds = appendDirentNumbers(r.fds, r.dents[:n], 0)
	}
	for _, fd := range r.fds {
		r.name = append(strconv.AppendInt(r.name[:0], int64(fd), 10), 0)
		n, err := readlinkat(dir, r.name, r.link)
		if err != nil || n >= len(r.link) {
			continue // gone, or too long for a socket link
		}
		if ino, ok := socketInode(r.link[:n]); ok && !yield(ino) {
			return
		}
	}
}

// socketInode returns the inode of an fd link to a socket, "socket:[54719]".
func socketInode(link []byte) (uint64, bool) {
	const prefix, suffix = "socket:[", "]"
	if len(link) <= len(prefix)+len(suffix) || string(link[:len(prefix)]) != prefix || string(link[len(link)-1:]) != suffix {
		return 0, false
	}
	return parseDec(link[len(prefix) : len(link)-1])
}

// readDirNames lists a directory's names, unsorted: the fd and pid
// directories are read once each, and sorting them would be wasted work.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
