package host

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readTable is one reading of pt into a fresh map, failing the test on error.
func readTable(t *testing.T, pt *procTable) map[int]procStat {
	t.Helper()
	dst := map[int]procStat{-1: {}} // read must clear what was there
	if err := pt.read(dst, nil); err != nil {
		t.Fatalf("read: %v", err)
	}
	return dst
}

// TestProcTable follows a fixture procRoot through three readings, with
// stat lines captured on the development VM:
//
//	t0: 1 init, 2 kthreadd, 12 kworker, 1092 bash, 13258 a zombie python3,
//	    and entries that are not processes (self, net, stat)
//	t1: bash has run 40 more ticks; the zombie was reaped (its directory
//	    is gone); 13259 has started; 12's pid was reused by a new process
//	    (rewritten in place: same file, another starttime and name)
//	t2: unchanged: every file is still held open, and the names are reused
func TestProcTable(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"1/stat":     statInit,
		"2/stat":     statKthreadd,
		"12/stat":    statKworker,
		"1092/stat":  statBash,
		"13258/stat": statZombie,
		"self/stat":  statBash, // /proc/self is a link to the reader: not a pid of its own
		"net/tcp":    "",
		"stat":       "cpu  1 2 3 4\n",
	})
	pt := newProcTable(root)
	defer pt.close()

	got := readTable(t, pt)
	want := map[int]procStat{
		1:     {PID: 1, Comm: "process_api", Ticks: 301, Reaped: 7152, Start: 31},
		2:     {PID: 2, Comm: "kthreadd", KThread: true, Start: 31},
		12:    {PID: 12, Comm: "kworker/u8:0-events_unbound", PPID: 2, KThread: true, Ticks: 39, Start: 31},
		1092:  {PID: 1092, Comm: "bash", PPID: 1091, Ticks: 13, Reaped: 21232, Start: 4964},
		13258: {PID: 13258, Comm: "python3", PPID: 13217, Ticks: 9, Start: 42481},
	}
	checkTable(t, "t0", pt, got, want, 5)

	writeStat(t, root, procStat{PID: 1092, Comm: "bash", PPID: 1091, Ticks: 53, Start: 4964})
	if err := os.RemoveAll(filepath.Join(root, "13258")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"13259/stat": statParenComm})
	writeStat(t, root, procStat{PID: 12, Comm: "nginx", PPID: 1, Ticks: 2, Start: 50210})
	got = readTable(t, pt)
	want[1092] = procStat{PID: 1092, Comm: "bash", PPID: 1091, Ticks: 53, Start: 4964}
	delete(want, 13258)
	want[13259] = procStat{PID: 13259, Comm: "a) b", PPID: 13215, Ticks: 7, Reaped: 6, Start: 42533}
	want[12] = procStat{PID: 12, Comm: "nginx", PPID: 1, Ticks: 2, Start: 50210}
	checkTable(t, "t1", pt, got, want, 5)
	if e := pt.procs[12]; e == nil || e.start != 50210 || e.fd < 0 {
		t.Errorf("t1: reused pid 12 is held as %+v, want a file opened for starttime 50210", e)
	}

	before := commData(got)
	got = readTable(t, pt)
	checkTable(t, "t2", pt, got, want, 5)
	if after := commData(got); !maps.Equal(before, after) {
		t.Errorf("t2: the names of known processes were allocated anew: %v, then %v", before, after)
	}
}

// checkTable compares one reading with what it should hold, and checks that
// the table holds exactly one open file per process it read.
func checkTable(t *testing.T, moment string, pt *procTable, got, want map[int]procStat, held int) {
	t.Helper()
	for pid, w := range want {
		if g, ok := got[pid]; !ok {
			t.Errorf("%s: pid %d missing", moment, pid)
		} else if g != w {
			t.Errorf("%s: pid %d is %+v, want %+v", moment, pid, g, w)
		}
	}
	for pid := range got {
		if _, ok := want[pid]; !ok {
			t.Errorf("%s: unexpected pid %d: %+v", moment, pid, got[pid])
		}
	}
	if pt.held != held || len(pt.procs) != len(want) {
		t.Errorf("%s: %d files held for %d known processes, want %d for %d", moment, pt.held, len(pt.procs), held, len(want))
	}
	if n := countOpen(pt); n != pt.held {
		t.Errorf("%s: %d entries hold a file, the table counts %d", moment, n, pt.held)
	}
}

// countOpen counts the files the entries of pt hold open: stat and io.
func countOpen(pt *procTable) int {
	n := 0
	for _, e := range pt.procs {
		if e.fd >= 0 {
			n++
		}
		if e.ioFD >= 0 {
			n++
		}
	}
	return n
}

// commData maps each pid to the address of its Comm's bytes, to tell a
// reused string from an equal new one.
func commData(m map[int]procStat) map[int]*byte {
	out := map[int]*byte{}
	for pid, s := range m {
		if s.Comm != "" {
			out[pid] = unsafe.StringData(s.Comm)
		}
	}
	return out
}

