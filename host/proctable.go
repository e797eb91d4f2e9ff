package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// procTable reads the CPU time of every process under procRoot at one
// instant. It keeps each process's stat file open between readings, so a
// reading costs one pread per process plus one listing of procRoot, and it
// reuses its buffers (and the Comm strings of processes it already knows).
//
// Why keep the files open: opening and closing /proc/<pid>/stat (a path
// walk, a pid lookup, a new file) adds about half again to each read on
// the development VM, and the ledger reads every process every tick, on
// CPU it books to tare itself. A held file stays bound to the
// process it was opened for, not to the pid: once that process is gone
// (reaped), pread fails with ESRCH even if the pid has been given to a new
// process, so a held file never silently describes someone else. Start is
// checked all the same, which also covers trees that are not procfs (test
// fixtures, where a file rewritten in place takes the new content).
//
// Cost, measured on the 2-vCPU development VM while other builds ran
// (BenchmarkProcTable*): a steady reading of a 500-process fixture tree
// takes 0.76–1.0 ms, 0.08–0.10 % of a core at 1 s ticks, with no
// allocation; of the real /proc, ~5.5 µs per process, nearly all of it the
// kernel formatting the line, so a 500-process host would cost about
// 2.8 ms (0.3 %). The first reading opens every file: 3–4 ms and ~4
// allocations per process for the fixture.
//
// Beside each process's stat, it reads its io file (parseIO), the bytes it
// read from and wrote to storage, held open the same way, every reading:
// even a process skipped as idle (below), because a process can keep a
// disk busy on almost no CPU (O_DIRECT, fsync), and the tick it did so in
// is what the verdict needs. That adds ~2 µs per process on the
// development VM (half a stat read; BenchmarkProcTableLive): about 1 ms
// per tick on a 500-process host, 0.1 % of a core at 1 s ticks. Kernel
// threads' io files are not read, and one that cannot be opened (another
// user's process when tare is not root, a fixture without one) is not
// tried again for the same process.
//
// The table holds raw descriptors, not *os.File: no finalizer, no poller,
// no per-file allocation. The price is that close must be called. It is not
// safe for concurrent use: one sampler goroutine owns it.
type procTable struct {
	root    string // "/proc", or a fixture tree laid out the same
	dirFD   int    // procRoot, held open and rewound for each listing; -1 until the first reading
	maxHeld int    // at most this many stat and io files held open; processes beyond it are opened per reading
	held    int    // stat and io files held open now
	gen     uint64 // counts readings, to find the entries a listing no longer names
	procs   map[int]*procEntry
	pids    []int        // the pids of the last listing, reused
	parents map[int]bool // the pids that had children at the last reading, rebuilt at each
	dents   []byte       // getdents64 buffer, reused
	buf     []byte       // stat line buffer, reused
	path    []byte       // path building buffer for opens, reused
}

// procEntry is what procTable remembers of one process between readings.
type procEntry struct {
	last  procStat // what the last read said
	idle  int      // readings in a row that found its CPU time unchanged
	fd    int      // its stat file, or -1 when not held open
	start uint64   // starttime the fd was opened for: a change means another process
	ioFD  int      // its io file, or -1 when not held open; bound to the process it was opened for
	comm  string   // last command name as stat gives it, reused while it does not change
	name  string   // the whole name: comm, or what fullName found when the kernel cut it
	named uint64   // starttime of the process name was found for: a pid reused is named anew
	gen   uint64   // the reading that last listed it: older entries are gone
	// noIO says the io file of the process that started at noIOStart
	// could not be read: it is not tried again for that process.
	noIO      bool
	noIOStart uint64
}

// A process idle for idleAfter readings is read every idleEvery readings.
const (
	idleAfter = 3
	idleEvery = 8
)

// defaultMaxHeld caps the stat files a procTable keeps open. 4096 covers
// any host a load generator sensibly runs on, and is a small part of the
// descriptor limit Go raises to at start-up (the hard limit, often 2^20),
// which tare's own sockets need far more of.
const defaultMaxHeld = 4096

// newProcTable returns a table reading the processes under procRoot
// ("/proc", or a fixture tree with the same layout). It opens nothing until
// the first reading. It holds at most defaultMaxHeld files, and never more
// than a quarter of the descriptor limit, so that the load it runs beside
// cannot run out of descriptors because of it.
func newProcTable(procRoot string) *procTable {
	maxHeld := defaultMaxHeld
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/4 < uint64(maxHeld) {
		maxHeld = int(lim.Cur / 4)
	}

	return &procTable{
		root:    procRoot,
		dirFD:   -1,
		maxHeld: maxHeld,
		procs:   map[int]*procEntry{},
		parents: map[int]bool{},
		dents:   make([]byte, 32<<10),
		buf:     make([]byte, 1024),
	}
}

