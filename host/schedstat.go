package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// parseSchedstat returns the run delay of a /proc/<pid>/task/<tid>/schedstat
// file: its second field, the nanoseconds the task spent runnable on a run
// queue, waiting for a CPU (https://docs.kernel.org/scheduler/sched-stats.html).
// The line is "<time on cpu ns> <run delay ns> <timeslices>".
func parseSchedstat(b []byte) (uint64, error) {
	f := bytes.Fields(b)
	if len(f) != 3 {
		return 0, fmt.Errorf("%w: schedstat %q: want 3 fields, have %d", ErrParse, b, len(f))
	}
	for _, x := range []int{0, 2} {
		if _, err := strconv.ParseUint(string(f[x]), 10, 64); err != nil {
			return 0, fmt.Errorf("%w: schedstat %q: %w", ErrParse, b, err)
		}
	}
	v, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: schedstat %q: %w", ErrParse, b, err)
	}
	return v, nil
}

// runDelayDelta is the run delay the tasks accrued between two readings a
// tick apart, each a map from thread id to its cumulative run delay in ns.
// Threads come and go between readings, so the delta is kept per thread:
//
//	in both, counter grew      its growth
//	only in cur (new thread)   its whole counter, at most one tick: it
//	                           started after prev, so it cannot have waited
//	                           longer (the bound guards against a process
//	                           found late, e.g. a missed descendant)
//	in both, counter shrank    the same: the tid was reused by a new thread
//	only in prev (exited)      nothing: its last wait is lost, and must not
//	                           make the sum go backwards
func runDelayDelta(prev, cur map[int]uint64, tick time.Duration) uint64 {
	var d uint64
	for tid, c := range cur {
		if p, ok := prev[tid]; ok && c >= p {
			d += c - p
		} else {
			d += min(c, uint64(max(tick, 0)))
		}
	}
	return d
}

// runDelayShare is the run delay as percent of the tick. It is not capped:
// with several threads waiting at once it exceeds 100 (300 % means on
// average three threads were runnable and not running). The kernel adds a
// wait to the counter when the thread gets the CPU, so a long wait lands in
// the tick where it ended: per tick the figure is lumpy (even above 100 %
// for one thread, after a tick at 0), over several ticks it is exact.
func runDelayShare(delta uint64, tick time.Duration) *float64 {
	if tick <= 0 {
		return nil
	}
	return ptr(float64(delta) * 100 / float64(tick))
}

// runDelayByNode is runDelayDelta per node of the system under test's
// graph, each thread counted in the node its process was in at cur.
func runDelayByNode(prev, cur *reading, nodes int, tick time.Duration) []uint64 {
	out := make([]uint64, nodes)
	for tid, c := range cur.SUT {
		i, ok := cur.SUTNode[tid]
		if !ok || i < 0 || i >= nodes {
			continue
		}
		if p, ok := prev.SUT[tid]; ok && c >= p {
			out[i] += c - p
		} else {
			out[i] += min(c, uint64(max(tick, 0)))
		}
	}
	return out
}

// taskReader reads the run delay of every thread of a set of processes,
// reusing its buffer between ticks so a reading allocates little.
type taskReader struct {
	procRoot string
	buf      []byte
	owner    map[int]int // thread id → its process, at the last reading
}

func newTaskReader(procRoot string) *taskReader {
	return &taskReader{procRoot: procRoot, buf: make([]byte, 512), owner: map[int]int{}}
}

// read fills dst (tid → run delay ns) with the threads of pids and reports
// how many of the processes still exist. Threads and processes that exit
// while being read are skipped: that is the normal life of a process, not
// an error.
func (r *taskReader) read(pids []int, dst map[int]uint64) (alive int, err error) {
	clear(dst)
	clear(r.owner)
	for _, pid := range pids {
		ok, err := r.readProc(pid, dst)
		if err != nil {
			return 0, err
		}
		if ok {
			alive++
		}
	}
	return alive, nil
}

// readProc reads the schedstat of each thread of pid into dst.
func (r *taskReader) readProc(pid int, dst map[int]uint64) (bool, error) {
	taskDir := filepath.Join(r.procRoot, strconv.Itoa(pid), "task")
	d, err := os.Open(taskDir)
	if gone(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read threads of pid %d: %w", pid, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if gone(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read threads of pid %d: %w", pid, err)
	}
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := r.readFile(filepath.Join(taskDir, name, "schedstat"))
		if gone(err) {
			continue
		} else if err != nil {
			return false, err
		}
		delay, err := parseSchedstat(b)
		if err != nil {
			return false, fmt.Errorf("thread %d of pid %d: %w", tid, pid, err)
		}
		dst[tid] = delay
		r.owner[tid] = pid
	}
	return true, nil
}

// readFile reads a small /proc file into the reader's buffer, valid until
// the next call.
func (r *taskReader) readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := 0
	for {
		m, err := f.Read(r.buf[n:])
		n += m
		if errors.Is(err, io.EOF) || (err == nil && m == 0) {
			return r.buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
	}
}

// gone reports whether err means the process or thread no longer exists:
// its /proc directory vanished (ENOENT) or it became a zombie (ESRCH).
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
