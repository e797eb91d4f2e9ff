package host

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestLedgerFixture splits the v2 fixture's tick by owner. /proc/stat:
// user 60, nice 20, system 10, idle 80, iowait 2, irq 1, softirq 1, steal
// 26 jiffies: 200 in all, 90 of them tasks'. The processes, t0 → t1:
//
//	42 api          SUT         150 → 190   40
//	43 api worker   its child    10 →  20   10   system under test 50 = 25 %
//	50 tare         tare         40 →  50   10   5 %
//	60 batch        other       520 → 540   20   10 %
//	61 cron         other, started in the tick (100050 > uptime 100000): 4   2 %
//	62 old          exited: nothing
//	9  ksoftirqd/0  kernel thread 8 → 10     2   kernel (1 + 1 + 2) = 2 %
//
// unattributed 90 − 86 = 4 (2 %), steal 13 %, idle 82 (41 %): 100 % in all.
func TestLedgerFixture(t *testing.T) {
	s, step := fixtureSampler(t, "v2", Config{SUT: []int{42}, Tare: []int{50}})
	step("t1")
	got, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	by := got.CPUBy
	if by == nil {
		t.Fatalf("no ledger; warnings %v", s.Warnings())
	}
	want := tare.CPUBy{SystemUnderTest: 25, Tare: 5, Others: 12, Kernel: 2, Unattributed: 2, Steal: 13, Idle: 41,
		TopOthers: []tare.ProcessShare{{Name: "batch", PID: 60, CPUPct: 10}, {Name: "cron", PID: 61, CPUPct: 2}}}
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("system under test", by.SystemUnderTest, want.SystemUnderTest)
	check("tare", by.Tare, want.Tare)
	check("others", by.Others, want.Others)
	check("kernel", by.Kernel, want.Kernel)
	check("unattributed", by.Unattributed, want.Unattributed)
	check("steal", by.Steal, want.Steal)
	check("idle", by.Idle, want.Idle)
	check("sum", by.SystemUnderTest+by.Tare+by.Others+by.Kernel+by.Unattributed+by.Steal+by.Idle, 100)
	if !reflect.DeepEqual(by.TopOthers, want.TopOthers) {
		t.Errorf("top others %+v, want %+v", by.TopOthers, want.TopOthers)
	}
}

// TestLedgerScalesOverlap: process counters read a moment after /proc/stat
// may add up to more than the tasks' time; they are scaled down to it.
func TestLedgerScalesOverlap(t *testing.T) {
	all := cpuDelta{User: 50, System: 10, Idle: 40}
	prev := map[int]procStat{1: {PID: 1, Ticks: 0, Start: 5}, 2: {PID: 2, Ticks: 0, Start: 5}}
	cur := map[int]procStat{1: {PID: 1, Ticks: 60, Start: 5, Comm: "svc"}, 2: {PID: 2, Ticks: 30, Start: 5, Comm: "hog"}}
	m := newMembers()
	m.find(cur, [][]int{{1}}, nil, nil)
	by := ledger(all, prev, cur, 100, m, 1)
	if by.SystemUnderTest != 40 || by.Others != 20 || by.Unattributed != 0 || by.Idle != 40 {
		t.Errorf("ledger %+v; want the 90 ticks scaled to the 60 of the tasks: 40 + 20, idle 40", by)
	}
}

// TestLedgerReusedPID: a pid whose start time changed is another process:
// its whole counter is the tick's only if it started in the tick.
func TestLedgerReusedPID(t *testing.T) {
	prev := map[int]procStat{7: {PID: 7, Ticks: 500, Start: 10}}
	for _, tt := range []struct {
		name  string
		start uint64
		want  uint64
	}{
		{"started in the tick", 1000, 30},
		{"there before, unseen", 900, 0},
	} {
		if got := procDelta(procStat{PID: 7, Ticks: 30, Start: tt.start}, prev, 950); got != tt.want {
			t.Errorf("%s: delta %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := procDelta(procStat{PID: 7, Ticks: 400, Start: 10}, prev, 950); got != 0 {
		t.Errorf("a counter that went backwards: delta %d, want 0", got)
	}
}

func TestNeighbourWait(t *testing.T) {
	two := []tare.CPUShares{{CPU: 0}, {CPU: 1}}
	for _, tt := range []struct {
		name string
		h    tare.HostSample
		want float64
	}{
		{"behind a hog", tare.HostSample{PerCPU: two, RunDelay: tare.Float(40), CPUBy: &tare.CPUBy{SystemUnderTest: 10, Others: 40}}, 32},
		{"behind its own threads", tare.HostSample{PerCPU: two, RunDelay: tare.Float(300), CPUBy: &tare.CPUBy{SystemUnderTest: 95, Tare: 4}}, 0},
		// 300 % × 1/100 = 3 %, capped at the 1 % × 2 CPUs the others used.
		{"a daemon beside a saturated service", tare.HostSample{PerCPU: two, RunDelay: tare.Float(300), CPUBy: &tare.CPUBy{SystemUnderTest: 95, Tare: 4, Others: 1}}, 2},
	} {
		if got := tt.h.NeighbourWait(); got == nil || math.Abs(*got-tt.want) > 1e-9 {
			t.Errorf("%s: neighbour wait %v, want %v", tt.name, fmtPtr(got), tt.want)
		}
	}
	if (&tare.HostSample{RunDelay: tare.Float(5)}).NeighbourWait() != nil {
		t.Error("neighbour wait without a ledger: want nil, not 0")
	}
}

func FuzzParseUptime(f *testing.F) {
	for _, s := range []string{"350735.47 234388.90\n", "0.00 0.00", "", "x y", "-1 2", "1e400 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseUptime(b); err != nil && !errors.Is(err, ErrParse) {
			t.Fatalf("error %v does not wrap ErrParse", err)
		}
	})
}

