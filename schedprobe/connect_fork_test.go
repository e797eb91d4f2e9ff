package schedprobe

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// TestConnectsAncestors: a connect made by a grandchild of this process,
// which is gone before the tracer is read, still says whom it descended
// from: the shell that forked it, then this process, as a proxy's child
// for one connection (socat's fork) says which proxy it served.
func TestConnectsAncestors(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		testservice.Missing(t, "no bash to connect from a child: %v", err)
	}
	if err := ConnectsExpected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	c, err := OpenConnects()
	if err != nil {
		t.Fatalf("OpenConnects as root with BTF and tracefs: %v", err)
	}
	defer c.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	// The outer shell forks the inner one (the "; true" keeps it from
	// exec'ing it in its place), which connects and exits.
	shell := exec.Command(bash, "-c", bash+` -c 'exec 3<>/dev/tcp/127.0.0.1/`+port+`'; true`)
	if out, err := shell.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", shell, err, out)
	}
	got, err := c.Drain()
	if err != nil {
		t.Fatal(err)
	}
	var found []Connect
	for _, g := range got {
		if g.TCP == l.Addr().(*net.TCPAddr).AddrPort() {
			found = append(found, g)
		}
	}
	if len(found) != 1 {
		t.Fatalf("connects to %s: %+v; want the inner shell's, once", l.Addr(), found)
	}
	if a := found[0].Ancestors; a[0] != shell.Process.Pid || a[1] != os.Getpid() || a[2] != os.Getppid() {
		t.Errorf("ancestors %v; want the outer shell %d, this process %d, its parent %d", a, shell.Process.Pid, os.Getpid(), os.Getppid())
	}
}

// ancestry is what the tracer records of pid's ancestors, read from
// /proc: each process's parent up to init, Ancestry of them at most.
func ancestry(t *testing.T, pid int) [Ancestry]int {
	t.Helper()
	var out [Ancestry]int
	for i := range out {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if pid, err = strconv.Atoi(fields[1]); err != nil {
			t.Fatalf("ppid of %d: %v", pid, err)
		}
		out[i] = pid
		if pid <= 1 {
			break
		}
	}
	return out
}