// TestProcTableSkips: a process whose stat cannot be read or parsed is left
// out of the reading, and the others are still read.
func TestProcTableSkips(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"1092/stat":     statBash,
		"500/stat":      "garbage\n",                                      // not a stat line
		"501/stat":      statTruncated,                                    // cut before starttime
		"502/stat":      statBash,                                         // says pid 1092: not the process listed
		"503/stat/x":    "",                                               // a directory: read fails with EISDIR
		"504/status":    "Name:\tbash\n",                                  // no stat file: the process exited mid-listing
		"505/stat":      "",                                               // empty
		"0000/stat":     statBash,                                         // not a pid
		"-7/stat":       statBash,                                         // not a pid
		"99999999/stat": strings.Replace(statBash, "1092", "99999999", 1), // beyond PID_MAX_LIMIT
	})
	pt := newProcTable(root)
	defer pt.close()
	for _, moment := range []string{"first", "second"} {
		got := readTable(t, pt)
		if len(got) != 1 || got[1092].Comm != "bash" {
			t.Errorf("%s reading: %v, want only pid 1092", moment, got)
		}
		if pt.held != 1 {
			t.Errorf("%s reading: %d files held, want 1", moment, pt.held)
		}
	}
}

// TestProcTableCap: beyond maxHeld held files, the other processes are
// still read every time, by opening and closing their files.
func TestProcTableCap(t *testing.T) {
	root := writeProcTree(t, t.TempDir(), 7)
	pt := newProcTable(root)
	defer pt.close()
	pt.maxHeld = 3
	for i, ticks := range []uint64{0, 100, 250} {
		if i > 0 {
			for pid := 1000; pid < 1007; pid++ {
				writeStat(t, root, procStat{PID: pid, Comm: "worker", PPID: 1, Ticks: ticks, Start: uint64(3000 + pid)})
			}
		}
		got := readTable(t, pt)
		if len(got) != 7 {
			t.Fatalf("reading %d: %d processes, want 7", i, len(got))
		}
		if pt.held != 3 || countOpen(pt) != 3 {
			t.Errorf("reading %d: %d files held (%d counted), want 3", i, countOpen(pt), pt.held)
		}
		if i > 0 {
			for pid, s := range got {
				if s.Ticks != ticks {
					t.Errorf("reading %d: pid %d has %d ticks, want %d", i, pid, s.Ticks, ticks)
				}
			}
		}
	}
}

// TestProcTableAllocs: a steady reading allocates nothing, which is what
// lets it run every tick beside the load without feeding the collector.
func TestProcTableAllocs(t *testing.T) {
	pt := newProcTable(writeProcTree(t, t.TempDir(), 50))
	defer pt.close()
	dst := map[int]procStat{}
	if err := pt.read(dst, nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = pt.read(dst, nil) }); n != 0 {
		t.Errorf("a reading of 50 known processes allocates %v times, want 0", n)
	}
}

// TestProcTableRootErrors: a procRoot that cannot be listed is the one
// error of a reading, and the table recovers when it is back.
func TestProcTableRootErrors(t *testing.T) {
	pt := newProcTable(filepath.Join(t.TempDir(), "missing"))
	defer pt.close()
	if err := pt.read(map[int]procStat{}, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read of a missing procRoot: %v, want ErrNotExist", err)
	}

	root := writeProcTree(t, t.TempDir(), 3)
	pt2 := newProcTable(root)
	defer pt2.close()
	readTable(t, pt2)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	dst := map[int]procStat{1000: {}}
	if err := pt2.read(dst, nil); err == nil || len(dst) != 0 {
		t.Errorf("read of a removed procRoot: %v, %v; want an error and nothing read", dst, err)
	}
	// it recovers when the root comes back
	writeProcTree(t, root, 2)
	if got := readTable(t, pt2); len(got) != 2 {
		t.Errorf("after procRoot came back: %d processes, want 2", len(got))
	}
}

// TestProcTableClose: close gives back every descriptor the table opened.
func TestProcTableClose(t *testing.T) {
	open := func() int {
		t.Helper()
		names, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("cannot count open files: %v", err)
		}
		return len(names)
	}
	base := open()
	pt := newProcTable(writeProcTree(t, t.TempDir(), 20))
	readTable(t, pt)
	if n := open(); n < base+21 {
		t.Errorf("%d files open while reading 20 processes, want at least %d", n, base+21)
	}
	pt.close()
	if n := open(); n != base {
		t.Errorf("%d files open after close, want %d", n, base)
	}
}

