package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// listeningTCP is the listening TCP sockets of procRoot's network
// namespace: through sock_diag when procRoot is the host's /proc (the
// namespace tare runs in), else, or where sock_diag fails, from procRoot's
// net/tcp and net/tcp6.
func listeningTCP(procRoot string) ([]tcpSocket, error) {
	if procRoot == "/proc" {
		if socks, err := tcpListeners(); err == nil {
			return socks, nil
		}
	}
	return readNetTCP(procRoot)
}

// tcpListeners lists the listening TCP sockets of tare's network
// namespace, IPv4 and IPv6, by a sock_diag dump of inet_diag that asks for
// state TCP_LISTEN alone (sock_diag(7)): the kernel then walks its
// listening sockets only, where a read of /proc/net/tcp prints every
// socket of the namespace as text, the thousand TIME_WAIT ones a load
// test leaves behind too (10 ms on this project's VM). An error only when
// neither family can be listed (a host without IPv6 has no AF_INET6).
func tcpListeners() ([]tcpSocket, error) {
	var out []tcpSocket
	var errs []error
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		err := sockDiag("listening TCP sockets", inetDiagRequest(family, 1<<tcpListen), func(b []byte) (done bool, err error) {
			out, done, err = parseInetDiag(b, out)
			return done, err
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 2 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// inetDiagRequest is a struct inet_diag_req_v2 asking for the TCP
// sockets of family in the states of the bit mask states (bit n: state
// n):
//
//	inet_diag_req_v2  family u8 | protocol u8 | ext u8 | pad u8 | states u32 | id (inet_diag_sockid, 48 bytes)
func inetDiagRequest(family uint8, states uint32) []byte {
	b, r := diagRequest(56)
	r[0], r[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], states)
	return b
}

// inetDiagMsgLen is the size of a struct inet_diag_msg: family u8 |
// state u8 | timer u8 | retrans u8 | id (sport be16 | dport be16 | src
// [16]u8 | dst [16]u8 | if u32 | cookie [2]u32) | expires u32 | rqueue
// u32 | wqueue u32 | uid u32 | inode u32.
const inetDiagMsgLen = 72

// parseInetDiag appends the sockets of one read of an inet_diag dump to
// dst and reports whether the dump is done. An IPv4 socket's addresses
// take the first 4 bytes of their 16.
func parseInetDiag(b []byte, dst []tcpSocket) ([]tcpSocket, bool, error) {
	done, err := diagMessages(b, "TCP sockets", func(d []byte) error {
		if len(d) < inetDiagMsgLen {
			return fmt.Errorf("%w: inet_diag message of %d bytes, want %d at least", ErrParse, len(d), inetDiagMsgLen)
		}
		var local, remote netip.Addr
		switch d[0] {
		case unix.AF_INET:
			local, remote = netip.AddrFrom4([4]byte(d[8:12])), netip.AddrFrom4([4]byte(d[24:28]))
		case unix.AF_INET6:
			local, remote = netip.AddrFrom16([16]byte(d[8:24])), netip.AddrFrom16([16]byte(d[24:40]))
		default:
			return nil
		}
		be := binary.BigEndian
		dst = append(dst, tcpSocket{
			Local:  netip.AddrPortFrom(local, be.Uint16(d[4:])),
			Remote: netip.AddrPortFrom(remote, be.Uint16(d[6:])),
			State:  d[1],
			Inode:  uint64(binary.NativeEndian.Uint32(d[68:])),
		})
		return nil
	})
	return dst, done, err
}
