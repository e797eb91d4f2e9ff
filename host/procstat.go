package host

import (
	"bytes"
	"fmt"
)

// procStat is what the whose-CPU ledger needs of one /proc/<pid>/stat line
// (proc(5), https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html):
// who the process is, and how much CPU its threads have used so far. Read
// through the thread-group leader's pid, utime and stime are the sum over
// all of the process's threads, the live ones and those that have exited.
type procStat struct {
	PID int
	// Comm is field 2 without the parentheses; it may hold spaces and ')'.
	// The process table gives the whole name where the kernel cut it at
	// commLen bytes (fullName).
	Comm    string
	PPID    int    // field 4
	KThread bool   // PF_KTHREAD (0x00200000) set in flags, field 9
	Ticks   uint64 // utime + stime (fields 14 and 15), in clock ticks
	// Reaped is cutime + cstime (fields 16 and 17): the CPU of its children
	// that exited and that it waited for, in clock ticks. It is how the
	// CPU of processes that came and went inside a tick is charged to the
	// parent that started them.
	Reaped uint64
	Start  uint64 // starttime (field 22), clock ticks after boot: tells a reused pid apart

	// IO is read_bytes + write_bytes of /proc/<pid>/io (parseIO), which
	// the process table reads beside the stat; HasIO is false where that
	// file could not be read (a kernel thread, another user's process
	// when tare is not root).
	IO    uint64
	HasIO bool
}

// pfKThread is the PF_KTHREAD bit of the flags field (include/linux/sched.h):
// the kernel's own threads, whose CPU the ledger books to the kernel rather
// than to a named process. It is part of the kernel ABI only by habit (ps and
// top test it too), which is why it is named here and not derived.
const pfKThread = 0x00200000

// The 1-based field numbers of a stat line that parseStat reads, as proc(5)
// numbers them. parseStat stops after the last one it is asked for, so a
// caller that needs only the parent does not require the rest of the line.
const (
	statPPID      = 4
	statFlags     = 9
	statUtime     = 14
	statStime     = 15
	statCutime    = 16
	statCstime    = 17
	statStartTime = 22
)

// parseProcStat parses a /proc/<pid>/stat line up to its starttime (field
// 22); the fields after it are ignored, so a kernel that appends fields
// does not break it. The command name is the one field the process
// controls: it may hold spaces, '(' and ')', so the fields after it are
// counted from the line's last ')'.
func parseProcStat(b []byte) (procStat, error) {
	var s procStat
	comm, err := parseStat(b, statStartTime, &s)
	if err != nil {
		return procStat{}, err
	}
	s.Comm = string(comm)
	return s, nil
}

// parseStat is the one parser of /proc/<pid>/stat lines. It fills s with
// the fields up to field last (one of the stat* constants) and returns the
// command name as a slice of b, leaving s.Comm empty: procTable compares
// that slice with the name it already holds, so a reading of a known
// process does not allocate a new string. It allocates nothing itself
// unless the line is bad.
//
//	pid (comm) state ppid pgrp session tty_nr tpgid flags minflt ... utime stime ... starttime ...
//	 1    2      3     4    5     6      7      8     9     10         14    15         22
func parseStat(b []byte, last int, s *procStat) (comm []byte, err error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return nil, fmt.Errorf("%w: stat %q: no command name in parentheses", ErrParse, b)
	}
	pid, ok := parseDec(bytes.TrimRight(b[:open], " "))
	if !ok || pid == 0 || pid > maxPID {
		return nil, fmt.Errorf("%w: stat %q: bad pid %q", ErrParse, b, b[:open])
	}
	rest := b[closing+1:]
	if len(rest) > 0 && !isFieldSpace(rest[0]) {
		return nil, fmt.Errorf("%w: stat %q: no space after the command name", ErrParse, b)
	}
	*s = procStat{PID: int(pid)}
	var utime, cutime uint64
	for n := 3; n <= last; n++ {
		var f []byte
		f, rest = nextField(rest)
		if f == nil {
			return nil, fmt.Errorf("%w: stat %q: %d fields, want at least %d", ErrParse, b, n-1, last)
		}
		switch n {
		case statPPID:
			v, ok := parseDec(f)
			if !ok || v > maxPID {
				return nil, fmt.Errorf("%w: stat %q: bad ppid %q", ErrParse, b, f)
			}
			s.PPID = int(v)
		case statFlags:
			v, ok := parseDec(f)
			if !ok || v > 1<<32-1 {
				return nil, fmt.Errorf("%w: stat %q: bad flags %q", ErrParse, b, f)
			}
			s.KThread = v&pfKThread != 0
		case statUtime:
			if utime, ok = parseDec(f); !ok {
				return nil, fmt.Errorf("%w: stat %q: bad utime %q", ErrParse, b, f)
			}
		case statStime:
			stime, ok := parseDec(f)
			if !ok {
				return nil, fmt.Errorf("%w: stat %q: bad stime %q", ErrParse, b, f)
			}
			if s.Ticks = utime + stime; s.Ticks < utime {
				return nil, fmt.Errorf("%w: stat %q: utime+stime overflows", ErrParse, b)
			}
		case statCutime:
			if cutime, ok = parseDec(f); !ok {
				return nil, fmt.Errorf("%w: stat %q: bad cutime %q", ErrParse, b, f)
			}
		case statCstime:
			cstime, ok := parseDec(f)
			if !ok {
				return nil, fmt.Errorf("%w: stat %q: bad cstime %q", ErrParse, b, f)
			}
			if s.Reaped = cutime + cstime; s.Reaped < cutime {
				return nil, fmt.Errorf("%w: stat %q: cutime+cstime overflows", ErrParse, b)
			}
		case statStartTime:
			if s.Start, ok = parseDec(f); !ok {
				return nil, fmt.Errorf("%w: stat %q: bad starttime %q", ErrParse, b, f)
			}
		}
	}
	return b[open+1 : closing], nil
}

// maxPID bounds the pids parseStat accepts: the kernel's PID_MAX_LIMIT on
// 64-bit machines (4 Mi). A larger figure is not a pid, and keeping pids in
// range makes them safe to use as an int anywhere.
const maxPID = 4 << 20

// nextField returns the first whitespace-separated field of b and what
// follows it, or nil when b holds no more fields. It is bytes.Fields one
// field at a time, so parsing a line does not allocate a slice of fields;
// the stat and net/tcp parsers share it.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isFieldSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isFieldSpace(b[j]) {
		j++
	}
	if i == j {
		return nil, nil
	}
	return b[i:j], b[j:]
}

// isFieldSpace reports whether c separates fields of a /proc line. The
// kernel writes spaces and a final newline; the other ASCII spaces are
// accepted as bytes.Fields would.
func isFieldSpace(c byte) bool {
	// one comparison for the digits and letters that make up most of a
	// line; then ' ', or '\t' '\n' '\v' '\f' '\r', which are 9 to 13
	return c <= ' ' && (c == ' ' || c-'\t' <= '\r'-'\t')
}

// parseDec parses an unsigned decimal number, reporting false for an empty
// field, a sign, any other byte or an overflow of uint64. strconv.ParseUint
// would do, but needs a string: this keeps a reading of every process on
// the machine free of conversions.
func parseDec(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
