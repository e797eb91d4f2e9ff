package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testdata/net/tcp and tcp6 were captured on the development VM while a
// python process held these sockets (inode: what):
//
//	tcp   54719  0.0.0.0:8080 LISTEN
//	      54724  127.0.0.1:8080 ESTABLISHED, accepted from 127.0.0.1:58076 (54723)
//	          0  127.0.0.1:8080 TIME_WAIT (a closed connection: a short row)
//	      9920, 9945, 1037: the VM's own listeners on 127.0.0.1:6379,
//	                        127.0.0.1:5432 and 0.0.0.0:2024
//	tcp6  54720  [::]:8080 LISTEN (IPV6_V6ONLY, beside the IPv4 one)
//	      54721  [::1]:41269 LISTEN
//	      54722  [::ffff:127.0.0.1]:34193 LISTEN
//	      54728  [::1]:8080 ESTABLISHED, accepted from [::1]:36938 (54727)
func TestParseNetTCP(t *testing.T) {
	ap := netip.MustParseAddrPort
	none4, none6 := ap("0.0.0.0:0"), ap("[::]:0") // a socket with no peer
	tests := []struct {
		name    string
		file    string // under testdata/net, or
		in      string
		want    []tcpSocket
		wantErr string
	}{
		{name: "tcp", file: "tcp", want: []tcpSocket{
			{ap("127.0.0.1:6379"), none4, 0x0A, 9920},
			{ap("0.0.0.0:8080"), none4, 0x0A, 54719},
			{ap("127.0.0.1:5432"), none4, 0x0A, 9945},
			{ap("0.0.0.0:2024"), none4, 0x0A, 1037},
			{ap("127.0.0.1:8080"), ap("127.0.0.1:58076"), 0x01, 54724},
			{ap("127.0.0.1:8080"), ap("127.0.0.1:58078"), 0x06, 0},
			{ap("127.0.0.1:58076"), ap("127.0.0.1:8080"), 0x01, 54723},
		}},
		{name: "tcp6", file: "tcp6", want: []tcpSocket{
			{ap("[::]:8080"), none6, 0x0A, 54720},
			{ap("[::1]:41269"), none6, 0x0A, 54721},
			{ap("[::ffff:127.0.0.1]:34193"), none6, 0x0A, 54722},
			{ap("[::1]:8080"), ap("[::1]:36938"), 0x01, 54728},
			{ap("[::1]:36938"), ap("[::1]:8080"), 0x01, 54727},
		}},
		{name: "header only", in: "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"},
		{name: "empty", in: ""},
		{name: "lower-case hex", in: "   0: 0100007f:1f90 00000000:0000 0a 00000000:00000000 00:00000000 00000000     0        0 7 1 0 100 0 0 10 0\n",
			want: []tcpSocket{{ap("127.0.0.1:8080"), none4, 0x0A, 7}}},
		{name: "short row", in: "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0\n", wantErr: "9 fields, want at least 10"},
		{name: "no slot", in: "0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7\n", wantErr: "no slot number"},
		{name: "address without port", in: "   0: 0100007F 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7\n", wantErr: `local address "0100007F"`},
		{name: "address of 7 digits", in: "   0: 100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7\n", wantErr: "local address"},
		{name: "port not hex", in: "   0: 0100007F:1G90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7\n", wantErr: "local address"},
		{name: "bad state", in: "   0: 0100007F:1F90 00000000:0000 LISTEN 00000000:00000000 00:00000000 00000000 0 0 7\n", wantErr: `bad state "LISTEN"`},
		{name: "bad inode", in: "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 -7\n", wantErr: `bad inode "-7"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if tt.file != "" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", "net", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseNetTCP(in, nil)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one wrapping ErrParse and saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v\nwant %v", got, err, tt.want)
			}
		})
	}
}

// formatNetTCP writes sockets back as a net/tcp file, the way the kernel
// does (tcp4_seq_show, tcp6_seq_show).
func formatNetTCP(socks []tcpSocket) string {
	var b strings.Builder
	b.WriteString("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	for i, s := range socks {
		fmt.Fprintf(&b, "%4d: %s %s %02X 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
			i, formatHexAddrPort(s.Local), formatHexAddrPort(s.Remote), s.State, s.Inode)
	}
	return b.String()
}

// formatHexAddrPort writes an address as net/tcp does: the address's
// 32-bit words each in host order, then the port, in hex.
func formatHexAddrPort(ap netip.AddrPort) string {
	a := ap.Addr().As16()
	words := a[:]
	if ap.Addr().Is4() {
		a4 := ap.Addr().As4()
		words = a4[:]
	}
	var b strings.Builder
	for w := 0; w < len(words); w += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(words[w:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}

// FuzzParseNetTCP: parseNetTCP never panics, fails only with ErrParse, and
// the sockets it accepts survive being written back as the kernel would.
func FuzzParseNetTCP(f *testing.F) {
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("testdata", "net", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 7\n"))
	f.Add([]byte("   5: 0100007F:1F90 0100007F:E2DE 06 00000000:00000000 03:0000175B 00000000     0        0 0 3 00000000554b3b8f"))
	f.Add([]byte("sl\n0: 1:2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		socks, err := parseNetTCP(b, nil)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		text := formatNetTCP(socks)
		again, err := parseNetTCP([]byte(text), nil)
		if err != nil || !slices.Equal(again, socks) {
			t.Fatalf("%q parsed as %v; written back as %q it parses as %v, %v", b, socks, text, again, err)
		}
	})
}

// procTree writes a fixture procRoot: net/tcp and net/tcp6 from testdata,
// and for each pid an fd directory with links to the given targets.
func procTree(t *testing.T, fds map[string][]string) string {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("testdata", "net", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, root, map[string]string{"net/" + name: string(b)})
	}
	for pid, targets := range fds {
		dir := filepath.Join(root, pid, "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, target := range targets {
			if err := os.Symlink(target, filepath.Join(dir, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// TestListenerPIDs matches the captured sockets against fixture processes:
//
//	300  the server: stdio, the IPv4 listener on 8080 and an accepted connection
//	301  a prefork worker sharing the IPv4 listener on 8080
//	302  the IPv6 listener on 8080, in another process
//	303  a client connected to 8080: not a listener
//	304  the listener on [::1]:41269
//	305  a process whose fd directory cannot be read (a file here)
//
// The listener on 34193 is held by no visible process.
func TestListenerPIDs(t *testing.T) {
	fds := map[string][]string{
		"300":  {"/dev/null", "pipe:[1234]", "/dev/null", "socket:[54719]", "socket:[54724]", "anon_inode:[eventpoll]"},
		"301":  {"/dev/null", "socket:[54719]"},
		"302":  {"socket:[54720]", "socket:[54728]"},
		"303":  {"socket:[54723]", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		"304":  {"socket:[54721]"},
		"self": {"socket:[54719]"}, // a link to a pid already counted: not a pid
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, root string)
		port    int
		want    []int
		wantErr bool
	}{
		{name: "IPv4 and IPv6 listeners, shared and not", port: 8080, want: []int{300, 301, 302}},
		{name: "IPv6 loopback", port: 41269, want: []int{304}},
		{name: "owner not visible", port: 34193},
		{name: "nobody listens", port: 9},
		{name: "only a connection's port", port: 58076},
		{name: "port out of range", port: 8080 + 1<<16},
		{name: "no tcp6", port: 8080, want: []int{300, 301}, prepare: remove("net/tcp6")},
		{name: "no tcp", port: 8080, want: []int{302}, prepare: remove("net/tcp")},
		{name: "tcp garbage", port: 8080, want: []int{302}, prepare: garble("net/tcp")},
		{name: "neither", port: 8080, wantErr: true, prepare: func(t *testing.T, root string) {
			remove("net/tcp")(t, root)
			garble("net/tcp6")(t, root)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := procTree(t, fds)
			writeFiles(t, root, map[string]string{"305/fd": "not a directory"})
			if tt.prepare != nil {
				tt.prepare(t, root)
			}
			got, err := ListenerPIDs(root, tt.port)
			if tt.wantErr {
				// both causes, the missing file and the bad one
				if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrParse) {
					t.Fatalf("got %v, %v; want an error naming both files' faults", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// remove returns a prepare step deleting root/name.
func remove(name string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.Remove(filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// garble returns a prepare step making root/name unparsable.
func garble(name string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		t.Helper()
		writeFiles(t, root, map[string]string{name: "  sl  local_address\n   0: nonsense\n"})
	}
}

// TestListenerPIDsLive listens in this process, on IPv4 and (where the
// host has it) IPv6 loopback, and looks itself up in the real /proc.
func TestListenerPIDsLive(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			got, err := ListenerPIDs("/proc", port)
			if err != nil || !slices.Contains(got, os.Getpid()) {
				t.Errorf("listening on %v: ListenerPIDs = %v, %v; want it to hold pid %d", l.Addr(), got, err, os.Getpid())
			}
			// once closed, nobody listens on the port (another process
			// taking the same ephemeral port meanwhile is very unlikely)
			l.Close()
			if got, err := ListenerPIDs("/proc", port); err != nil || len(got) != 0 {
				t.Errorf("after closing %v: ListenerPIDs = %v, %v; want none", l.Addr(), got, err)
			}
		})
	}
}
