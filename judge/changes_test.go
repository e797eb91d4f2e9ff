package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestWindowChanges: each window's ledger against the quietest window's,
// in words; what a quiet host's background does is no change.
func TestWindowChanges(t *testing.T) {
	f := tare.Float
	// run is a window on a 2-CPU host whose others are the neighbours
	// (% of all its CPU), with the rest of the ledger as given.
	run := func(window string, p95 float64, others []tare.ProcessShare, set func(*tare.ComparedRun)) tare.ComparedRun {
		by := &tare.CPUBy{SystemUnderTest: 10, Tare: 2, TopOthers: others}
		for _, p := range others {
			by.Others += p.CPUPct
		}
		r := tare.ComparedRun{ID: window, Window: window, VCPUs: 2, Requests: 10000, Latency: tare.LatencyMS{P95: f(p95)}, CPUBy: by,
			Steal: tare.StealStats{Mean: f(0.5)}, NeighbourWaitPct: f(0.5), ThrottledPct: f(0), SendLag: tare.LagMS{P99: f(0.2)}, SUTCPUPerRequestMS: f(2)}
		if set != nil {
			set(&r)
		}
		return r
	}
	daemon := []tare.ProcessShare{{Name: "systemd", PID: 1, CPUPct: 0.5}}
	tests := []struct {
		name string
		runs []tare.ComparedRun
		want []string // the details of the one window's changes; nil: that window unchanged
	}{
		{"a neighbour in one window only", []tare.ComparedRun{
			run("offpeak", 10, daemon, nil),
			run("mid", 40, append([]tare.ProcessShare{{Name: "backup", PID: 7, CPUPct: 15.5}}, daemon...), func(r *tare.ComparedRun) { r.NeighbourWaitPct = f(9) }),
		}, []string{"in mid, `backup` (pid 7) used 31% of a CPU (absent in offpeak)", "the service and tare waited for a CPU behind neighbours 9.0% of the time against 0.5% in offpeak"}},
		{"a neighbour gone from the slower window", []tare.ComparedRun{
			run("peak", 10, []tare.ProcessShare{{Name: "cron", PID: 9, CPUPct: 10}}, nil),
			run("offpeak", 12, nil, nil),
		}, []string{"in peak, `cron` (pid 9) used 20% of a CPU (absent in offpeak)"}},
		// Issue 40: a CPU hog's `sh` beside a broker's disk monitor's `sh`
		// is two neighbours, the hog named by itself.
		{"two processes of one name, one of them new", []tare.ComparedRun{
			run("offpeak", 10, []tare.ProcessShare{{Name: "sh", PID: 22468, CPUPct: 0.5}}, nil),
			run("peak", 20, []tare.ProcessShare{{Name: "sh", PID: 28157, CPUPct: 25}, {Name: "sh", PID: 22468, CPUPct: 0.5}}, nil),
		}, []string{"in peak, `sh` (pid 28157) used 50% of a CPU (absent in offpeak)"}},
		{"a server that ran in both windows", []tare.ComparedRun{
			run("offpeak", 10, []tare.ProcessShare{{Name: "postgres", PID: 100, PIDs: []int{100, 101}, CPUPct: 2}}, nil),
			run("peak", 20, []tare.ProcessShare{{Name: "postgres", PID: 100, PIDs: []int{100, 102}, CPUPct: 20}}, nil),
		}, []string{"in peak, `postgres` (pid 100) used 40% of a CPU (4% in offpeak)"}},
		{"a command under a new pid in each window", []tare.ComparedRun{
			run("offpeak", 10, []tare.ProcessShare{{Name: "backup", PID: 700, CPUPct: 2}}, nil),
			run("peak", 20, []tare.ProcessShare{{Name: "backup", PID: 900, CPUPct: 20}}, nil),
		}, []string{"in peak, `backup` used 40% of a CPU (4% in offpeak)"}},
		{"a neighbour of 2 % of a CPU is background", []tare.ComparedRun{
			run("offpeak", 10, nil, nil),
			run("peak", 11, []tare.ProcessShare{{Name: "sshd", PID: 9, CPUPct: 1}}, nil),
		}, nil},
		{"steal, throttling and a late generator", []tare.ComparedRun{
			run("offpeak", 10, nil, nil),
			run("peak", 30, nil, func(r *tare.ComparedRun) {
				r.Steal.Mean, r.ThrottledPct, r.SendLag.P99 = f(12), f(6), f(2.65)
			}),
		}, []string{"steal took 12.0% of the host's CPU against 0.5% in offpeak", "the cgroup was throttled 6.0% of the time against 0.0% in offpeak",
			"tare's own send lag p99 was 2.65ms against 0.20ms in offpeak: something held the generator back in peak"}},
		{"the service's own work per request", []tare.ComparedRun{
			run("offpeak", 10, nil, nil),
			run("peak", 20, nil, func(r *tare.ComparedRun) { r.SUTCPUPerRequestMS = f(4) }),
		}, []string{"the system under test spent 4.00ms of CPU per request against 2.00ms in offpeak: more work per request"}},
		{"too little CPU time to compare per request", []tare.ComparedRun{
			run("offpeak", 10, nil, func(r *tare.ComparedRun) { r.Requests = 200 }),
			run("peak", 20, nil, func(r *tare.ComparedRun) { r.SUTCPUPerRequestMS, r.Requests = f(4), 200 }),
		}, nil},
		{"a lag within the latency floor", []tare.ComparedRun{
			run("offpeak", 10, nil, nil),
			run("peak", 20, nil, func(r *tare.ComparedRun) { r.SendLag.P99 = f(1.0) }),
		}, nil},
		{"unnamed neighbours: other containers", []tare.ComparedRun{
			run("offpeak", 10, nil, nil),
			run("peak", 20, nil, func(r *tare.ComparedRun) { r.CPUBy.Unattributed = 20 }),
		}, []string{"other processes and busy time no process accounts for used 40% of a CPU against 0% in offpeak"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tare.Comparison{Runs: tt.runs}
			Protocol(c, make([]tare.Summary, len(tt.runs)), ProtocolRules{})
			if len(c.Changes) != 1 {
				t.Fatalf("changes %+v; want one window against the other", c.Changes)
			}
			var got []string
			for _, it := range c.Changes[0].Items {
				got = append(got, it.Detail)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("change %d: %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}

	// No ledger (summary files of another tool): nothing to set side by side.
	c := &tare.Comparison{Runs: []tare.ComparedRun{{ID: "a", Latency: tare.LatencyMS{P95: f(1)}}, {ID: "b", Latency: tare.LatencyMS{P95: f(2)}}}}
	Protocol(c, make([]tare.Summary, 2), ProtocolRules{})
	if c.Changes != nil {
		t.Errorf("changes %+v without a ledger", c.Changes)
	}
}
