// Package arrival generates the arrival times of an open-loop load: when each
// request or job should start, as an offset from the start of the run.
//
// Three processes are provided, all with the same mean rate λ:
//
//	constant   gap = 1/λ exactly; the i-th arrival (from 0) is at i/λ
//	poisson    gaps ~ Exp(λ): memoryless, CV² = 1
//	gamma(k)   gaps ~ Gamma(shape k, scale 1/(λk)): mean 1/λ, CV² = 1/k
//
// The gamma burstiness k follows vLLM's benchmark: k = 1 is Poisson, k < 1
// clusters arrivals into bursts separated by lulls, k > 1 spaces them more
// evenly than Poisson, and k → ∞ tends to constant.
//
// NewStaged ramps any of the three through stages, k6's ramping arrival
// rate: the rate moves linearly within each stage, and the process runs on
// the clock Λ(t) = ∫λ (time rescaling), so a staged Poisson schedule is a
// non-homogeneous Poisson process and gamma and constant keep their shape
// at every instant's rate.
//
// Assumptions, stated so a reader can check them against a real workload:
//
//   - Arrivals are independent of responses (an open loop): a slow target
//     never delays the next arrival. That is what users of a shared service
//     do, and it is why tare measures latency from the scheduled time.
//   - Gaps are independent and identically distributed (a renewal process):
//     no daily cycle, no correlation between consecutive gaps.
//   - A process starts at offset 0. Constant fires its first arrival at 0;
//     poisson and gamma fire theirs one random gap after 0, so the expected
//     number of arrivals in [0, T) is λT for all three.
//
// Times never drift. Each offset is computed from the start of the run (a
// running float64 sum of gaps for the random processes, i/λ for constant)
// and rounded to the nanosecond only when returned; nothing sleeps, and the
// rounding error does not accumulate. The engine waits until start+offset,
// so a late wake-up delays one arrival, not all the ones after it.
//
// Random processes draw from a PCG generator (math/rand/v2) seeded from the
// seed alone, and turn its raw 64-bit outputs into uniform, exponential and
// gamma variates with this package's own code, so the same seed gives the
// same sequence on every platform and Go release: a stored run can be
// replayed exactly.
//
// A Process is not safe for concurrent use: one goroutine (the engine's
// pacer) owns it.
package arrival
