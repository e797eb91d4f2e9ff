// Package host owns /proc and the cgroup filesystem: everything tare learns
// of the machine it runs on comes through it. Its parts:
//
//   - the Sampler: every tick it reads the counters below and turns them
//     into shares of that tick (tare.HostSample);
//   - the whose-CPU ledger (ledger.go, proctable.go): each tick, the CPU of
//     every process on the host, by owner (the system under test, tare,
//     each neighbour by name and container, the kernel, steal), and the
//     blame (blame.go): whom the measured threads waited behind, measured
//     by the scheduler probe (package schedprobe, which host drives) or
//     estimated from the ledger;
//   - finding the system under test: the listeners of a loopback target's
//     port (FindService, ListenerPIDs, UnixListenerPIDs), a container
//     (FindContainer), a cgroup (CgroupPIDs), and the processes it talks
//     to while the run goes (graph.go, ConnectionPIDs);
//   - the process table as this process sees it (ProcessTable, and
//     Processes, which tells the store whether a run's writer still runs)
//     and the machine's description (tare.Env, Hostname).
//
// The sampler's sources, each a delta of cumulative counters between two
// readings:
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
// a reading is a few small file reads per source and per measured thread,
// and the ledger's read of every process's stat line. BenchmarkSample
// measures one reading, ledger included; docs/performance.md keeps the
// figure of the last measurement on an idle machine (goal 4 there: under
// 0.2 % of a core at 1 s ticks, 1 % at 100 ms); tare check --every records
// what each of its samples cost (cost_cpu_ms).
//
// Beside the counters, each reading times a small fixed piece of CPU work
// of tare's own (fixedwork.go, about 80 µs a reading): a CPU that runs
// slower than it did, which no counter shows, takes longer.
//
// Kernel documentation of the files read:
//   - /proc/stat: https://docs.kernel.org/filesystems/proc.html (1.8)
//   - PSI: https://docs.kernel.org/accounting/psi.html
//   - cgroup v1 CFS bandwidth: https://docs.kernel.org/scheduler/sched-bwc.html
//   - cgroup v2 cpu.stat: https://docs.kernel.org/admin-guide/cgroup-v2.html
//   - schedstat: https://docs.kernel.org/scheduler/sched-stats.html
//   - /proc/<pid>/io: https://docs.kernel.org/filesystems/proc.html (3.3)
package host
