package host

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/tare-dev/tare"
)

// maxIOBy is how many processes a tick's IOBy names at most.
const maxIOBy = 5

// parseIO returns read_bytes + write_bytes of a /proc/<pid>/io file
// (https://docs.kernel.org/filesystems/proc.html, "/proc/<pid>/io"): the
// bytes the process (its live threads, the ones that exited, and the
// children it reaped) caused to be read from or sent to the storage
// layer. rchar and wchar would count every read and write, sockets and
// the page cache included; cancelled_write_bytes (dirty pages truncated
// before writeback) is not taken off, as it may be charged to a process
// other than the writer.
//
//	rchar: 323934931
//	wchar: 323929600
//	syscr: 632687
//	syscw: 632675
//	read_bytes: 0
//	write_bytes: 323932160
//	cancelled_write_bytes: 0
//
// procfs has the same parser (Proc.IO), but it opens the file anew and
// scans with fmt at every call; the process table reads this file of
// every process every tick through a held descriptor, so this one
// allocates nothing unless the file is bad.
func parseIO(b []byte) (uint64, error) {
	var read, write uint64
	var hasRead, hasWrite bool
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) { // compares without converting
		case "read_bytes":
			dst, hasRead = &read, true
		case "write_bytes":
			dst, hasWrite = &write, true
		default:
			continue
		}
		v, ok := parseDec(bytes.TrimSpace(val))
		if !ok {
			return 0, fmt.Errorf("%w: io line %q: bad %s", ErrParse, line, key)
		}
		*dst = v
	}
	if !hasRead || !hasWrite {
		return 0, fmt.Errorf("%w: io: no read_bytes and write_bytes lines", ErrParse)
	}
	if read+write < read {
		return 0, fmt.Errorf("%w: io: read_bytes+write_bytes overflows", ErrParse)
	}
	return read + write, nil
}

// ioBy names the processes that read and wrote the most to storage
// between two process tables, the busiest first (then by pid), maxIOBy at
// most; nil when none did, or no process's io file could be read.
//
// A process's count includes the children it reaped (the kernel adds a
// reaped child's I/O to its parent's, as it does its CPU time), so what
// tare had already counted of a child gone in the tick is taken off its
// parent's, as the ledger does for CPU: the I/O of a short-lived child is
// its parent's, once. Kernel threads are left out: the pages they write
// back are charged to the process that dirtied them.
func ioBy(prev, cur map[int]procStat, prevUptime uint64) []tare.ProcessIO {
	var counted map[int]uint64
	for pid, q := range prev {
		if c, ok := cur[pid]; ok && c.Start == q.Start || !q.HasIO {
			continue
		}
		if counted == nil {
			counted = map[int]uint64{}
		}
		counted[q.PPID] += q.IO
	}
	var out []tare.ProcessIO
	for pid, p := range cur {
		if p.KThread {
			continue
		}
		if d := sub(ioDelta(p, prev, prevUptime), counted[pid]); d > 0 {
			out = append(out, tare.ProcessIO{Name: p.Comm, PID: pid, Bytes: int64(min(d, 1<<63-1))})
		}
	}
	slices.SortFunc(out, func(a, b tare.ProcessIO) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.PID, b.PID))
	})
	if len(out) > maxIOBy {
		out = slices.Clip(out[:maxIOBy])
	}
	return out
}

// ioDelta is the storage I/O of p since the previous table, in bytes, as
// procDelta counts CPU time: a counter that went backwards counts 0, a
// process that started in the tick counts all of its I/O, and one whose
// io file was not read at either table counts none.
func ioDelta(p procStat, prev map[int]procStat, prevUptime uint64) uint64 {
	if !p.HasIO {
		return 0
	}
	if q, ok := prev[p.PID]; ok && q.Start == p.Start {
		if !q.HasIO {
			return 0
		}
		return sub(p.IO, q.IO)
	}
	if p.Start >= prevUptime {
		return p.IO
	}
	return 0
}
