package host

import (
	"reflect"
	"testing"

	"github.com/tare-dev/tare"
)

// family is a process tree of two unrelated `sh` (a hog started by a test,
// a broker's disk monitor), gunicorn's pool, a shell's `sh` that forked a
// `sh`, and postgres under a container's init:
//
//	systemd(1) ┬ tare.test(60) ─ sh(61)
//	           ├ beam.smp(50) ─ sh(51) ─ df(52)
//	           ├ gunicorn(100) ┬ gunicorn(101)
//	           │               └ gunicorn(102)
//	           ├ bash(7) ─ sh(8) ─ sh(9)
//	           └ kthreadd(2) ─ kworker/0:1(14)
var family = map[int]procStat{
	1:   {PID: 1, Comm: "systemd"},
	2:   {PID: 2, Comm: "kthreadd", KThread: true},
	7:   {PID: 7, Comm: "bash", PPID: 1},
	8:   {PID: 8, Comm: "sh", PPID: 7},
	9:   {PID: 9, Comm: "sh", PPID: 8},
	14:  {PID: 14, Comm: "kworker/0:1", PPID: 2, KThread: true},
	50:  {PID: 50, Comm: "beam.smp", PPID: 1},
	51:  {PID: 51, Comm: "sh", PPID: 50},
	52:  {PID: 52, Comm: "df", PPID: 51},
	60:  {PID: 60, Comm: "tare.test", PPID: 1},
	61:  {PID: 61, Comm: "sh", PPID: 60},
	100: {PID: 100, Comm: "gunicorn", PPID: 1},
	101: {PID: 101, Comm: "gunicorn", PPID: 100},
	102: {PID: 102, Comm: "gunicorn", PPID: 100},
	// a loop of parents no real tree has: the walk ends all the same
	300: {PID: 300, Comm: "loop", PPID: 301},
	301: {PID: 301, Comm: "loop", PPID: 300},
}

func TestServiceRoot(t *testing.T) {
	tests := []struct {
		name      string
		pid, want int
	}{
		{"a hog started by a test", 61, 61},
		{"a broker's disk monitor, another sh", 51, 51},
		{"its child of another name", 52, 52},
		{"a pool's master", 100, 100},
		{"a pool's worker", 102, 100},
		{"a sh forked by a sh", 9, 8},
		{"a kernel thread", 14, 14},
		{"init", 1, 1},
		{"not in the table", 999, 0},
		{"a loop of parents", 300, 301},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serviceRoot(tt.pid, family); got != tt.want {
				t.Errorf("serviceRoot(%d) = %d, want %d", tt.pid, got, tt.want)
			}
		})
	}
}

// TestByService: the ledger's shares of one service are one share, and
// two processes of one name in other families stay two (issue 40: a hog's
// `sh` beside a broker's disk monitor's).
func TestByService(t *testing.T) {
	box := &tare.Container{ID: "863e2e323075", Runtime: "docker"}
	tests := []struct {
		name   string
		shares []tare.ProcessShare
		want   []tare.ProcessShare
	}{
		{"two unrelated sh stay apart",
			[]tare.ProcessShare{{Name: "sh", PID: 61, CPUPct: 25}, {Name: "sh", PID: 51, CPUPct: 0.5}},
			[]tare.ProcessShare{{Name: "sh", PID: 61, CPUPct: 25}, {Name: "sh", PID: 51, CPUPct: 0.5}}},
		{"a pool's master and workers merge",
			[]tare.ProcessShare{{Name: "gunicorn", PID: 101, CPUPct: 10}, {Name: "gunicorn", PID: 100, CPUPct: 1}, {Name: "gunicorn", PID: 102, CPUPct: 12}},
			[]tare.ProcessShare{{Name: "gunicorn", PID: 100, PIDs: []int{100, 101, 102}, CPUPct: 23}}},
		{"one worker busy alone is named by its master",
			[]tare.ProcessShare{{Name: "gunicorn", PID: 102, CPUPct: 12}},
			[]tare.ProcessShare{{Name: "gunicorn", PID: 100, PIDs: []int{100, 102}, CPUPct: 12}}},
		{"a sh forked by a sh merges, with the children they reaped",
			[]tare.ProcessShare{{Name: "sh", PID: 9, CPUPct: 3, Children: []string{"df"}}, {Name: "sh", PID: 8, CPUPct: 2, Children: []string{"df", "awk"}}},
			[]tare.ProcessShare{{Name: "sh", PID: 8, PIDs: []int{8, 9}, CPUPct: 5, Children: []string{"df", "awk"}}}},
		{"a container's shares are left to byContainer",
			[]tare.ProcessShare{{Name: "gunicorn", PID: 101, CPUPct: 10, Container: box}, {Name: "gunicorn", PID: 102, CPUPct: 12, Container: box}},
			[]tare.ProcessShare{{Name: "gunicorn", PID: 101, CPUPct: 10, Container: box}, {Name: "gunicorn", PID: 102, CPUPct: 12, Container: box}}},
		{"a process gone from the table is left alone",
			[]tare.ProcessShare{{Name: "sh", PID: 999, CPUPct: 1}, {Name: "sh", PID: 998, CPUPct: 1}},
			[]tare.ProcessShare{{Name: "sh", PID: 999, CPUPct: 1}, {Name: "sh", PID: 998, CPUPct: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byService(tt.shares, family, map[int]int{})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("byService =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
