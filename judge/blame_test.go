package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// measuredRun is a run of ticks whose blame the scheduler probe measured:
// perTick is each tick's wait behind other processes, split between `sh`
// (pids 7, 9) and `cron` (pid 40) three to one, on cpus (CPU → share of
// that wait).
func measuredRun(perTick []float64, cpus map[int]float64) (*tare.Summary, []tare.Tick) {
	s, ticks := run(make([]float64, len(perTick)))
	s.Env.VCPUs = 2
	s.SUT = &tare.SUTSummary{PIDs: []int{77}}
	mean := 0.0
	for i, w := range perTick {
		b := &tare.Blame{Source: tare.BlameMeasured, WaitPct: w + 2, Behind: []tare.Behind{
			{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7, 9}, WaitPct: w * 3 / 4},
			{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{77}, WaitPct: 2},
			{Owner: tare.OwnerOther, Name: "cron", PIDs: []int{40}, WaitPct: w / 4},
		}}
		for cpu, share := range cpus {
			b.OthersByCPU = append(b.OthersByCPU, tare.CPUWait{CPU: cpu, WaitPct: w * share})
		}
		ticks[i].Host.Blame = b
		mean += w / float64(len(perTick))
	}
	s.Host.RunDelayPct, s.Host.NeighbourWaitPct = tare.Float(mean+2), tare.Float(mean)
	s.Blame = &tare.Blame{Source: tare.BlameMeasured, WaitPct: mean + 2, Behind: []tare.Behind{
		{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7, 9}, WaitPct: mean * 3 / 4},
		{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{77}, WaitPct: 2},
		{Owner: tare.OwnerOther, Name: "cron", PIDs: []int{40}, WaitPct: mean / 4},
	}}
	for cpu, share := range cpus {
		s.Blame.OthersByCPU = append(s.Blame.OthersByCPU, tare.CPUWait{CPU: cpu, WaitPct: mean * share})
	}
	return s, ticks
}

// TestMeasuredNeighbours: with measured blame the neighbours signal needs
// no ledger, fires on the measured wait behind other processes (the mean,
// or enough ticks), names each process with its share, and the advice
// names the process to stop and, when the wait was on one CPU, the core.
func TestMeasuredNeighbours(t *testing.T) {
	tests := []struct {
		name    string
		perTick []float64
		cpus    map[int]float64
		fired   bool
		detail  string
		advice  string
	}{
		{"a hog on the service's core", []float64{12, 12, 12, 12, 12, 12, 12, 12, 12, 12}, map[int]float64{0: 0.95, 1: 0.05}, true,
			"waited for a CPU 12.0% of the time behind other processes (threshold 5%; measured by the scheduler probe, at most the CPU they used): `sh` (pids 7, 9) 9.0%, `cron` (pid 40) 3.0%",
			"Stop `sh` (pids 7, 9) or move it off CPU 0, where 95% of the wait behind other processes was"},
		{"spread over the cores", []float64{12, 12, 12, 12, 12, 12, 12, 12, 12, 12}, map[int]float64{0: 0.5, 1: 0.5}, true,
			"`sh` (pids 7, 9) 9.0%", "Stop `sh` (pids 7, 9) or move it elsewhere during the test"},
		{"in bursts", []float64{0, 0, 24, 0, 0, 0, 24, 0, 0, 0}, map[int]float64{1: 1}, true,
			"more than 10% of the tick in 20% of ticks (2 of 10", "move it off CPU 1"},
		{"a blip", []float64{0, 0, 24, 0, 0, 0, 0, 0, 0, 0}, map[int]float64{1: 1}, false,
			"waited behind other processes 2.4% of the time (threshold 5%; measured by the scheduler probe, at most the CPU they used): `sh` (pids 7, 9) 1.8%, `cron` (pid 40) 0.6%", ""},
		{"nobody", make([]float64, 10), nil, false,
			"waited behind other processes 0.0% of the time (threshold 5%; measured by the scheduler probe, at most the CPU they used)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := measuredRun(tt.perTick, tt.cpus)
			v := Judge(s, ticks, DefaultThresholds(), nil)
			sig := find(t, v, SignalNeighbours)
			if sig.Fired != tt.fired || !strings.Contains(sig.Detail, tt.detail) {
				t.Errorf("neighbours: fired %v %q; want fired %v with %q", sig.Fired, sig.Detail, tt.fired, tt.detail)
			}
			advice := strings.Join(v.Advice, "\n")
			if tt.advice != "" && !strings.Contains(advice, tt.advice) {
				t.Errorf("advice %q lacks %q", advice, tt.advice)
			}
			if (v.Level == tare.Polluted) != tt.fired {
				t.Errorf("level %s with neighbours fired %v", v.Level, sig.Fired)
			}
		})
	}
}

// TestBlameWarnings: a measured run says where the truth check failed and
// what the probe lost; an estimated one says neither.
func TestBlameWarnings(t *testing.T) {
	s, ticks := measuredRun(make([]float64, 10), nil)
	s.Blame.Schedstat = &tare.TruthCheck{WaitPct: 14.3, ProbeWaitPct: 17.9, Ticks: 10, Disagreed: 3}
	s.Blame.DroppedEvents = 12
	w := strings.Join(Judge(s, ticks, DefaultThresholds(), nil).Warnings, "\n")
	for _, want := range []string{"disagreed with schedstat's by more than 5% (or 1 ms a tick) in 3 of 10 ticks (over the run: 17.9% of a CPU by the probe, 14.3% by schedstat)", "the scheduler probe lost 12 events"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
	s.Blame.Source = tare.BlameEstimated
	if w := strings.Join(Judge(s, ticks, DefaultThresholds(), nil).Warnings, "\n"); strings.Contains(w, "scheduler probe") {
		t.Errorf("an estimated run warns of the probe: %q", w)
	}
}
