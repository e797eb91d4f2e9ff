package tare

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestEstimatedBlame(t *testing.T) {
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	sample := func(runDelay *float64, by *CPUBy) *HostSample {
		return &HostSample{Start: start, End: start.Add(time.Second), PerCPU: make([]CPUShares, 2),
			RunDelay: runDelay, SUTRunDelay: runDelay, CPUBy: by}
	}
	tests := []struct {
		name string
		h    *HostSample
		want *Blame
	}{
		{"no run delay", sample(nil, &CPUBy{Others: 40}), nil},
		{"no ledger", sample(Float(10), nil), nil},
		{
			// 20 % of a CPU waited; neighbours hold 50 of the 60 % processes
			// used: 20 × 50/60 = 16.7, under the cap (50 % × 2 CPUs). batch
			// has 40 of the neighbours' 50, sshd 4, the rest 6 unnamed.
			"a batch job beside the service", sample(Float(20), &CPUBy{SystemUnderTest: 8, Tare: 2, Others: 45, Unattributed: 5,
				TopOthers: []ProcessShare{{Name: "batch", PID: 4121, CPUPct: 40}, {Name: "sshd", PID: 600, CPUPct: 4}}}),
			&Blame{Source: BlameEstimated, WaitPct: 20, Behind: []Behind{
				{Owner: OwnerOther, Name: "batch", PIDs: []int{4121}, WaitPct: 20.0 * 50 / 60 * 40 / 50, Root: 4121},
				{Owner: OwnerSUT, Name: "", PIDs: []int{}, WaitPct: (20 - 20.0*50/60) * 8 / 10},
				{Owner: OwnerOther, Name: "", PIDs: []int{}, WaitPct: 20.0 * 50 / 60 * 6 / 50},
				{Owner: OwnerOther, Name: "sshd", PIDs: []int{600}, WaitPct: 20.0 * 50 / 60 * 4 / 50, Root: 600},
				{Owner: OwnerTare, Name: "", PIDs: []int{}, WaitPct: (20 - 20.0*50/60) * 2 / 10},
			}},
		},
		{
			// Issue 40: two `sh` of other families are two shares of the
			// ledger, and two owners of the wait; a service's processes
			// one. 10 % of a CPU waited, all of the processes' CPU the
			// neighbours': 30, 10 and 10 of 50.
			"two sh and a pool", sample(Float(10), &CPUBy{Others: 50, TopOthers: []ProcessShare{
				{Name: "sh", PID: 28157, CPUPct: 30}, {Name: "sh", PID: 22468, CPUPct: 10}, {Name: "gunicorn", PID: 100, PIDs: []int{100, 101, 102}, CPUPct: 10}}}),
			&Blame{Source: BlameEstimated, WaitPct: 10, Behind: []Behind{
				{Owner: OwnerOther, Name: "sh", PIDs: []int{28157}, WaitPct: 6, Root: 28157},
				{Owner: OwnerOther, Name: "gunicorn", PIDs: []int{100, 101, 102}, WaitPct: 2, Root: 100},
				{Owner: OwnerOther, Name: "sh", PIDs: []int{22468}, WaitPct: 2, Root: 22468},
			}},
		},
		{
			// A saturated service on a quiet host: 300 % waited, a daemon's
			// 0.5 %: the cap (0.5 % × 2 CPUs) keeps the neighbours at 1 %.
			"saturated", sample(Float(300), &CPUBy{SystemUnderTest: 95, Others: 0.5, TopOthers: []ProcessShare{{Name: "cron", PID: 9, CPUPct: 0.5}}}),
			&Blame{Source: BlameEstimated, WaitPct: 300, Behind: []Behind{
				{Owner: OwnerSUT, Name: "", PIDs: []int{}, WaitPct: 299},
				{Owner: OwnerOther, Name: "cron", PIDs: []int{9}, WaitPct: 1, Root: 9},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.h.EstimatedBlame()
			if !closeBlame(got, tt.want) {
				t.Errorf("EstimatedBlame = %+v\nwant %+v", got, tt.want)
			}
			if got != nil && tt.h.BlameOf() == nil {
				t.Error("BlameOf is nil where the estimate is not")
			}
		})
	}
}

// closeBlame compares two blames, their shares within 1e-9.
func closeBlame(a, b *Blame) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Behind) != len(b.Behind) || a.Source != b.Source || math.Abs(a.WaitPct-b.WaitPct) > 1e-9 {
		return false
	}
	for i := range a.Behind {
		x, y := a.Behind[i], b.Behind[i]
		if x.Key() != y.Key() || !reflect.DeepEqual(x.PIDs, y.PIDs) || math.Abs(x.WaitPct-y.WaitPct) > 1e-9 {
			return false
		}
	}
	return true
}

