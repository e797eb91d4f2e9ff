package host

import (
	"errors"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"reflect"
	"testing"
)

// TestConnectionPIDs finds the holders of the captured connections
// (listener_test.go describes testdata/net): 300 holds the server's end of
// 127.0.0.1:58076 → 127.0.0.1:8080, 303 the client's, 306 the client's
// end of [::1]:36938 → [::1]:8080.
func TestConnectionPIDs(t *testing.T) {
	ap := netip.MustParseAddrPort
	fds := map[string][]string{
		"300": {"/dev/null", "socket:[54719]", "socket:[54724]"},
		"301": {"socket:[54719]"},
		"303": {"socket:[54723]"},
		"306": {"pipe:[1]", "socket:[54727]"},
		"307": {"socket:[54723]"}, // a child that inherited 303's socket
	}
	client4 := TCPConn{ap("127.0.0.1:58076"), ap("127.0.0.1:8080")}
	server4 := TCPConn{ap("127.0.0.1:8080"), ap("127.0.0.1:58076")}
	client6 := TCPConn{ap("[::1]:36938"), ap("[::1]:8080")}
	mapped := TCPConn{ap("[::ffff:127.0.0.1]:58076"), ap("[::ffff:127.0.0.1]:8080")}
	anyPeer := TCPConn{Local: ap("127.0.0.1:58076")}
	listener := TCPConn{Local: ap("127.0.0.1:6379")}
	wrongPeer := TCPConn{ap("127.0.0.1:58076"), ap("127.0.0.1:9")}
	tests := []struct {
		name    string
		conns   []TCPConn
		prepare func(t *testing.T, root string)
		want    map[TCPConn][]int
		wantErr bool
	}{
		{name: "both ends, IPv4 and IPv6", conns: []TCPConn{client4, server4, client6},
			want: map[TCPConn][]int{client4: {303, 307}, server4: {300}, client6: {306}}},
		{name: "IPv4 in IPv6 is IPv4", conns: []TCPConn{mapped}, want: map[TCPConn][]int{mapped: {303, 307}}},
		{name: "any peer", conns: []TCPConn{anyPeer}, want: map[TCPConn][]int{anyPeer: {303, 307}}},
		{name: "one socket asked for twice", conns: []TCPConn{client4, anyPeer}, want: map[TCPConn][]int{client4: {303, 307}, anyPeer: {303, 307}}},
		{name: "a listener is no connection", conns: []TCPConn{listener}, want: map[TCPConn][]int{}},
		{name: "another peer", conns: []TCPConn{wrongPeer}, want: map[TCPConn][]int{}},
		{name: "none asked", conns: nil},
		{name: "no tcp6", conns: []TCPConn{client4, client6}, prepare: remove("net/tcp6"), want: map[TCPConn][]int{client4: {303, 307}}},
		{name: "neither", conns: []TCPConn{client4}, wantErr: true, prepare: func(t *testing.T, root string) {
			remove("net/tcp")(t, root)
			remove("net/tcp6")(t, root)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := procTree(t, fds)
			if tt.prepare != nil {
				tt.prepare(t, root)
			}
			got, err := ConnectionPIDs(root, tt.conns)
			if tt.wantErr {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %v, %v; want an error naming the missing files", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestConnectionPIDsLive connects to a listener of this process over
// loopback and finds this process holding both ends in the real /proc.
func TestConnectionPIDsLive(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := TCPConn{c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()}
	got, err := ConnectionPIDs(DefaultProcRoot, []TCPConn{conn})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[TCPConn][]int{conn: {os.Getpid()}}; !maps.EqualFunc(got, want, func(a, b []int) bool { return reflect.DeepEqual(a, b) }) {
		t.Fatalf("got %v; want this process, %v", got, want)
	}
}