// TestLedgerReapedChildren: the CPU of children that came and went inside
// the tick is charged to the live parent that reaped them, less what the
// ledger had already counted of a child it saw, and named by the
// children's commands; unattributed is what is left.
//
//	10 sh        own 5 → 6: 1; reaped 100 → 185: 85, of which 30 were its
//	             child python3's already counted at t0, so 55 (15 more of
//	             python3's, and 40 of children never seen)
//	11 python3   30 at t0, gone at t1
//
// tasks 100 of 200 jiffies: sh 56 (28 %), unattributed 44 (22 %).
func TestLedgerReapedChildren(t *testing.T) {
	all := cpuDelta{User: 100, Idle: 100}
	prev := map[int]procStat{
		10: {PID: 10, Comm: "sh", PPID: 1, Ticks: 5, Reaped: 100, Start: 5},
		11: {PID: 11, Comm: "python3", PPID: 10, Ticks: 30, Start: 50},
	}
	cur := map[int]procStat{10: {PID: 10, Comm: "sh", PPID: 1, Ticks: 6, Reaped: 185, Start: 5}}
	m := newMembers()
	m.find(cur, nil, nil, nil)
	by := ledger(all, prev, cur, 100, m, 0)
	want := []tare.ProcessShare{{Name: "sh", PID: 10, CPUPct: 28, Children: []string{"python3"}}}
	if !near(by.Others, 28) || !near(by.Unattributed, 22) || !reflect.DeepEqual(by.TopOthers, want) {
		t.Errorf("ledger others %v, unattributed %v, top %+v; want 28, 22, %+v", by.Others, by.Unattributed, by.TopOthers, want)
	}

	// A child read alive a moment before its parent reaped it counts in
	// both: the reaped time fills what is unattributed, no more.
	cur[10] = procStat{PID: 10, Comm: "sh", PPID: 1, Ticks: 6, Reaped: 400, Start: 5}
	cur[11] = procStat{PID: 11, Comm: "python3", PPID: 10, Ticks: 80, Start: 50}
	m.find(cur, nil, nil, nil)
	by = ledger(all, prev, cur, 100, m, 0)
	if !near(by.Others, 50) || !near(by.Unattributed, 0) {
		t.Errorf("double-counted child: others %v, unattributed %v; want all 100 jiffies of tasks, 50 %%, and none unattributed", by.Others, by.Unattributed)
	}
}

// TestLedgerNodes: the system under test's CPU is split by the nodes of
// its graph, each process in the node whose roots it descends from.
func TestLedgerNodes(t *testing.T) {
	all := cpuDelta{User: 60, Idle: 140}
	prev := map[int]procStat{}
	cur := map[int]procStat{
		1: {PID: 1, Comm: "nginx", Ticks: 10, Start: 150},
		2: {PID: 2, Comm: "nginx", PPID: 1, Ticks: 10, Start: 150},
		3: {PID: 3, Comm: "gunicorn", Ticks: 20, Start: 150},
		4: {PID: 4, Comm: "gunicorn", PPID: 3, Ticks: 20, Start: 150},
	}
	m := newMembers()
	m.find(cur, [][]int{{1}, {3}}, nil, nil)
	by := ledger(all, prev, cur, 100, m, 2)
	if len(by.SUTNodes) != 2 || !near(by.SUTNodes[0].CPUPct, 10) || !near(by.SUTNodes[1].CPUPct, 20) || !near(by.SystemUnderTest, 30) {
		t.Errorf("nodes %+v of %v; want nginx 10 %% and gunicorn 20 %% of 30 %%", by.SUTNodes, by.SystemUnderTest)
	}
}
