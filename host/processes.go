package host

import (
	"errors"
	"io/fs"
	"strings"
	"sync"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

// Processes is tare.Processes read from /proc: the store asks it who
// writes a run and whether a run's writer still runs.
type Processes struct{}

var _ tare.Processes = Processes{}

// Self is this process, read from /proc once; the zero ProcessID where
// /proc cannot tell (then a run's liveness falls back to its heartbeat
// alone).
func (Processes) Self() tare.ProcessID { return self() }

// Alive reports whether p is a process still running, as far as this
// process can see; known is false when p lives where it cannot look
// (another machine, boot or PID namespace).
func (Processes) Alive(p tare.ProcessID) (alive, known bool) { return processAlive(p, self()) }

var self = sync.OnceValue(func() tare.ProcessID {
	boot, ns, err := readProcessTable(DefaultProcRoot)
	if err != nil || strings.Contains(ns, "/") {
		return tare.ProcessID{}
	}
	p, err := procfs.Self()
	if err != nil {
		return tare.ProcessID{}
	}
	st, err := p.Stat()
	if err != nil {
		return tare.ProcessID{}
	}
	return tare.ProcessID{Boot: boot, PIDNS: ns, PID: p.PID, Start: st.Starttime}
})

// processAlive is Alive as seen by me.
func processAlive(p, me tare.ProcessID) (alive, known bool) {
	if me.Boot == "" || p.Boot != me.Boot || p.PIDNS != me.PIDNS {
		return false, false
	}
	if p == me {
		return true, true
	}
	proc, err := procfs.NewProc(p.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	st, err := proc.Stat()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, true
	case err != nil:
		return false, false
	}
	// A zombie has finished: only its exit status is left for its parent.
	dead := st.Starttime != p.Start || st.State == "Z" || st.State == "X"
	return !dead, true
}
