// Package schedprobe is the scheduler probe: an eBPF program on the
// scheduler's switch, wake-up, migration and fork tracepoints that counts,
// for the threads of the watched processes, how long each waited for a CPU
// (from becoming runnable, or being preempted, to running) and who held
// that CPU meanwhile: which process (its tgid and command, short-lived ones
// included), a watched process, a kernel thread, or nobody (the idle task:
// wake-up latency). A wait behind a watched thread while a process nobody
// watches held another CPU the waiter may run on is charged to that
// process, for that part: it crowded the waiter off the CPU it held. It
// is how tare measures blame rather than estimate it (docs/verdict.md).
//
// It needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF
// (/sys/kernel/btf/vmlinux) and BPF atomics (5.12 or later); Open says
// which is missing. The program is built from bpf/probe.bpf.c by go generate
// (bpf2go, with clang and libbpf-dev) and committed, so go build needs no
// C compiler. This package is the only importer of github.com/cilium/ebpf.
//
// The counts live in maps read every tick: nothing is lost to a full
// buffer at any switch rate. What is lost (a map full, a run of the
// program skipped) is counted, and Read returns it. Where asked
// (Options.Stretches), each charge of a floor or more is also passed on
// as a Stretch through a ring buffer, which a goroutine drains.
//
// The package also holds tare's other eBPF program, the connection tracer
// of the system under test's process graph (connect.go).
package schedprobe

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Groups is how many groups of waiters the probe keeps apart: a watched
// process's threads wait in the group Watch gave it.
const Groups = 8

// Kind is what held a CPU while a watched thread waited for it.
type Kind uint8

// The kinds of holder, as bpf/probe.bpf.c's enum holder_kind.
const (
	Other   Kind = iota // a process nobody watches
	Watched             // a watched process, of Holder.Group
	Kernel              // a kernel thread
	Idle                // the idle task: wake-up latency, nobody in the way
)

// Holder is who held a CPU.
type Holder struct {
	Kind  Kind
	Group int    // the holder's own group, when Kind is Watched
	TGID  int    // its process; 0 for Idle
	Comm  string // its process's command (the thread group leader's comm)
	// Ancestors are the processes an Other holder descended from when it
	// was first charged: its parent, the parent's parent, and so on; 0
	// past init or past the Ancestry nearest. A child forked before its
	// parent was watched, and gone before the next Watch could name it
	// (a database's backend for one connection), is told by its parent.
	Ancestors [Ancestry]int
}

// Charge is wait of a group's threads behind one holder.
type Charge struct {
	Group  int // the waiters' group
	Holder Holder
	Wait   time.Duration
}

// Counts are what the probe counted between two Reads.
type Counts struct {
	Charges []Charge
	// OthersByCPU is the wait charged to Other holders on each CPU, indexed
	// by CPU number: where the neighbours were in the way (a crowd's, on
	// the CPU the neighbour held).
	OthersByCPU []time.Duration
	// Waited is the waits that ended (the thread ran), by group, in full,
	// timed by the clock the kernel times run delay by (its run queue's,
	// read at the probe's own events): what schedstat's run delay counts,
	// when it counts it.
	Waited [Groups]time.Duration
	// Timed is the same waits on the probe's clock, from the wake-up or
	// preemption to the switch, as its charges and stretches are timed.
	// It exceeds Waited by what the run queue's clock did not see: a
	// wake-up that asks its CPU to switch at once (beside a batch job, or
	// on an idle CPU) skips the clock's update at that switch
	// (rq_clock_skip_update), so the kernel counts the woken thread's wait
	// as nothing and the next wait of the thread it preempted as that much
	// longer.
	Timed [Groups]time.Duration
	// Lost counts events not counted: a map full, a run of the program
	// skipped because another was running on its CPU.
	Lost uint64
	// Unseen counts switches the kernel did not trace: the task leaving a
	// CPU was not the last one the probe saw arrive. (On the Firecracker
	// guests tare is developed on, no switch away from the guest agent's
	// threads is traced.) The probe makes up for each as best it can: the
	// task that took the CPU unseen stopped waiting at the last switch
	// seen.
	Unseen uint64
	// Switches counts the context switches seen.
	Switches uint64
	// Runtime is the CPU the probe's programs ran for, in the kernel, on
	// the switches and wake-ups of every task; counted only while the
	// kernel counts BPF run time (sysctl kernel.bpf_stats_enabled=1), and
	// RuntimeCounted says whether it did.
	Runtime        time.Duration
	RuntimeCounted bool
	// Anomalies counts waiters found where the counts did not expect them
	// (a move the probe did not see); each may misplace one charge.
	Anomalies uint64
}

