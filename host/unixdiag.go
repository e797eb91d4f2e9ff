package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// unixSockets lists the Unix-domain sockets of tare's network namespace
// with their names and peers, through the kernel's sock_diag interface
// (sock_diag(7): a NETLINK_SOCK_DIAG dump of AF_UNIX with UDIAG_SHOW_NAME
// and UDIAG_SHOW_PEER): /proc/net/unix has the names but not who is
// connected to whom.
func unixSockets() ([]unixSocket, error) { return listUnix(udiagShowName | udiagShowPeer) }

// listUnix is a sock_diag dump of the Unix sockets with the attributes
// show asks for (UDIAG_SHOW_*).
func listUnix(show uint32) ([]unixSocket, error) {
	var out []unixSocket
	err := sockDiag("unix sockets", unixDiagRequest(show), func(b []byte) (done bool, err error) {
		out, done, err = parseUnixDiag(b, out)
		return done, err
	})
	return out, err
}

// sockDiag sends a sock_diag request (req: its netlink header and body)
// and hands each read of the answer to parse until parse says the dump is
// done; what names the sockets listed, in errors.
func sockDiag(what string, req []byte, parse func([]byte) (done bool, err error)) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("list %s: sock_diag socket: %w", what, err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("list %s: send the sock_diag request: %w", what, err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: read the sock_diag answer: %w", what, err)
		}
		if done, err := parse(buf[:n]); err != nil || done {
			return err
		}
	}
}

// The sock_diag constants of include/uapi/linux/unix_diag.h.
const (
	udiagShowName = 0x01 // UDIAG_SHOW_NAME
	udiagShowVFS  = 0x02 // UDIAG_SHOW_VFS
	udiagShowPeer = 0x04 // UDIAG_SHOW_PEER
	unixDiagName  = 0    // UNIX_DIAG_NAME attribute
	unixDiagVFS   = 1    // UNIX_DIAG_VFS attribute
	unixDiagPeer  = 2    // UNIX_DIAG_PEER attribute
)

// diagRequest is a sock_diag dump request of size bytes after its
// netlink header, and that part of it, for the caller to fill:
//
//	nlmsghdr   len u32 | type u16 | flags u16 | seq u32 | pid u32
func diagRequest(size int) (b, r []byte) {
	b = make([]byte, unix.NLMSG_HDRLEN+size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], 1)
	return b, b[unix.NLMSG_HDRLEN:]
}

// unixDiagRequest is a struct unix_diag_req asking for every Unix socket
// in every state, with what show asks for (its name, its peer, its
// file):
//
//	unix_diag_req  family u8 | protocol u8 | pad u16 | states u32 | ino u32 | show u32 | cookie [2]u32
func unixDiagRequest(show uint32) []byte {
	b, r := diagRequest(24)
	r[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(r[4:], ^uint32(0)) // every state
	binary.NativeEndian.PutUint32(r[12:], show)
	return b
}

// parseUnixDiag appends the sockets of one read of a sock_diag dump to
// dst and reports whether the dump is done. Each message is a struct
// unix_diag_msg (family u8 | type u8 | state u8 | pad u8 | ino u32 |
// cookie [2]u32) followed by attributes (len u16 | type u16 | value,
// padded to 4 bytes); UNIX_DIAG_VFS's value is the bound file's inode and
// device (ino u32 | dev u32, the kernel's own dev_t: major << 20 | minor).
func parseUnixDiag(b []byte, dst []unixSocket) ([]unixSocket, bool, error) {
	ne := binary.NativeEndian
	done, err := diagMessages(b, "unix sockets", func(d []byte) error {
		if len(d) < 16 {
			return fmt.Errorf("%w: sock_diag message of %d bytes, want 16 at least", ErrParse, len(d))
		}
		u := unixSocket{Type: d[1], State: d[2], Inode: uint64(ne.Uint32(d[4:]))}
		for a := d[16:]; len(a) >= 4; {
			n, typ := int(ne.Uint16(a)), ne.Uint16(a[2:])
			if n < 4 || n > len(a) {
				break
			}
			v := a[4:n]
			switch {
			case typ == unixDiagName:
				u.Name = unixName(string(v))
			case typ == unixDiagPeer && len(v) >= 4:
				u.Peer = uint64(ne.Uint32(v))
			case typ == unixDiagVFS && len(v) >= 8:
				u.FileIno, u.FileDev = uint64(ne.Uint32(v)), ne.Uint32(v[4:])
			}
			a = a[min((n+3)&^3, len(a)):]
		}
		dst = append(dst, u)
		return nil
	})
	return dst, done, err
}

// diagMessages walks one read of a sock_diag dump, handing each socket's
// message to each, and reports whether the dump is done: at NLMSG_DONE,
// or at NLMSG_ERROR, with its errno when there is one. what names the
// sockets listed, in errors.
func diagMessages(b []byte, what string, each func(msg []byte) error) (done bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return false, fmt.Errorf("%w: sock_diag answer: %w", ErrParse, err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return true, fmt.Errorf("list %s: sock_diag: %w", what, syscall.Errno(errno))
				}
			}
			return true, nil
		}
		if err := each(m.Data); err != nil {
			return false, err
		}
	}
	return false, nil
}

// unixName writes a socket's bound name as ss does: a path as it is, an
// abstract name (a leading NUL) with '@' in its place.
func unixName(name string) string {
	name = strings.TrimRight(name, "\x00")
	if strings.HasPrefix(name, "\x00") {
		return "@" + name[1:]
	}
	return name
}

// UnixListenerPIDs returns the processes that hold the listening
// Unix-domain socket bound at path, sorted: the socket whose bound file is
// path's file (its inode and device, as sock_diag's UNIX_DIAG_VFS gives
// them: a server may have bound it by a relative path or through a
// symbolic link), matched against the socket:[inode] links in
// procRoot/<pid>/fd. Empty (nil error) when no visible process holds it;
// an error when path cannot be read or the sockets cannot be listed.
//
// It is how tare finds the system under test of a target it reaches
// through --unix-socket. It sees the sockets of tare's own network
// namespace (a socket file shared into a container is bound in the
// container's), and, as ListenerPIDs, other users' descriptors only as
// root or with CAP_SYS_PTRACE.
func UnixListenerPIDs(procRoot, path string) ([]int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	socks, err := listUnix(udiagShowName | udiagShowVFS)
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, u := range socks {
		if u.State == tcpListen && u.FileIno == st.Ino && sameDev(u.FileDev, st.Dev) {
			inodes[u.Inode] = true
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	return socketOwners(procRoot, inodes), nil
}

// sameDev says whether the kernel's dev_t kdev (major << 20 | minor, what
// sock_diag reports) is the device stat(2) encodes as dev.
func sameDev(kdev uint32, dev uint64) bool {
	return kdev>>20 == unix.Major(dev) && kdev&(1<<20-1) == unix.Minor(dev)
}
