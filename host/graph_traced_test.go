package host

import (
	"testing"

	"github.com/tare-dev/tare/schedprobe"
)

// TestTracedMember: a traced connect counts for the system under test's
// process that made it, or, when that one is not in the process table
// (a proxy's child for one connection, gone by the look), for the
// nearest ancestor of it that is a member; a connect by a process in the
// table outside the system under test never does.
func TestTracedMember(t *testing.T) {
	// socat (100) is the system under test; 300 is a client of it, a
	// child of the shell 200; 400 a child of socat's the user excluded.
	procs := map[int]procStat{1: {}, 100: {PPID: 1}, 200: {PPID: 1}, 300: {PPID: 200}, 400: {PPID: 100}}
	m := newMembers()
	m.sut[100] = true
	for _, c := range []struct {
		name      string
		pid       int
		ancestors [schedprobe.Ancestry]int
		want      int // 0: not the system under test's
	}{
		{"the member itself", 100, [schedprobe.Ancestry]int{1}, 100},
		{"its child, gone", 101, [schedprobe.Ancestry]int{100, 1}, 100},
		{"its grandchild, both gone", 102, [schedprobe.Ancestry]int{101, 100, 1}, 100},
		{"a client", 300, [schedprobe.Ancestry]int{200, 1}, 0},
		{"a gone child of a client", 301, [schedprobe.Ancestry]int{300, 200, 1}, 0},
		{"a process outside it, which socat's child had become", 300, [schedprobe.Ancestry]int{100, 1}, 0},
		{"a gone child of an excluded child", 401, [schedprobe.Ancestry]int{400, 100, 1}, 0},
		{"a gone process reparented to init", 500, [schedprobe.Ancestry]int{1}, 0},
		{"ancestry unknown past the recorded ones", 600, [schedprobe.Ancestry]int{601, 602, 603, 604}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, ok := tracedMember(schedprobe.Connect{PID: c.pid, Ancestors: c.ancestors}, procs, m)
			if ok != (c.want != 0) || pid != c.want {
				t.Errorf("tracedMember = %d, %v; want %d, %v", pid, ok, c.want, c.want != 0)
			}
		})
	}
}
