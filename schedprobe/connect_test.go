package schedprobe

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// TestConnects: the tracer records a TCP connection and a Unix one this
// process opened, each once, with where it went, though both are closed
// before it is read; a second drain has forgotten them. Where the tracer
// is expected (root, tracefs), one that does not load or attach fails the
// test.
func TestConnects(t *testing.T) {
	if err := ConnectsExpected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	c, err := OpenConnects()
	if err != nil {
		t.Fatalf("OpenConnects as root with tracefs: %v", err)
	}
	defer c.Close()
	if _, err := c.Drain(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	path := filepath.Join(t.TempDir(), "s.sock")
	u, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for range 3 {
		for _, d := range [][2]string{{"tcp", l.Addr().String()}, {"unix", path}} {
			conn, err := net.Dial(d[0], d[1])
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
		}
	}
	got, err := c.Drain()
	if err != nil {
		t.Fatal(err)
	}
	var mine []Connect
	for _, g := range got {
		if g.PID == os.Getpid() {
			mine = append(mine, g)
		}
	}
	tcp := Connect{PID: os.Getpid(), Ancestors: ancestry(t, os.Getpid()), TCP: l.Addr().(*net.TCPAddr).AddrPort()}
	unix := Connect{PID: os.Getpid(), Ancestors: ancestry(t, os.Getpid()), Unix: path}
	if len(mine) != 2 || !slices.Contains(mine, tcp) || !slices.Contains(mine, unix) {
		t.Errorf("connects of this process %+v; want %+v and %+v, once each", mine, tcp, unix)
	}
	if again, _ := c.Drain(); slices.ContainsFunc(again, func(g Connect) bool { return g.PID == os.Getpid() }) {
		t.Errorf("a second drain still has this process's connects: %+v", again)
	}
}

// TestConnectsExpected: the tracer is expected as root on a kernel with
// BTF, with tracefs mounted (its events folder present) where cilium/ebpf
// looks for it; otherwise the reason names what is missing.
func TestConnectsExpected(t *testing.T) {
	mounted, empty := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(mounted, "events"), 0o755); err != nil {
		t.Fatal(err)
	}
	btf := filepath.Join(mounted, "vmlinux")
	if err := os.WriteFile(btf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	noBTF := filepath.Join(empty, "vmlinux")
	for _, tt := range []struct {
		name    string
		euid    int
		btf     string
		tracefs []string
		why     string // "" when expected
	}{
		{"root, BTF, tracefs", 0, btf, []string{mounted}, ""},
		{"root, tracefs at the second place", 0, btf, []string{empty, mounted}, ""},
		{"not root", 1000, btf, []string{mounted}, "not root"},
		{"root, no BTF", 0, noBTF, []string{mounted}, "no BTF"},
		{"root, no tracefs", 0, btf, []string{empty}, "tracefs is not mounted on " + empty},
	} {
		err := connectsExpected(tt.euid, tt.btf, tt.tracefs)
		if (tt.why == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.why)
		}
	}
}
