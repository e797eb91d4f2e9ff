// Package interfere makes real interference for tests: CPU hogs pinned to a
// core and cgroups with a small CPU quota. Everything it starts or makes is
// bounded in time and undone when the test ends. What the machine does not
// allow (not root, no cgroup cpu controller) ends the test with
// testservice.Unable (a skip saying why, a failure under CI); a missing
// program (taskset) is testservice.Missing; anything else that fails (a
// write of cpu.max as root) fails the test: throttling must not go
// untested in a green run.
package interfere

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// Exclusive holds a machine-wide lock until the test ends, so that tests
// making interference on purpose, in different packages that go test runs
// at the same time, do not measure each other's hogs.
func Exclusive(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "tare-interfere.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("open the interference lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("take the interference lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// Busy starts a CPU-bound shell loop, run under prefix (for example
// "taskset", "-c", "0"), killed when the test ends or after a minute.
func Busy(t testing.TB, prefix ...string) *exec.Cmd {
	t.Helper()
	return BusyAs(t, "sh", prefix...)
}

// BusyAs is Busy run by the shell at sh: a link to sh under another name
// (nightly-compactor) makes a hog of that name.
func BusyAs(t testing.TB, sh string, prefix ...string) *exec.Cmd {
	t.Helper()
	return start(t, prefix, sh, "-c", "while :; do :; done")
}

// start runs the command under prefix, killed when the test ends or after
// a minute; it skips the test when a program is not installed.
func start(t testing.TB, prefix []string, command ...string) *exec.Cmd {
	t.Helper()
	args := append(append([]string(nil), prefix...), command...)
	for _, p := range []string{args[0], command[0]} {
		if _, err := exec.LookPath(p); err != nil {
			testservice.Missing(t, "%s is not installed: cannot start the CPU hog; install Debian's util-linux, coreutils and perl-base (scripts/test does, as root)", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// A test binary that panics (a -timeout) runs no cleanup, and its
	// context's timer dies with it: the hog must die with it too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return cmd
}

// Duty starts a CPU hog that is busy for busy, then sleeps for idle, over
// and over: a neighbour that comes and goes, as a batch job does. It runs
// under prefix as Busy does, as `perl` (perl-base, in every Debian), so
// that it is named apart from Busy's `sh`; busy is CPU time, counted in
// clock ticks (10 ms).
func Duty(t testing.TB, busy, idle time.Duration, prefix ...string) *exec.Cmd {
	t.Helper()
	script := fmt.Sprintf(`while (1) { my ($u, $s) = times; 1 while (times)[0] + (times)[1] < $u + $s + %g; select(undef, undef, undef, %g) }`,
		busy.Seconds(), idle.Seconds())
	return start(t, prefix, "perl", "-e", script)
}

// Pinned is the prefix that pins a process to one CPU, at a raised
// priority when running as root, so that the rest of a busy machine does
// not drown the interference a test makes on purpose.
func Pinned(cpu int) []string {
	pin := []string{"taskset", "-c", strconv.Itoa(cpu)}
	if os.Geteuid() == 0 {
		pin = append([]string{"nice", "-n", "-10"}, pin...)
	}
	return pin
}

// QuotaCgroup makes a cgroup with a CFS quota of quotaUS per periodUS under
// the v1 cpu controller, or under the v2 root on a unified layout, and
// removes it when the test ends. The cgroup gets a high weight, so that on a
// busy machine it still gets its quota early in each period and runs into
// the limit. What the machine does not allow ends the test with
// testservice.Unable; any other failure fails it.
func QuotaCgroup(t testing.TB, root string, quotaUS, periodUS int) string {
	t.Helper()
	dir, remove, err := MakeQuota(root, quotaUS, periodUS)
	if err != nil {
		end(t, err)
	}
	t.Cleanup(func() {
		// The processes in it are killed by cleanups registered after this
		// one (last in, first out), but the kernel may take a moment to
		// empty the cgroup.
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// MakeQuota makes the cgroup of QuotaCgroup for code that is not a test
// (bench/verdict-matrix), and returns the function that removes it, once
// its processes have left or exited (it waits up to 5 s for the kernel to
// empty it). What the machine does not allow is an error wrapping
// ErrNotAllowed; any other is a fault.
func MakeQuota(root string, quotaUS, periodUS int) (dir string, remove func() error, err error) {
	name := fmt.Sprintf("tare-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	mount, version, err := cpuCgroups(root, os.Geteuid())
	if err != nil {
		return "", nil, err
	}
	files := quotaFiles(version, quotaUS, periodUS)
	dir = filepath.Join(mount, name)
	if err := mkdir(dir); err != nil {
		return "", nil, err
	}
	remove = func() error { return removeCgroup(dir) }
	if err := setQuota(dir, files); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}

// quotaFiles are the files that set a quota of quotaUS per periodUS, and
// a high weight, in a cgroup of the given version.
func quotaFiles(version string, quotaUS, periodUS int) map[string]string {
	if version == "v1" {
		return map[string]string{"cpu.cfs_period_us": strconv.Itoa(periodUS), "cpu.cfs_quota_us": strconv.Itoa(quotaUS), "cpu.shares": "10240"}
	}
	return map[string]string{"cpu.max": fmt.Sprintf("%d %d", quotaUS, periodUS), "cpu.weight": "1000"}
}

// setQuota writes files into the cgroup at dir, period before quota: v1
// refuses a quota above the current period.
func setQuota(dir string, files map[string]string) error {
	for _, f := range []string{"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares", "cpu.max", "cpu.weight"} {
		v, ok := files[f]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
			return fmt.Errorf("cannot set %s of cgroup %s: %w", f, dir, err)
		}
	}
	return nil
}

// removeCgroup removes the cgroup at dir once its processes have left or
// exited: it waits up to 5 s for the kernel to empty it.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || os.IsNotExist(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NamedCgroup makes the cgroup at path rel, like
// "tare-test-1/system.slice/docker-<id>.scope", under the v1 cpu
// controller's mount or the v2 root (where QuotaCgroup makes its own),
// with the parents it needs, and removes every cgroup it made, deepest
// first, when the test ends. With quotaUS > 0, the cgroup gets a CFS
// quota of quotaUS per periodUS, as QuotaCgroup's. What the machine does
// not allow ends the test with testservice.Unable; any other failure
// fails it.
func NamedCgroup(t testing.TB, root, rel string, quotaUS, periodUS int) string {
	t.Helper()
	mount, version, err := cpuCgroups(root, os.Geteuid())
	if err != nil {
		end(t, err)
	}
	var made []string
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := removeCgroup(made[i]); err != nil {
				t.Error(err)
			}
		}
	})
	dir := mount
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		dir = filepath.Join(dir, part)
		if err := mkdir(dir); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			end(t, err)
		}
		made = append(made, dir)
	}
	// Each cgroup made gets a high weight, as QuotaCgroup's does: a new
	// cgroup weighs as one process against each process of its parent, so
	// that, without it, hogs in it would get little of a busy machine. On
	// v2 a cgroup has the cpu controller's files only when its parent
	// hands the controller down to it.
	for i, d := range made {
		if version == "v2" && i < len(made)-1 {
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil && quotaUS > 0 {
				t.Fatalf("enable the cpu controller in %s: %v", d, err)
			}
		}
		weight := map[string]string{"v1": "cpu.shares", "v2": "cpu.weight"}[version]
		_ = os.WriteFile(filepath.Join(d, weight), []byte(map[string]string{"v1": "10240", "v2": "1000"}[version]), 0)
	}
	if quotaUS > 0 {
		if err := setQuota(dir, quotaFiles(version, quotaUS, periodUS)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Join moves a process into the cgroup at dir.
func Join(t testing.TB, dir string, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("move pid %d into %s: %v", pid, dir, err)
	}
}

// ErrNotAllowed is wrapped by the errors about what this machine does not
// allow: not root, no cgroup cpu controller, a read-only cgroup
// filesystem (a container's). A test skips for it, saying why (under CI,
// which has them all, it fails); any other error making a cgroup is a
// fault.
var ErrNotAllowed = errors.New("this machine does not allow it")

// end ends the test on err, an error making a cgroup: Unable for what
// this machine does not allow, a failure for anything else.
func end(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotAllowed) {
		testservice.Unable(t, "%v", err)
	}
	t.Fatal(err)
}

// cpuCgroups is where cgroups with the cpu controller are made under
// root, for a process of user euid: the v1 cpu controller's mount when
// there is one, else the v2 unified root, when its children get the cpu
// controller. It says why, wrapping ErrNotAllowed, when they cannot be
// made there.
func cpuCgroups(root string, euid int) (dir, version string, err error) {
	if euid != 0 {
		return "", "", fmt.Errorf("%w: making a cgroup under %s needs root", ErrNotAllowed, root)
	}
	for _, m := range []string{"cpu,cpuacct", "cpuacct,cpu", "cpu"} {
		if fi, err := os.Stat(filepath.Join(root, m)); err == nil && fi.IsDir() {
			return filepath.Join(root, m), "v1", nil
		}
	}
	// On v2 a child of the root has cpu.max only when the root hands the
	// controller down (systemd does, at boot).
	subtree, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	if err != nil {
		return "", "", fmt.Errorf("%w: no cgroup cpu controller under %s (neither a v1 cpu mount nor a v2 root): %w", ErrNotAllowed, root, err)
	}
	if !slices.Contains(strings.Fields(string(subtree)), "cpu") {
		return "", "", fmt.Errorf("%w: the cgroup v2 root %s does not hand the cpu controller to its children (its cgroup.subtree_control is %q; as root: echo +cpu > %s)",
			ErrNotAllowed, root, strings.TrimSpace(string(subtree)), filepath.Join(root, "cgroup.subtree_control"))
	}
	return root, "v2", nil
}

// mkdir makes the cgroup at dir. A read-only cgroup filesystem is not
// allowed; any other error (but one that says it exists) is a fault.
func mkdir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: make cgroup %s: %w", ErrNotAllowed, dir, err)
	}
	return fmt.Errorf("make cgroup %s: %w", dir, err)
}
