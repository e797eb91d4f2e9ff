package host

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// commLen is the most bytes the kernel keeps of a command name
// (TASK_COMM_LEN, 16, less its NUL): a comm of exactly this length may
// have been cut, as nightly-compactor shows as nightly-compact.
const commLen = 15

// cmdlineRead is how much of /proc/<pid>/cmdline fullName reads: its first
// two arguments, not the megabytes of a long command line.
const cmdlineRead = 4096

// nameFromCmdline returns the whole command name of a process whose comm
// the kernel cut at commLen bytes, from its /proc/<pid>/cmdline (the
// arguments, each ended by a NUL; see proc_pid_cmdline(5)): the base name
// of argv[0], or of argv[1] for a script its #! interpreter runs (comm is
// then the script's name), when it starts with comm and is longer. A
// title a process wrote over its arguments ("nightly-compactor: merging")
// is cut at its first space and colon, as ps users read the name. ok is
// false when comm was not cut or no argument fits.
func nameFromCmdline(comm string, cmdline []byte) (name string, ok bool) {
	if len(comm) != commLen {
		return "", false
	}
	for range 2 {
		var arg []byte
		arg, cmdline, _ = bytes.Cut(cmdline, []byte{0})
		if name, ok := longerName(comm, string(arg)); ok {
			return name, true
		}
	}
	return "", false
}

// nameFromExe returns the whole command name of a process whose comm was
// cut, from the target of its /proc/<pid>/exe link: the executable's base
// name, when it starts with comm and is longer. The kernel marks an
// executable deleted since with " (deleted)".
func nameFromExe(comm, exe string) (name string, ok bool) {
	if len(comm) != commLen {
		return "", false
	}
	return longerName(comm, filepath.Base(strings.TrimSuffix(exe, " (deleted)")))
}

// longerName returns the base name of path, cut at a title's first space
// and at a colon, when it starts with comm and is longer.
func longerName(comm, path string) (string, bool) {
	path, _, _ = strings.Cut(path, " ")
	base := path[strings.LastIndexByte(path, '/')+1:]
	if i := strings.IndexByte(base[min(len(comm), len(base)):], ':'); i >= 0 {
		base = base[:len(comm)+i]
	}
	if len(base) <= len(comm) || !strings.HasPrefix(base, comm) {
		return "", false
	}
	return base, true
}

// fullName reads the whole command name of process pid under procRoot
// whose comm is cut (nameFromCmdline, then nameFromExe), and returns comm
// when neither says more: a process gone, a kernel thread, an executable
// tare may not look at.
func fullName(procRoot string, pid int, comm string) string {
	if len(comm) != commLen {
		return comm
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	if b, err := readHead(filepath.Join(dir, "cmdline"), cmdlineRead); err == nil {
		if name, ok := nameFromCmdline(comm, b); ok {
			return name
		}
	}
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		if name, ok := nameFromExe(comm, exe); ok {
			return name
		}
	}
	return comm
}

// readHead reads at most n bytes from the start of the file at path.
func readHead(path string, n int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, n)
	got, err := unix.Pread(fd, b, 0)
	if err != nil {
		return nil, err
	}
	return b[:got], nil
}