// Watch is how a process's threads are watched.
type Watch struct {
	Group int // the group its threads wait in, 0 to Groups-1
	// Inherit watches the processes it forks too, in the same group, from
	// their first wake-up: a short-lived child is gone before the next
	// Watch could name it.
	Inherit bool
}

// Probe is the loaded and attached program. Its methods must not be
// called concurrently.
type Probe struct {
	objs  probeObjects
	links []link.Link

	charges  map[probeChargeKey]seen // the counters at the last Read
	others   []uint64                // per CPU
	switches []uint64                // per CPU
	waited   [Groups]time.Duration   // Counts.Waited since Open, at the last Read
	timed    [Groups]time.Duration   // Counts.Timed since Open, at the last Read
	counters [nCounters]uint64
	misses   uint64
	runtime  time.Duration
	watching map[uint32]probeWatch // what Watch put in the watched map
	ncpu     int
	cpus     [Groups]uint64 // what Watch put in the group_cpus map

	stretches *stretchReader // nil unless Options.Stretches
	refused   uint64         // the ring buffer's refusals at the last Stretches
}

// The probe's counters, as bpf/probe.bpf.c's enum counter.
const (
	lostStretches = 4 // the stretches ring buffer was full
	nCounters     = 5
)

// Options are what Open sets up beyond the counts; the zero value asks
// for nothing more.
type Options struct {
	// Stretches are the groups of waiters whose charges are passed on,
	// each as a Stretch (Probe.Stretches); none when empty.
	Stretches []int
	// WaitFloor is the shortest charge passed on; 0 is the program's
	// default, 20 µs (tare.WaitFloor).
	WaitFloor time.Duration
	// KernelTypes, when not nil, are the kernel's types shared with the
	// other programs loaded with them (OpenConnectsWith).
	KernelTypes *KernelTypes
}

// seen is a charge counter at the last Read, and how many Reads in a row
// found it unchanged: after idleReads the entry is deleted, so the map
// holds only the holders of the last seconds.
type seen struct {
	ns   uint64
	idle int
}

const idleReads = 2

// ErrUnavailable is wrapped by every error of Open: the probe cannot run
// here, and the error says why.
var ErrUnavailable = errors.New("scheduler probe unavailable")

// Expected says why the probe is not expected to load here: not root, or
// a kernel without BTF; nil where Open should succeed, and a failure of it
// is a fault. Tests that need the probe skip with its reason.
func Expected() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root (the probe needs root, or CAP_BPF and CAP_PERFMON)", ErrUnavailable)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux: %w)", ErrUnavailable, err)
	}
	return nil
}

// Open loads the program and attaches it to the scheduler's tracepoints.
// Every error wraps ErrUnavailable and says what is missing: root (or
// CAP_BPF and CAP_PERFMON), a kernel with BTF, BPF atomics.
func Open() (*Probe, error) { return OpenWith(Options{}) }