// TestProcTableLive reads the real /proc: it must find this test process,
// with its name and the CPU it has used, and the kernel's thread creator.
func TestProcTableLive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	pt := newProcTable("/proc")
	defer pt.close()
	self := os.Getpid()
	wantComm := filepath.Base(os.Args[0])
	if len(wantComm) > 15 { // TASK_COMM_LEN - 1
		wantComm = wantComm[:15]
	}
	var got map[int]procStat
	// burn CPU until the kernel has charged this process a tick (10 ms at
	// USER_HZ 100), bounded in time
	for deadline := time.Now().Add(5 * time.Second); ; {
		got = readTable(t, pt)
		if got[self].Ticks > 0 || time.Now().After(deadline) {
			break
		}
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
	}
	s, ok := got[self]
	if !ok {
		t.Fatalf("pid %d (this test) not in a reading of %d processes", self, len(got))
	}
	if s.Comm != wantComm || s.PPID != os.Getppid() || s.KThread || s.Ticks == 0 || s.Start == 0 {
		t.Errorf("this test reads as %+v, want comm %q, ppid %d, not a kernel thread, ticks and start above 0", s, wantComm, os.Getppid())
	}
	withIO := 0
	for _, p := range got {
		if p.HasIO {
			withIO++
		}
	}
	if pt.held != len(got)+withIO || countOpen(pt) != pt.held {
		t.Errorf("%d files held (%d open) for %d processes, %d of them with I/O counters", pt.held, countOpen(pt), len(got), withIO)
	}
	if os.Geteuid() == 0 && !s.HasIO {
		t.Errorf("this test's io file not read as root: %+v", s)
	}

	again := readTable(t, pt)
	if a := again[self]; a.Start != s.Start || a.Ticks < s.Ticks {
		t.Errorf("this test read again as %+v, after %+v: want the same start and no fewer ticks", a, s)
	}

	if comm, err := os.ReadFile("/proc/2/comm"); err != nil || string(comm) != "kthreadd\n" {
		t.Logf("no kthreadd at pid 2 (%q, %v): a pid namespace hides the kernel threads", comm, err)
		return
	}
	if k, ok := again[2]; !ok || k.Comm != "kthreadd" || !k.KThread || k.PPID != 0 {
		t.Errorf("pid 2 reads as %+v (found: %v), want kthreadd, a kernel thread with ppid 0", k, ok)
	}
}

// TestProcTableLiveExit checks, on the real /proc, the kernel behaviour the
// table relies on: a held stat file of a process that has exited and been
// reaped fails with ESRCH; the table then forgets the process.
func TestProcTableLiveExit(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	pt := newProcTable("/proc")
	defer pt.close()
	if got := readTable(t, pt); got[pid].PID != pid || pt.procs[pid] == nil || pt.procs[pid].fd < 0 {
		t.Fatalf("child %d not read and held: %+v", pid, got[pid])
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := unix.Pread(fd, make([]byte, 512), 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("pread of the stat of a reaped process: %v, want ESRCH", err)
	}
	got := readTable(t, pt)
	if _, ok := got[pid]; ok {
		t.Errorf("reaped child %d still read: %+v", pid, got[pid])
	}
	if _, ok := pt.procs[pid]; ok {
		t.Errorf("reaped child %d still held", pid)
	}
	if pids := slices.Sorted(maps.Keys(got)); len(pids) == 0 {
		t.Errorf("nothing read after the child exited")
	}
}

// TestProcTableIdle: a process idle for idleAfter readings is read only
// every idleEvery readings, and given as it was in between; a process in
// keep, and a kernel thread, are read every time; what the idle one used
// while it was not read shows at its next reading.
func TestProcTableIdle(t *testing.T) {
	root := t.TempDir()
	bash := func(utime int) string { return strings.Replace(statBash, " 3 10 ", " "+strconv.Itoa(utime)+" 10 ", 1) }
	writeFiles(t, root, map[string]string{"1092/stat": bash(3), "2/stat": statKthreadd})
	// The same bash line under another pid, kept.
	writeFiles(t, root, map[string]string{"500/stat": strings.Replace(bash(3), "1092 (bash)", "500 (bash)", 1)})
	pt := newProcTable(root)
	defer pt.close()
	pt.maxHeld = 0 // every read opens the file: the test rewrites it
	keep := map[int]bool{500: true}
	reads := 0
	for i := range 2 * idleEvery {
		if i == idleAfter+1 {
			writeFiles(t, root, map[string]string{
				"1092/stat": bash(90),
				"500/stat":  strings.Replace(bash(90), "1092 (bash)", "500 (bash)", 1),
			})
		}
		dst := map[int]procStat{}
		if err := pt.read(dst, keep); err != nil {
			t.Fatal(err)
		}
		if dst[500].Ticks != 13 && i <= idleAfter || i > idleAfter && dst[500].Ticks != 100 {
			t.Fatalf("reading %d: kept process has %d ticks, want it read every time", i, dst[500].Ticks)
		}
		if _, ok := dst[2]; !ok {
			t.Fatalf("reading %d: kernel thread missing", i)
		}
		if dst[1092].Ticks == 100 && reads == 0 {
			reads = i
		}
		if _, ok := dst[1092]; !ok {
			t.Fatalf("reading %d: idle process missing: it must be given as it was", i)
		}
	}
	if reads == 0 || reads == idleAfter+1 {
		t.Errorf("the idle process's new CPU time showed at reading %d; want later than %d (skipped), within %d", reads, idleAfter+1, idleAfter+1+idleEvery)
	}
}
