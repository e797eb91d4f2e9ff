package host

import (
	"sync"
	"time"
)

// The fixed work is fixedWorkRounds passes of a multiply-and-shift mix
// over an array of fixedWorkWords words, timed fixedWorkTries times at
// each reading; the fastest try is the tick's FixedWorkUS.
//
// Cost, on the 2-vCPU development VM (AMD EPYC under KVM, load average
// 20 from other builds): the fastest of the five tries was 15.2–16.0 µs
// over 300 readings, so a reading spends ~80 µs on it, under 0.01 % of a
// core at 1 s ticks, and allocates nothing. That spread, 5 %, under that
// load, is what makes it a usable yardstick.
const (
	fixedWorkWords  = 1024 // 8 KiB: in the L1 cache of any CPU tare runs on
	fixedWorkRounds = 8
	fixedWorkTries  = 5
)

// fixedWorkData is the array the fixed work reads and writes; the sampler
// goroutine is the only one to use it (a Sampler's methods are not called
// concurrently), and the lock only keeps two samplers in one process (tests)
// from racing on it.
var (
	fixedWorkMu   sync.Mutex
	fixedWorkData [fixedWorkWords]uint64
)

// fixedWork runs the fixed piece of work on a: every pass reads and
// rewrites each word through one chain of dependent multiplies, shifts
// and xors, so it cannot be vectorised, and what it writes to a (a
// package variable, for the sampler) cannot be dropped; it has no branch
// that depends on the data: the same instructions and memory accesses
// every time, whatever a holds.
func fixedWork(a *[fixedWorkWords]uint64) {
	x := uint64(0x9e3779b97f4a7c15)
	for range fixedWorkRounds {
		for i := range a {
			x ^= a[i]
			x *= 0xff51afd7ed558ccd
			x ^= x >> 33
			a[i] = x
		}
	}
}

// timeFixedWork times the fixed work fixedWorkTries times on the calling
// goroutine and returns the fastest try.
//
// What makes it slower is the CPU running this goroutine being slower
// while it runs: a busy SMT sibling on the same physical core, a lower
// clock (power or thermal capping, a host that throttles the VM's
// frequency), a hypervisor that takes the vCPU away within a try without
// reporting steal. The fastest of a few tries leaves out a try that was
// preempted (waiting for a CPU is the run delay, measured apart), so a
// hypervisor's unreported steal shows only where it strikes every try:
// frequent short slices, as under a hypervisor's CPU cap. Its data stays
// in the core's L1 cache, so memory bandwidth and a neighbour thrashing a
// shared cache do not slow it. And it times the CPU the sampler happens to
// run on, not necessarily the ones the system under test runs on: on a
// host whose CPUs differ (big and little cores, some CPUs throttled), it
// says how one of them ran.
func timeFixedWork() time.Duration {
	fixedWorkMu.Lock()
	defer fixedWorkMu.Unlock()
	best := time.Duration(-1)
	for range fixedWorkTries {
		start := time.Now()
		fixedWork(&fixedWorkData)
		if d := time.Since(start); best < 0 || d < best {
			best = d
		}
	}
	return best
}
