package host

import (
	"errors"
	"math"
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
	if len(by.TopOthers) != 2 || by.TopOthers[0] != want.TopOthers[0] || by.TopOthers[1] != want.TopOthers[1] {
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
	m.find(cur, []int{1}, nil, nil)
	by := ledger(all, prev, cur, 100, m)
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
