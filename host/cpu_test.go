package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tare-dev/tare"
)

// pct is part/whole as percent, so expectations read as the arithmetic.
func pct(part, whole float64) float64 { return part * 100 / whole }

func TestCPUShares(t *testing.T) {
	tests := []struct {
		name     string
		dir      string // holds t0/stat and t1/stat
		wantAll  tare.CPUShares
		wantPer  []tare.CPUShares
		wantFail error
	}{
		{
			// Captured on this VM one second apart (capture.sh).
			//   cpu0 Δ: user 13436−13355=81, sys 2055−2052=3, idle 38972−38953=19 → total 103
			//   cpu1 Δ: user 13673−13604=69, sys 2088−2081=7, idle 38649−38624=25 → total 101
			//   all  Δ: user 150, sys 10, idle 44 → total 204
			// The kernel's own "cpu" line says idle +43: it sums before
			// converting to USER_HZ and rounds differently. mpstat, like
			// this package, adds the per-CPU lines.
			name: "live capture",
			dir:  "live/t%s/proc",
			wantAll: tare.CPUShares{CPU: -1,
				User: pct(150, 204), System: pct(10, 204), Idle: pct(44, 204)},
			wantPer: []tare.CPUShares{
				{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
				{CPU: 1, User: pct(69, 101), System: pct(7, 101), Idle: pct(25, 101)},
			},
		},
		{
			// live, with cpu0 iowait 65→60 and cpu1 system 2081→2070: both
			// clamp to 0 and leave the total.
			//   cpu0 Δ: user 81, sys 3, idle 19, iowait 0 → 103
			//   cpu1 Δ: user 69, sys 0, idle 25 → 94
			//   all  Δ: user 150, sys 3, idle 44 → 197
			name: "counter goes backwards",
			dir:  "cpu/backwards/t%s",
			wantAll: tare.CPUShares{CPU: -1,
				User: pct(150, 197), System: pct(3, 197), Idle: pct(44, 197)},
			wantPer: []tare.CPUShares{
				{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
				{CPU: 1, User: pct(69, 94), Idle: pct(25, 94)},
			},
		},
		{
			// cpu1 has no line at t1: offline, left out of both.
			//   cpu0 Δ: user 81, sys 3, idle 19 → 103
			name: "cpu goes offline",
			dir:  "cpu/offline/t%s",
			wantAll: tare.CPUShares{CPU: -1,
				User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			wantPer: []tare.CPUShares{
				{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			},
		},
		{
			// cpu1 has no line at t0: back online with no reference, so it
			// is left out rather than counted from 0 (mpstat does the same).
			name: "cpu comes back online",
			dir:  "cpu/online/t%s",
			wantAll: tare.CPUShares{CPU: -1,
				User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			wantPer: []tare.CPUShares{
				{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			},
		},
		{
			// cpu1 identical at t0 and t1: Δtotal 0, no information.
			name: "cpu with no jiffies",
			dir:  "cpu/tickless/t%s",
			wantAll: tare.CPUShares{CPU: -1,
				User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			wantPer: []tare.CPUShares{
				{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
			},
		},
		{
			// cpu0 1000 200 300 5000 10 1 2 30 400 100
			//   →  1060 220 310 5080 12 2 3 56 430 110
			// Δ user 60 (of which guest 30), nice 20 (guest_nice 10),
			// sys 10, idle 80, iowait 2, irq 1, softirq 1, steal 26:
			// total 200 without guest (240 if guest were counted twice).
			name: "guest inside user",
			dir:  "cpu/guest/t%s",
			wantAll: tare.CPUShares{CPU: -1, User: 30, Nice: 10, System: 5,
				Idle: 40, IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13},
			wantPer: []tare.CPUShares{{CPU: 0, User: 30, Nice: 10, System: 5,
				Idle: 40, IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13}},
		},
		{
			// 8 fields, no guest columns: 100 0 50 800 5 0 0 0 → 130 0 60 855 5 0 0 5
			// Δ user 30, sys 10, idle 55, steal 5 → total 100
			name:    "kernel without guest columns",
			dir:     "cpu/oldkernel/t%s",
			wantAll: tare.CPUShares{CPU: -1, User: 30, System: 10, Idle: 55, Steal: 5},
			wantPer: []tare.CPUShares{{CPU: 0, User: 30, System: 10, Idle: 55, Steal: 5}},
		},
		{
			name:     "no time elapsed",
			dir:      "cpu/still/t%s",
			wantFail: errNoCPUTime,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := func(moment string) []cpuTimes {
				dir := filepath.Join("testdata", fmt.Sprintf(tt.dir, moment))
				c, err := readCPUTimes(procFS(t, dir), nil)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			all, per, _, err := cpuShares(read("0"), read("1"), nil)
			if !errors.Is(err, tt.wantFail) {
				t.Fatalf("error %v, want %v", err, tt.wantFail)
			}
			if tt.wantFail != nil {
				return
			}
			checkShares(t, "aggregate", all, tt.wantAll)
			if len(per) != len(tt.wantPer) {
				t.Fatalf("PerCPU has %d CPUs, want %d: %+v", len(per), len(tt.wantPer), per)
			}
			for i := range per {
				checkShares(t, "per cpu", per[i], tt.wantPer[i])
			}
		})
	}
}

func checkShares(t *testing.T, what string, got, want tare.CPUShares) {
	t.Helper()
	ok := got.CPU == want.CPU && near(got.User, want.User) && near(got.Nice, want.Nice) &&
		near(got.System, want.System) && near(got.IOWait, want.IOWait) && near(got.IRQ, want.IRQ) &&
		near(got.SoftIRQ, want.SoftIRQ) && near(got.Steal, want.Steal) && near(got.Idle, want.Idle)
	if !ok {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
	sum := got.User + got.Nice + got.System + got.IOWait + got.IRQ + got.SoftIRQ + got.Steal + got.Idle
	if !near(sum, 100) {
		t.Errorf("%s: shares add up to %v, want 100", what, sum)
	}
}

func TestReadCPUTimesMalformed(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"stat": "cpu  1 2 3\ncpu0 1 two 3\n"})
	if _, err := readCPUTimes(procFS(t, dir), nil); !errors.Is(err, ErrParse) {
		t.Errorf("error %v, want one wrapping ErrParse", err)
	}
	if _, err := readCPUTimes(procFS(t, t.TempDir()), nil); err == nil || errors.Is(err, ErrParse) {
		t.Errorf("missing /proc/stat: error %v, want a read error", err)
	}
}
