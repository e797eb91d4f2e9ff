package host

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tare-dev/tare/schedprobe"
)

// TestTracedMember: a traced connect counts for the system under test's
// process that made it, or, when that one is not in the process table
// (a proxy's child for one connection, gone by the look), for the
// nearest ancestor of it that is a member; a connect by a process in the
// table outside the system under test never does.
func TestTracedMember(t *testing.T) {
	// socat (100) is the system under test; 300 is a client of it, a
	// child of the shell 200; 400 a child of socat's the user excluded.
	procs := map[int]procStat{1: {}, 100: {PPID: 1}, 200: {PPID: 1}, 300: {PPID: 200}, 400: {PPID: 100}}
	m := newMembers()
	m.sut[100] = true
	for _, c := range []struct {
		name      string
		pid       int
		ancestors [schedprobe.Ancestry]int
		want      int // 0: not the system under test's
	}{
		{"the member itself", 100, [schedprobe.Ancestry]int{1}, 100},
		{"its child, gone", 101, [schedprobe.Ancestry]int{100, 1}, 100},
		{"its grandchild, both gone", 102, [schedprobe.Ancestry]int{101, 100, 1}, 100},
		{"a client", 300, [schedprobe.Ancestry]int{200, 1}, 0},
		{"a gone child of a client", 301, [schedprobe.Ancestry]int{300, 200, 1}, 0},
		{"a process outside it, which socat's child had become", 300, [schedprobe.Ancestry]int{100, 1}, 0},
		{"a gone child of an excluded child", 401, [schedprobe.Ancestry]int{400, 100, 1}, 0},
		{"a gone process reparented to init", 500, [schedprobe.Ancestry]int{1}, 0},
		{"ancestry unknown past the recorded ones", 600, [schedprobe.Ancestry]int{601, 602, 603, 604}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, ok := tracedMember(schedprobe.Connect{PID: c.pid, Ancestors: c.ancestors}, procs, m)
			if ok != (c.want != 0) || pid != c.want {
				t.Errorf("tracedMember = %d, %v; want %d, %v", pid, ok, c.want, c.want != 0)
			}
		})
	}
}

// TestGraphTracedAcrossNetns: on a fixture /proc, a proxy (socat, pid
// 100) whose child for one connection (101) connected to 10.231.4.2:8080
// and is gone: the look follows the traced connect into the namespace
// that has that address as its own, to gunicorn (200) listening there on
// every address, and not to the process of tare's namespace (300) that
// listens on every address at the same port, nor into a third namespace
// (400) that listens there too but has not the address.
func TestGraphTracedAcrossNetns(t *testing.T) {
	root := t.TempDir()
	listen := func(port uint16, inode uint64) []tcpSocket {
		return []tcpSocket{{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), port), Remote: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), State: tcpListen, Inode: inode}}
	}
	fibTrie := func(addr string) string {
		return "Local:\n  +-- 0.0.0.0/0 3 0 5\n     |-- " + addr + "\n        /32 host LOCAL\n     |-- 127.0.0.1\n        /32 host LOCAL\n"
	}
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(path, target string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	// tare's namespace, 1: 192.0.2.2, and pid 300 on *:8080.
	link("self/ns/net", "net:[1]")
	write("net/tcp", formatNetTCP(listen(8080, 3000)))
	write("net/fib_trie", fibTrie("192.0.2.2"))
	procs := map[int]procStat{1: {Comm: "init"}}
	for _, p := range []struct {
		pid   int
		comm  string
		ns    string
		inode uint64 // the listening socket it holds
		table []tcpSocket
		addr  string
	}{
		{100, "socat", "net:[1]", 1000, nil, ""},
		{300, "sshd", "net:[1]", 3000, nil, ""},
		{200, "gunicorn", "net:[2]", 2000, listen(8080, 2000), "10.231.4.2"},
		{400, "nginx", "net:[4]", 4000, listen(8080, 4000), "10.231.5.2"},
	} {
		procs[p.pid] = procStat{PID: p.pid, Comm: p.comm, PPID: 1, Start: uint64(p.pid)}
		dir := strconv.Itoa(p.pid)
		link(dir+"/ns/net", p.ns)
		link(dir+"/fd/3", "socket:["+strconv.FormatUint(p.inode, 10)+"]")
		if p.table != nil {
			write(dir+"/net/tcp", formatNetTCP(p.table))
			write(dir+"/net/fib_trie", fibTrie(p.addr))
		}
	}

	g := newGraph(root, []Part{{PIDs: []int{100}, How: "listening socket of 127.0.0.1:8000"}})
	drained := []schedprobe.Connect{{PID: 101, Ancestors: [schedprobe.Ancestry]int{100, 1}, TCP: netip.MustParseAddrPort("10.231.4.2:8080")}}
	g.drain = func() ([]schedprobe.Connect, error) {
		out := drained
		drained = nil
		return out, nil
	}
	m := newMembers()
	m.find(procs, g.roots(), nil, nil)
	lookAll(g, m, procs, nil)
	if len(g.nodes) != 2 || g.nodes[1].roots[0] != 200 {
		t.Fatalf("nodes %+v; want socat, then gunicorn (pid 200) in the namespace that has 10.231.4.2", g.nodes)
	}
	if want := "tcp 10.231.4.2:8080 in netns of pid 200 from socat"; g.nodes[1].reachedBy != want {
		t.Errorf("reached by %q; want %q", g.nodes[1].reachedBy, want)
	}
	if !m.sut[200] || m.sut[300] || m.sut[400] {
		t.Errorf("system under test %v; want socat and gunicorn, neither sshd nor nginx", m.sut)
	}
}