// OpenWith is Open, with the stretches o asks for.
func OpenWith(o Options) (*Probe, error) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux: %w)", ErrUnavailable, err)
	}
	// Before Linux 5.11 BPF memory counts against RLIMIT_MEMLOCK.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raise the locked-memory limit: %w", ErrUnavailable, err)
	}
	spec, err := loadProbe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	spec.Maps[probeMapCpus].MaxEntries = uint32(ncpu)
	var groups uint8
	for _, g := range o.Stretches {
		if g < 0 || g >= Groups {
			return nil, fmt.Errorf("%w: stretches of group %d: want 0 to %d", ErrUnavailable, g, Groups-1)
		}
		groups |= 1 << g
	}
	if err := spec.Variables[probeVarNrCpus].Set(uint32(ncpu)); err != nil {
		return nil, fmt.Errorf("%w: set the number of CPUs: %w", ErrUnavailable, err)
	}
	if err := spec.Variables[probeVarStretchGroups].Set(groups); err != nil {
		return nil, fmt.Errorf("%w: set the stretches' groups: %w", ErrUnavailable, err)
	}
	if o.WaitFloor > 0 {
		if err := spec.Variables[probeVarWaitFloorNs].Set(uint64(o.WaitFloor)); err != nil {
			return nil, fmt.Errorf("%w: set the stretches' floor: %w", ErrUnavailable, err)
		}
	}
	p := &Probe{
		charges:  map[probeChargeKey]seen{},
		others:   make([]uint64, ncpu),
		switches: make([]uint64, ncpu),
		watching: map[uint32]probeWatch{},
		ncpu:     ncpu,
	}
	if err := spec.LoadAndAssign(&p.objs, o.KernelTypes.options()); err != nil {
		return nil, fmt.Errorf("%w: load the eBPF program: %w", ErrUnavailable, explain(err))
	}
	for name, prog := range map[string]*ebpf.Program{
		"sched_switch":       p.objs.OnSwitch,
		"sched_wakeup":       p.objs.OnWakeup,
		"sched_wakeup_new":   p.objs.OnWakeupNew,
		"sched_migrate_task": p.objs.OnMigrate,
		"sched_process_fork": p.objs.OnFork,
	} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: prog})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%w: attach to the %s tracepoint: %w", ErrUnavailable, name, explain(err))
		}
		p.links = append(p.links, l)
	}
	if groups != 0 {
		rd, err := ringbuf.NewReader(p.objs.Stretches)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%w: read the stretches' ring buffer: %w", ErrUnavailable, err)
		}
		p.stretches = startStretches(rd)
	}
	// The counters start at zero, but a first Read sets the baseline all
	// the same: the deltas of every Read are since the one before.
	if _, err := p.Read(); err != nil {
		p.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return p, nil
}

// explain adds what a permission error means here.
func explain(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, ebpf.ErrNotSupported) && os.Geteuid() != 0 {
		return fmt.Errorf("%w (tare needs root, or CAP_BPF and CAP_PERFMON, to read the scheduler's events)", err)
	}
	return err
}

// Close detaches the program, stops reading its stretches and frees its
// maps.
func (p *Probe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	if p.stretches != nil {
		errs = append(errs, p.stretches.stop())
		p.stretches = nil
	}
	errs = append(errs, p.objs.Close())
	return errors.Join(errs...)
}

