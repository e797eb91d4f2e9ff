// Package host samples the interference a load test suffers from the machine
// it runs on: every tick it reads /proc and the cgroup filesystem and turns
// the counters into shares of that tick (tare.HostSample).
//
// Sources, each a delta of cumulative counters between two readings:
//
//	/proc/stat                   user, nice, system, iowait, irq, softirq,
//	                             steal, idle per CPU and for all online CPUs
//	/proc/pressure/cpu           PSI some/full: share of the tick tasks
//	                             waited for a CPU
//	/proc/pressure/io            PSI some: share of the tick a task waited
//	                             for I/O
//	/proc/<pid>/io               read_bytes + write_bytes of every process:
//	                             who did the tick's storage I/O (procio.go)
//	<cgroup>/cpu.stat            throttled time of the measured cgroup
//	                             (v1 throttled_time ns, v2 throttled_usec)
//	/proc/<pid>/task/*/schedstat run delay: time the measured processes'
//	                             threads sat runnable on a run queue
//
// CPU shares follow sysstat's mpstat: per-CPU deltas in jiffies; guest and
// guest_nice are already inside user and nice, so they are left out of the
// total; the aggregate is the sum of the per-CPU deltas of the CPUs online at
// both readings, not the "cpu" line, so a CPU going offline cannot skew it.
// Where mpstat and this package differ it is said at the function.
//
// A source that is unavailable (no PSI in the kernel, no cgroup found, no
// measured process) is nil in the sample, never 0. /proc and the cgroup root
// are configurable, so tests read fixture trees (testdata/) captured from a
// real machine.
//
// Run delay and throttled time are credited by the kernel when a wait ends
// (the thread gets the CPU, the cgroup is unthrottled), so a wait spanning a
// tick boundary lands whole in the later tick: per tick these two figures
// are lumpy; summed over a run they are exact.
//
// The sampler runs beside the load, so its own cost is itself interference:
// a reading is a few small file reads per source and per measured thread.
// BenchmarkSample on the 2-vCPU development VM, busy with other builds:
// 120–180 µs, 193 allocations (36 KB) per reading, most of it syscalls and
// procfs parsing the long "intr" line of /proc/stat; that is under 0.02 % of
// a core at 1 s ticks and 0.2 % at 100 ms. The timed fixed work adds ~80 µs
// to each reading, and the whose-CPU ledger's table (proctable.go) costs
// more, per process on the host.
//
// Beside the counters, each reading times a small fixed piece of CPU work
// of tare's own (fixedwork.go): a CPU that runs slower than it did, which
// no counter shows, takes longer.
//
// Kernel documentation of the files read:
//   - /proc/stat: https://docs.kernel.org/filesystems/proc.html (1.8)
//   - PSI: https://docs.kernel.org/accounting/psi.html
//   - cgroup v1 CFS bandwidth: https://docs.kernel.org/scheduler/sched-bwc.html
//   - cgroup v2 cpu.stat: https://docs.kernel.org/admin-guide/cgroup-v2.html
//   - schedstat: https://docs.kernel.org/scheduler/sched-stats.html
//   - /proc/<pid>/io: https://docs.kernel.org/filesystems/proc.html (3.3)
package host
