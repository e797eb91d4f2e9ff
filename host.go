package tare

import "time"

// CPUShares is how one CPU (or all of them) spent a tick, as percent of the
// tick's total jiffies, computed the way sysstat's mpstat does: guest time is
// already inside user and is left out of the total, and a counter that goes
// backwards counts as 0.
type CPUShares struct {
	CPU     int     `json:"cpu"` // CPU number; -1 for the aggregate of all online CPUs
	User    float64 `json:"user"`
	Nice    float64 `json:"nice"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"` // time the hypervisor gave this vCPU to someone else
	Idle    float64 `json:"idle"`
}

// Busy is the share of the tick the guest itself ran: everything but idle,
// iowait and steal.
func (c CPUShares) Busy() float64 {
	b := 100 - c.Idle - c.IOWait - c.Steal
	if b < 0 {
		return 0
	}
	return b
}

// HostSample is the host's interference over one tick. A source that was not
// available is nil, never 0.
type HostSample struct {
	Start time.Time `json:"start"` // beginning of the tick (previous reading)
	End   time.Time `json:"end"`   // end of the tick (this reading)

	CPU    CPUShares   `json:"cpu"`     // aggregate of online CPUs
	PerCPU []CPUShares `json:"per_cpu"` // online CPUs only, by CPU number

	PSISome   *float64 `json:"psi_some"`  // % of the tick some task waited for a CPU (/proc/pressure/cpu)
	PSIFull   *float64 `json:"psi_full"`  // % of the tick all non-idle tasks waited
	Throttled *float64 `json:"throttled"` // % of the tick the measured cgroup was throttled
	RunDelay  *float64 `json:"run_delay"` // % of the tick the measured processes waited on a run queue
}

// MaxCPUSteal is the highest steal of any single CPU in the sample: the
// aggregate hides one starved vCPU.
func (h *HostSample) MaxCPUSteal() float64 {
	m := h.CPU.Steal
	for _, c := range h.PerCPU {
		if c.Steal > m {
			m = c.Steal
		}
	}
	return m
}

// Env describes the machine a run measured, recorded once per run.
type Env struct {
	Hostname   string `json:"hostname"`
	VCPUs      int    `json:"vcpus"`
	Kernel     string `json:"kernel"`
	ClkTck     int    `json:"clk_tck"`
	Cgroup     string `json:"cgroup"` // "v1", "v2" or "" when unknown
	PSI        bool   `json:"psi"`
	Hypervisor *bool  `json:"hypervisor"` // nil when unknown
}