// Watch makes procs (tgid → how) the watched processes, in place of the
// previous set. A thread already waiting keeps its group until it runs.
// The children the program added on its own (Watch.Inherit) stay while
// they live, until a Watch names them or they exit.
func (p *Probe) Watch(procs map[int]Watch) error {
	var errs []error
	for tgid, w := range procs {
		if w.Group < 0 || w.Group >= Groups {
			return fmt.Errorf("watch process %d in group %d: want 0 to %d", tgid, w.Group, Groups-1)
		}
		v := probeWatch{Group: uint8(w.Group)}
		if w.Inherit {
			v.Inherit = 1
		}
		key := uint32(tgid)
		if old, ok := p.watching[key]; ok && old == v {
			continue
		}
		if err := p.objs.Watched.Put(key, v); err != nil {
			errs = append(errs, fmt.Errorf("watch process %d: %w", tgid, err))
			continue
		}
		p.watching[key] = v
	}
	for key := range p.watching {
		if _, ok := procs[int(key)]; !ok {
			if err := p.objs.Watched.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("stop watching process %d: %w", key, err))
			}
			delete(p.watching, key)
		}
	}
	errs = append(errs, p.allow(procs))
	// Children the program watched at their fork: kept while they live.
	var (
		key   uint32
		value probeWatch
		gone  []uint32
	)
	it := p.objs.Watched.Iterate()
	for it.Next(&key, &value) {
		if _, ok := p.watching[key]; !ok && !alive(int(key)) {
			gone = append(gone, key)
		}
	}
	if err := it.Err(); err != nil {
		errs = append(errs, fmt.Errorf("list the watched processes: %w", err))
	}
	for _, key := range gone {
		if err := p.objs.Watched.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("stop watching process %d: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// allow tells the program the CPUs each group's threads may run on: the
// union of its processes' affinities (the main thread's, which its
// threads inherit unless they were set apart), or any where one cannot
// be read (a process gone since counts for none). A wait behind the group's own threads is a neighbour's only
// where the neighbour held a CPU the waiter could have run on.
func (p *Probe) allow(procs map[int]Watch) error {
	var (
		cpus    [Groups]uint64
		unbound [Groups]bool
		set     unix.CPUSet
	)
	for tgid, w := range procs {
		if unbound[w.Group] {
			continue
		}
		switch err := unix.SchedGetaffinity(tgid, &set); {
		case errors.Is(err, unix.ESRCH):
			continue // gone since: it runs nowhere
		case err != nil:
			unbound[w.Group] = true // not ours to read: no bound
			continue
		}
		for c := range min(p.ncpu, 64) {
			if set.IsSet(c) {
				cpus[w.Group] |= 1 << c
			}
		}
	}
	all := uint64(1)<<min(p.ncpu, 64) - 1
	if p.ncpu >= 64 {
		all = ^uint64(0)
	}
	var errs []error
	for g := range Groups {
		if unbound[g] || cpus[g] == all {
			cpus[g] = 0 // the program's "any"
		}
		if cpus[g] == p.cpus[g] {
			continue
		}
		if err := p.objs.GroupCpus.Put(uint32(g), cpus[g]); err != nil {
			errs = append(errs, fmt.Errorf("set the CPUs of group %d: %w", g, err))
			continue
		}
		p.cpus[g] = cpus[g]
	}
	return errors.Join(errs...)
}

// Waited returns the waits that ended since Open, in full, by group, on
// the run queue's clock (Counts.Waited): what schedstat's run delay
// counts, when it counts it. It is one lookup, for a caller to read right
// beside schedstat.
func (p *Probe) Waited() ([Groups]time.Duration, error) {
	waited, _, err := p.waits()
	return waited, err
}

// waits returns the waits that ended since Open, by group, on the run
// queue's clock and on the probe's.
func (p *Probe) waits() (waited, timed [Groups]time.Duration, err error) {
	var w probeWaits
	if err := p.objs.Waited.Lookup(uint32(0), &w); err != nil {
		return waited, timed, fmt.Errorf("read the scheduler probe's waits: %w", err)
	}
	for g := range Groups {
		waited[g], timed[g] = time.Duration(w.Clocked[g]), time.Duration(w.Ns[g])
	}
	return waited, timed, nil
}

// Watching reports whether the program watches process tgid as w says,
// whether Watch named it or the program added it at its fork.
func (p *Probe) Watching(tgid int, w Watch) bool {
	var v probeWatch
	if err := p.objs.Watched.Lookup(uint32(tgid), &v); err != nil {
		return false
	}
	return int(v.Group) == w.Group && (v.Inherit == 1) == w.Inherit
}

// Exit is a watched thread that exited, and its run delay as schedstat
// showed it last: /proc no longer shows it once the thread is gone, and
// the waits the probe counted of it are in Waited.
type Exit struct {
	TID, TGID int
	Group     int
	RunDelay  time.Duration // the thread's whole run delay, since it started
}

// Exited returns the watched threads that exited since the last call (or
// Open), and forgets them. A thread whose exit found the map full is not
// among them: it is gone without a record.
func (p *Probe) Exited() ([]Exit, error) {
	var (
		tid  uint32
		e    probeExit
		out  []Exit
		tids []uint32
	)
	it := p.objs.Exited.Iterate()
	for it.Next(&tid, &e) {
		out = append(out, Exit{TID: int(tid), TGID: int(e.Tgid), Group: int(e.Group), RunDelay: time.Duration(e.RunDelay)})
		tids = append(tids, tid)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the scheduler probe's exited threads: %w", err)
	}
	for _, tid := range tids {
		if err := p.objs.Exited.Delete(tid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, fmt.Errorf("forget exited thread %d: %w", tid, err)
		}
	}
	return out, nil
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Read returns what the probe counted since the previous Read (or Open).
func (p *Probe) Read() (Counts, error) {
	var c Counts
	waited, timed, err := p.waits()
	if err != nil {
		return Counts{}, err
	}
	for g := range Groups {
		c.Waited[g], c.Timed[g] = waited[g]-p.waited[g], timed[g]-p.timed[g]
	}
	p.waited, p.timed = waited, timed
	var (
		key   probeChargeKey
		value probeCharge
		idle  []probeChargeKey
	)
	live := make(map[probeChargeKey]bool, len(p.charges))
	it := p.objs.Charges.Iterate()
	for it.Next(&key, &value) {
		live[key] = true
		before, ok := p.charges[key]
		d := value.WaitNs - before.ns
		switch {
		case !ok:
			d = value.WaitNs
		case value.WaitNs < before.ns: // made again since: a new counter
			d = value.WaitNs
		}
		now := seen{ns: value.WaitNs}
		if d == 0 {
			now.idle = before.idle + 1
			if now.idle >= idleReads {
				idle = append(idle, key)
			}
		} else {
			c.Charges = append(c.Charges, Charge{
				Group:  int(key.Group),
				Holder: holderOf(key, value),
				Wait:   time.Duration(d),
			})
		}
		p.charges[key] = now
	}
	if err := it.Err(); err != nil {
		return Counts{}, fmt.Errorf("read the scheduler probe's charges: %w", err)
	}
	for k := range p.charges {
		if !live[k] {
			delete(p.charges, k)
		}
	}
	// A holder in nobody's way for a while is forgotten, so that the map
	// keeps only the recent ones; if it is in the way again, its counter
	// starts again from 0. An increment racing the delete is lost: it
	// would need a holder idle for two ticks to be charged in the
	// microsecond between.
	for _, k := range idle {
		if err := p.objs.Charges.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return Counts{}, fmt.Errorf("forget an idle holder: %w", err)
		}
		delete(p.charges, k)
	}

	c.OthersByCPU = make([]time.Duration, len(p.others))
	for cpu := range p.others {
		var st probeCpuState
		if err := p.objs.Cpus.Lookup(uint32(cpu), &st); err != nil {
			return Counts{}, fmt.Errorf("read the scheduler probe's CPU %d: %w", cpu, err)
		}
		c.OthersByCPU[cpu] = time.Duration(st.OtherNs - p.others[cpu])
		p.others[cpu] = st.OtherNs
		c.Switches += st.Switches - p.switches[cpu]
		p.switches[cpu] = st.Switches
	}
	var counters [len(p.counters)]uint64
	for i := range counters {
		var perCPU []uint64
		if err := p.objs.Counters.Lookup(uint32(i), &perCPU); err != nil {
			return Counts{}, fmt.Errorf("read the scheduler probe's counters: %w", err)
		}
		for _, v := range perCPU {
			counters[i] += v
		}
	}
	c.Lost = counters[0] - p.counters[0] + counters[1] - p.counters[1]
	c.Unseen = counters[3] - p.counters[3]
	c.Anomalies = counters[2] - p.counters[2]

	p.counters = counters
	var (
		misses  uint64
		runtime time.Duration
	)
	for _, prog := range []*ebpf.Program{p.objs.OnSwitch, p.objs.OnWakeup, p.objs.OnWakeupNew, p.objs.OnMigrate, p.objs.OnFork} {
		st, err := prog.Stats()
		if err != nil {
			return Counts{}, fmt.Errorf("read the scheduler probe's skipped runs: %w", err)
		}
		misses += st.RecursionMisses
		runtime += st.Runtime
	}
	c.Lost += misses - p.misses
	p.misses = misses
	if b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); err == nil && string(bytes.TrimSpace(b)) == "1" {
		c.Runtime, c.RuntimeCounted = runtime-p.runtime, true
	}
	p.runtime = runtime
	slices.SortFunc(c.Charges, func(a, b Charge) int { return cmp.Compare(b.Wait, a.Wait) })
	return c, nil
}

func holderOf(k probeChargeKey, c probeCharge) Holder {
	b := make([]byte, 0, len(c.Comm))
	for _, ch := range c.Comm {
		b = append(b, byte(ch))
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	h := Holder{Kind: Kind(k.Kind), TGID: int(k.Tgid), Comm: string(b), Ancestors: asPIDs(c.Ancestors)}
	if h.Kind == Watched {
		h.Group = int(k.HolderGroup)
	}
	return h
}