// onProcfs reports whether root is a procfs mount. Only procfs regenerates
// a file at each read of a held descriptor: a fixture tree replaced
// between readings must be opened anew.
func onProcfs(root string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(root, &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC
}

// read lists procRoot's numeric entries and fills dst (cleared first) with
// pid → procStat. A process that vanished between listing and reading, or
// whose stat cannot be read or parsed, is left out: never an error. It
// returns an error only when procRoot itself cannot be listed.
//
// The listing and the reads are not one atomic snapshot: a reading of a
// few hundred processes spans about a millisecond, and a process born
// after the listing is seen at the next reading. The ledger books what
// falls between to unattributed time. Only thread-group leaders are
// listed (/proc hides thread ids from its listing), and each one's stat
// already sums its threads.
//
// A process that has not run for idleAfter readings is read only every
// idleEvery readings, and otherwise given as it was (no CPU since): most of
// a host's processes sleep, and reading their stat files is most of the
// cost. What such a process uses when it wakes is counted at its next
// reading, at most idleEvery ticks later, and is unattributed until then;
// the processes in keep (the system under test's, tare's), kernel threads
// and new processes are read every time, so no owner's time moves to
// another but a neighbour's between two kinds of neighbour. So are the
// processes that had children: the CPU of a child that exits lands in its
// parent's reaped time, and the ledger takes out what it had already
// counted of the child in the same tick.
func (t *procTable) read(dst map[int]procStat, keep map[int]bool) error {
	clear(dst)
	if err := t.list(); err != nil {
		return err
	}
	clear(t.parents)
	for _, e := range t.procs {
		t.parents[e.last.PPID] = true
	}
	t.gen++
	for _, pid := range t.pids {
		e := t.procs[pid]
		if e == nil {
			e = &procEntry{fd: -1, ioFD: -1}
			t.procs[pid] = e
		}
		e.gen = t.gen
		if e.idle >= idleAfter && !e.last.KThread && !keep[pid] && !t.parents[pid] && (t.gen+uint64(pid))%idleEvery != 0 {
			s := e.last
			// Only through a held file: a pid opened anew may be
			// another process by now, whose stat was not read.
			s.IO, s.HasIO = 0, false
			if e.ioFD >= 0 {
				s.IO, s.HasIO = t.readIO(e)
			}
			dst[pid] = s
			continue
		}
		s, ok := t.readProc(pid, e)
		if !ok {
			continue
		}
		if !s.KThread {
			s.IO, s.HasIO = t.readProcIO(pid, s.Start, e)
		}
		if s.Ticks == e.last.Ticks && s.Reaped == e.last.Reaped && s.Start == e.last.Start {
			e.idle++
		} else {
			e.idle = 0
		}
		e.last = s
		dst[pid] = s
	}
	for pid, e := range t.procs {
		if e.gen != t.gen {
			t.drop(e)
			delete(t.procs, pid)
		}
	}
	return nil
}

// readProc reads the stat of one listed process: through its held file if
// there is one, else (or when that file has gone stale) by opening it, and
// keeps the new file open while the table is under its cap.
func (t *procTable) readProc(pid int, e *procEntry) (procStat, bool) {
	if e.fd >= 0 {
		s, ok := t.readFD(e.fd, pid, e)
		if ok && s.Start == e.start {
			return s, true
		}
		// exited (ESRCH), unreadable, or the pid now names another
		// process: forget the file and look the pid up afresh
		t.drop(e)
	}
	fd, err := t.open(pid, "/stat")
	if err != nil {
		return procStat{}, false
	}
	s, ok := t.readFD(fd, pid, e)
	if !ok || t.held >= t.maxHeld {
		unix.Close(fd)
		return s, ok
	}
	e.fd, e.start = fd, s.Start
	t.held++
	return s, true
}

// readProcIO reads the io file of a process whose stat was just read:
// through its held file if there is one, else by opening it, kept open
// while the table is under its cap. A file that cannot be opened or read
// is not tried again for the same process (start is its starttime).
func (t *procTable) readProcIO(pid int, start uint64, e *procEntry) (uint64, bool) {
	if e.ioFD >= 0 {
		if io, ok := t.readIO(e); ok {
			return io, true
		}
	}
	if e.noIO && e.noIOStart == start {
		return 0, false
	}
	fd, err := t.open(pid, "/io")
	if err != nil {
		e.noIO, e.noIOStart = true, start
		return 0, false
	}
	e.ioFD = fd
	t.held++
	io, ok := t.readIO(e) // closes the file when it fails
	if !ok {
		e.noIO, e.noIOStart = true, start
	} else if t.held > t.maxHeld {
		t.dropIO(e)
	}
	return io, ok
}

// readIO preads e's held io file and parses it; a file that fails (the
// process is gone) is closed.
func (t *procTable) readIO(e *procEntry) (uint64, bool) {
	n, err := unix.Pread(e.ioFD, t.buf, 0)
	if err == nil {
		if io, err := parseIO(t.buf[:n]); err == nil {
			return io, true
		}
	}
	t.dropIO(e)
	return 0, false
}

// readFD preads a whole stat file from offset 0 and parses it, taking Comm
// from e when the name has not changed. A stat line is a few hundred bytes;
// the buffer grows for a longer one, up to a bound no real line reaches.
//
// A comm of commLen bytes may have been cut by the kernel: the whole name
// is read once (fullName: the process's cmdline, or its executable), when
// the process is first seen or its comm changes (an exec), so a steady
// reading reads nothing more.
func (t *procTable) readFD(fd, pid int, e *procEntry) (procStat, bool) {
	var n int
	for {
		var err error
		n, err = unix.Pread(fd, t.buf, 0)
		if err != nil {
			return procStat{}, false
		}
		if n < len(t.buf) {
			break
		}
		if len(t.buf) >= 64<<10 {
			return procStat{}, false
		}
		t.buf = make([]byte, 2*len(t.buf))
	}
	var s procStat
	comm, err := parseStat(t.buf[:n], statStartTime, &s)
	if err != nil || s.PID != pid {
		return procStat{}, false
	}
	if string(comm) != e.comm || s.Start != e.named { // compares without converting
		if string(comm) != e.comm {
			e.comm = string(comm)
		}
		e.name, e.named = e.comm, s.Start
		if !s.KThread {
			e.name = fullName(t.root, pid, e.comm)
		}
	}
	s.Comm = e.name
	return s, true
}

// open opens procRoot/<pid><file> ("/stat", "/io") read-only and
// close-on-exec, so the workers and models tare starts do not inherit
// hundreds of descriptors.
func (t *procTable) open(pid int, file string) (int, error) {
	t.path = append(t.path[:0], t.root...)
	t.path = append(t.path, '/')
	t.path = strconv.AppendInt(t.path, int64(pid), 10)
	t.path = append(t.path, file...)
	for {
		fd, err := unix.Open(string(t.path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// drop closes e's held files, if any: the pid may name another process
// from now on.
func (t *procTable) drop(e *procEntry) {
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
		t.held--
	}
	t.dropIO(e)
}

// dropIO closes e's held io file, if any.
func (t *procTable) dropIO(e *procEntry) {
	if e.ioFD >= 0 {
		unix.Close(e.ioFD)
		e.ioFD = -1
		t.held--
	}
}

// list fills t.pids with the numeric entries of procRoot. It rewinds a
// directory descriptor held open across readings and decodes getdents64
// records in place, allocating nothing. BenchmarkListProc on the 2-vCPU
// development VM: the same time as Readdirnames on a held *os.File for the
// live /proc (~75 µs, 90 processes; the kernel's work dominates), 20 %
// less for a 500-entry ext4 directory (~190 µs against ~240 µs), and none
// of Readdirnames' string per entry (250 allocations, 8 KB, per reading of
// /proc); opening the directory anew each time costs ~1.7 times as much.
func (t *procTable) list() error {
	if err := t.listOnce(); err == nil || t.maxHeld > 0 {
		return err
	}
	// Holding nothing (a tree that is not procfs, see onProcfs), it may
	// have been replaced under the held directory.
	return t.listOnce()
}

func (t *procTable) listOnce() error {
	if t.dirFD < 0 {
		fd, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("list processes under %s: %w", t.root, err)
		}
		t.dirFD = fd
	} else if _, err := unix.Seek(t.dirFD, 0, 0); err != nil {
		t.closeDir()
		return fmt.Errorf("list processes under %s: %w", t.root, err)
	}
	t.pids = t.pids[:0]
	for {
		n, err := unix.Getdents(t.dirFD, t.dents)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.closeDir()
			return fmt.Errorf("list processes under %s: %w", t.root, err)
		}
		if n == 0 {
			return nil
		}
		t.pids = appendDirentPIDs(t.pids, t.dents[:n])
	}
}

// appendDirentPIDs appends to pids the names of the getdents64 records in
// b that are pids: all digits, in range. Each record is
//
//	d_ino u64 | d_off s64 | d_reclen u16 | d_type u8 | d_name, NUL-terminated, padded
//
// in the machine's byte order (getdents(2)). A short or malformed record
// ends the buffer rather than being read past.
func appendDirentPIDs(pids []int, b []byte) []int { return appendDirentNumbers(pids, b, 1) }

// appendDirentNumbers appends the names of the records of b that are
// numbers from least to maxPID: pids (from 1) or descriptors (from 0).
func appendDirentNumbers(pids []int, b []byte, least uint64) []int {
	const nameOff = 19 // offset of d_name
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			break
		}
		name := b[nameOff:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if pid, ok := parseDec(name); ok && pid >= least && pid <= maxPID {
			pids = append(pids, int(pid))
		}
		b = b[reclen:]
	}
	return pids
}

// closeDir closes the held procRoot descriptor, so the next reading opens
// it again: after an error the directory may have been replaced.
func (t *procTable) closeDir() {
	if t.dirFD >= 0 {
		unix.Close(t.dirFD)
		t.dirFD = -1
	}
}

// close closes the files it holds open.
func (t *procTable) close() {
	for pid, e := range t.procs {
		t.drop(e)
		delete(t.procs, pid)
	}
	t.closeDir()
}