func TestMeasuredNeighbourWait(t *testing.T) {
	h := &HostSample{RunDelay: Float(30), CPUBy: &CPUBy{Others: 50, SystemUnderTest: 10},
		Blame: &Blame{Source: BlameMeasured, WaitPct: 30, Behind: []Behind{
			{Owner: OwnerOther, Name: "batch", WaitPct: 11.9},
			{Owner: OwnerSUT, Name: "app", WaitPct: 15},
			{Owner: OwnerOther, Name: "sshd", WaitPct: 0.1},
			{Owner: OwnerKernel, Name: "kworker/0:1", WaitPct: 3},
		}}}
	if got := *h.NeighbourWait(); math.Abs(got-12) > 1e-9 {
		t.Errorf("NeighbourWait = %v, want the measured wait behind other processes, 12 (kernel threads are not neighbours)", got)
	}
	if h.BlameOf() != h.Blame {
		t.Error("BlameOf is not the measured blame")
	}
	// A saturated service: eight threads queued on each CPU wait behind a
	// daemon's slices eight times over, but lost only the 0.5 % of the
	// host (1 % of a CPU on two) the daemon used.
	h.PerCPU = make([]CPUShares, 2)
	h.CPUBy = &CPUBy{SystemUnderTest: 99, Others: 0.5}
	if got := *h.NeighbourWait(); math.Abs(got-1) > 1e-9 {
		t.Errorf("NeighbourWait = %v, want it capped at the CPU the others used, 1", got)
	}
}

func TestDisagrees(t *testing.T) {
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		tick         time.Duration
		probe, sched *float64
		want         bool
	}{
		{"agree", time.Second, Float(52.9), Float(52.44), false},
		{"5 % apart", time.Second, Float(55.2), Float(52), true},
		{"under 1 ms of a tick", time.Second, Float(0.15), Float(0.06), false},
		{"over 1 ms of a tick", time.Second, Float(0.3), Float(0.1), true},
		{"1 ms of a short tick", 100 * time.Millisecond, Float(1.9), Float(1), false},
		{"no schedstat", time.Second, Float(50), nil, false},
		{"no probe run delay", time.Second, nil, Float(50), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &HostSample{Start: start, End: start.Add(tt.tick), RunDelay: tt.sched,
				Blame: &Blame{Source: BlameMeasured, RunDelayPct: tt.probe}}
			if got := h.Disagrees(); got != tt.want {
				t.Errorf("Disagrees = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWho(t *testing.T) {
	many := make([]int, 0, MaxBlamePIDs)
	for pid := 100; pid < 140; pid++ {
		many = AddPID(many, pid)
	}
	if len(many) != MaxBlamePIDs || many[0] != 100 || many[MaxBlamePIDs-1] != 100+MaxBlamePIDs-1 {
		t.Errorf("AddPID kept %v, want the first %d", many, MaxBlamePIDs)
	}
	for _, tt := range []struct {
		w    Behind
		want string
	}{
		{Behind{Name: "batch", PIDs: []int{4121}}, "`batch` (pid 4121)"},
		{Behind{Name: "sh", PIDs: AddPID(AddPID(nil, 9), 7)}, "`sh` (pids 7, 9)"},
		{Behind{Name: "awk", PIDs: many[:3]}, "`awk` (pids 100, 101, 102)"},
		{Behind{Name: "awk", PIDs: many}, "`awk` (pids 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, …)"},
		{Behind{Name: "gone"}, "`gone`"},
	} {
		if got := tt.w.Who(); got != tt.want {
			t.Errorf("Who = %q, want %q", got, tt.want)
		}
	}
}
