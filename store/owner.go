package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
)

// owner identifies the process writing a run, so that a reader on the same
// machine can tell at once whether that process still lives. Every part is
// needed: a PID means one process only within one boot and one PID
// namespace, and only until it is reused, which the start time tells.
type owner struct {
	boot  string // /proc/sys/kernel/random/boot_id
	pidNS string // the link /proc/self/ns/pid, e.g. "pid:[4026531836]"
	pid   int
	start uint64 // clock ticks after boot, field 22 of /proc/<pid>/stat
}

// String is the stored form, "boot/pidns/pid/start"; "" when unknown.
func (o owner) String() string {
	if o.boot == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/%d/%d", o.boot, o.pidNS, o.pid, o.start)
}

// parseOwner undoes owner.String. ok is false for "" and for anything
// malformed, which then reads as an owner on another machine.
func parseOwner(s string) (o owner, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return owner{}, false
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil || pid <= 0 {
		return owner{}, false
	}
	start, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return owner{}, false
	}
	return owner{boot: parts[0], pidNS: parts[1], pid: pid, start: start}, true
}

// self is this process as an owner; the zero owner where /proc cannot tell
// (then liveness falls back to the heartbeat alone).
var self = sync.OnceValue(func() owner {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return owner{}
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || strings.Contains(ns, "/") {
		return owner{}
	}
	p, err := procfs.Self()
	if err != nil {
		return owner{}
	}
	st, err := p.Stat()
	if err != nil {
		return owner{}
	}
	return owner{boot: strings.TrimSpace(string(boot)), pidNS: ns, pid: p.PID, start: st.Starttime}
})

// alive reports whether o is a process still running, as far as me can
// see; known is false when o lives where me cannot look (another machine,
// boot or PID namespace).
func (o owner) alive(me owner) (alive, known bool) {
	if me.boot == "" || o.boot != me.boot || o.pidNS != me.pidNS {
		return false, false
	}
	if o == me {
		return true, true
	}
	p, err := procfs.NewProc(o.pid)
	if errors.Is(err, fs.ErrNotExist) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	st, err := p.Stat()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, true
	case err != nil:
		return false, false
	}
	// A zombie has finished: only its exit status is left for its parent.
	dead := st.Starttime != o.start || st.State == "Z" || st.State == "X"
	return !dead, true
}
