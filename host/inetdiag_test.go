package host

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTCPListenersAsProcNetTCP: sock_diag lists this process's listening
// sockets, IPv4 and IPv6, at the address and with the inode
// /proc/net/tcp gives them, and nothing but listening sockets.
func TestTCPListenersAsProcNetTCP(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			defer l.Close()
			at := l.Addr().(*net.TCPAddr).AddrPort()
			find := func(socks []tcpSocket) (tcpSocket, bool) {
				for _, s := range socks {
					if s.Local == at && s.State == tcpListen {
						return s, true
					}
				}
				return tcpSocket{}, false
			}
			diag, err := tcpListeners()
			if err != nil {
				t.Fatal(err)
			}
			proc, err := readNetTCP("/proc")
			if err != nil {
				t.Fatal(err)
			}
			d, inDiag := find(diag)
			p, inProc := find(proc)
			if !inDiag || !inProc || d.Inode != p.Inode || d.Inode == 0 {
				t.Errorf("listening on %v: sock_diag gave %+v (found: %v), /proc/net/tcp %+v (found: %v); want the same socket", at, d, inDiag, p, inProc)
			}
			for _, s := range diag {
				if s.State != tcpListen {
					t.Errorf("sock_diag gave %+v, not listening", s)
				}
			}
		})
	}
}

// inetDiagMessage is one netlink message of an inet_diag dump: a socket,
// or the dump's end (done).
func inetDiagMessage(family uint8, local netip.AddrPort, state uint8, inode uint32, done bool) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+inetDiagMsgLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	if done {
		ne.PutUint16(b[4:], unix.NLMSG_DONE)
	}
	d := b[unix.NLMSG_HDRLEN:]
	d[0], d[1] = family, state
	binary.BigEndian.PutUint16(d[4:], local.Port())
	a := local.Addr().As16()
	if family == unix.AF_INET {
		copy(d[8:], local.Addr().AsSlice())
	} else {
		copy(d[8:], a[:])
	}
	ne.PutUint32(d[68:], inode)
	return b
}

func TestParseInetDiag(t *testing.T) {
	v4 := netip.MustParseAddrPort("127.0.0.1:8080")
	v6 := netip.MustParseAddrPort("[::1]:443")
	b := append(inetDiagMessage(unix.AF_INET, v4, tcpListen, 4242, false), inetDiagMessage(unix.AF_INET6, v6, tcpListen, 4343, false)...)
	got, done, err := parseInetDiag(b, nil)
	if err != nil || done || len(got) != 2 {
		t.Fatalf("parseInetDiag = %+v, done %v, %v; want two sockets, not done", got, done, err)
	}
	if got[0].Local != v4 || got[0].Inode != 4242 || got[1].Local != v6 || got[1].Inode != 4343 || got[0].State != tcpListen {
		t.Errorf("parseInetDiag = %+v; want %v inode 4242 and %v inode 4343, listening", got, v4, v6)
	}
	if _, done, err := parseInetDiag(inetDiagMessage(0, v4, 0, 0, true), nil); !done || err != nil {
		t.Errorf("NLMSG_DONE: done %v, %v; want done", done, err)
	}
	short := inetDiagMessage(unix.AF_INET, v4, tcpListen, 1, false)[:unix.NLMSG_HDRLEN+20]
	binary.NativeEndian.PutUint32(short, uint32(len(short)))
	if _, _, err := parseInetDiag(short, nil); err == nil {
		t.Error("a message of 20 bytes parsed; want an error")
	}
}

func FuzzParseInetDiag(f *testing.F) {
	f.Add(inetDiagMessage(unix.AF_INET, netip.MustParseAddrPort("127.0.0.1:80"), tcpListen, 1, false))
	f.Add(inetDiagMessage(unix.AF_INET6, netip.MustParseAddrPort("[::1]:80"), tcpListen, 2, false))
	f.Add(inetDiagMessage(0, netip.AddrPort{}, 0, 0, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		socks, _, err := parseInetDiag(b, nil)
		if _, perr := syscall.ParseNetlinkMessage(b); perr != nil && err == nil {
			t.Errorf("%x: no error where the netlink framing is bad (%v)", b, perr)
		}
		for _, s := range socks {
			if !s.Local.IsValid() {
				t.Errorf("%x: a socket without an address: %+v", b, s)
			}
		}
	})
}
