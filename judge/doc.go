// Package judge turns a run's figures and host signals into a verdict a
// person can act on: clean, suspect or polluted, with every signal that
// fired, its figure and its threshold, and advice that never recommends
// scaling up from a polluted run.
//
// The signals, most reliable first:
//
//  1. steal: the hypervisor gave this VM's CPU to someone else;
//  2. throttling: the measured cgroup ran out of CPU quota;
//  3. run delay: the measured processes waited on a run queue inside the guest;
//  4. latency moves while the work in the system does not, more than
//     chance gives ticks of their sizes: the host, not the code;
//  5. generator starved: tare itself was short of CPU and invented latency.
//
// Signals 1, 2 and 5 make a run polluted; 3 and 4 make it suspect. Before
// them comes failures: a run in which no request succeeded is suspect (its
// figures describe no service), and one in which most failed says so
// beside the level.
//
// Across runs, Protocol judges a comparison of the three-window protocol:
// host-variable when a metric diverges between windows by more than the
// threshold (30 %), by more than the latency floor and beyond noise (the
// interval of the test on requests excludes no difference); inconclusive
// when one is above threshold and floor on too few requests to tell, with
// how many to run; reproducible otherwise. Then the decision rules against
// an SLO (off-peak over it: the code; peak over it alone: headroom or
// another host); capacity as a range, by what was measured, with the
// windows where the host was not quietest or busiest when expected; and
// what changed in each window's whose-CPU ledger against the quietest. Step and Search are the capacity sweep:
// when a step saturated, and which rate to try next.
//
// judge applies thresholds; the statistics it reads (the latency signal's
// permutation test, the power of a comparison, medians) are stats'.
package judge
