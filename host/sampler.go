package host

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/schedprobe"
)

// Defaults and limits of a Config.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// minLedgerJiffies is the shortest tick, in jiffies per CPU, that gets a
// whose-CPU ledger: 5 jiffies, 50 ms.
const minLedgerJiffies = 5

// maxWarnings bounds the distinct warnings a sampler keeps.
const maxWarnings = 16

// Config says what a Sampler measures. Its zero value samples the host every
// tare.DefaultTick with no measured process (Throttled and RunDelay nil).
type Config struct {
	ProcRoot   string        // where proc is mounted; DefaultProcRoot when empty
	CgroupRoot string        // where cgroupfs is mounted; DefaultCgroupRoot when empty
	Tick       time.Duration // sampling period for Run; tare.DefaultTick when 0, at least tare.MinTick

	// SUT are the processes of the system under test, each with its threads
	// and every descendant, found again at every tick: their run delay is
	// SUTRunDelay, their CPU the ledger's SystemUnderTest, and the cgroup
	// of SUT[0] is measured for throttling unless Cgroup names another.
	// From them the sampler follows, transitively, the connections they
	// open to other processes of this host (see Graph).
	SUT []int
	// Parts are SUT by how each part was found (the first nodes of the
	// graph): the listening socket's holders, --pid, a cgroup. When empty,
	// SUT is one part.
	Parts []Part
	// Exclude takes processes out of the system under test, by pid or by
	// command name, with their descendants: the user's word wins over
	// what tare finds.
	Exclude []string
	// Tare are tare's own processes, their threads but not their
	// descendants: what tare starts beside the test (the demo's neighbour)
	// is not tare. TareTrees are processes tare started as part of the load
	// (the command tare watch runs), with their descendants. Their run
	// delay is TareRunDelay, and the cgroup of the first is measured too.
	Tare, TareTrees []int
	// Cgroup names the system under test's cgroup, whose throttling is
	// measured: a directory under CgroupRoot (/sys/fs/cgroup/cpu/app) or a
	// path inside the hierarchy (/app).
	Cgroup string
	// Runtimes says where the container runtimes keep the names and
	// images of their containers; its zero value, in their default places.
	Runtimes Runtimes

	// SchedProbe measures blame with the scheduler probe (host/blame.go)
	// where it can run: as root on a kernel with BTF. Otherwise, and by
	// default, blame is estimated from the ledger.
	SchedProbe bool
	// WatchBusiest has the probe watch that many of the busiest other
	// processes too (six at most), and say whom each waited behind
	// (tare check).
	WatchBusiest int

	// Now is the clock; time.Now when nil. Tests inject one.
	Now func() time.Time
	// Getenv reads the environment the run's Env records (TARE_HOSTNAME,
	// the pod's variables); os.Getenv when nil.
	Getenv func(string) string
}

// Sampler reads the host's counters and turns each pair of consecutive
// readings into a tare.HostSample. Its methods must not be called
// concurrently, except Warnings.
type Sampler struct {
	cfg       Config
	fs        procfs.FS
	procs     *procTable
	members   *members
	sutTasks  *taskReader
	tareTasks *taskReader
	pids      []int       // scratch for the member lists
	cgroups   []cgroupDir // the system under test's, then tare's when it is another one
	env       tare.Env

	// prev is the reading the next sample is a delta against; cur is
	// filled by the next reading. They swap after every good sample so
	// their slices and maps are reused.
	prev, cur reading

	mu       sync.Mutex // guards warnings, added by Run's goroutine and read by its owner
	warnings []error

	treesMu sync.Mutex // guards trees, added to by AddTareTree while Run samples
	trees   []int      // Config.TareTrees, and those added since

	// graph finds the processes the system under test calls, at every
	// reading at first and then every lookEvery readings.
	graph    *graph
	connects *schedprobe.Connects // the connection tracer; nil without eBPF
	readings int
	called   []int          // the roots of the nodes found, for Called; guarded by mu
	nodes    []tare.SUTNode // the graph at the last reading, for Graph; guarded by mu

	blame *blamer // the scheduler probe, when it runs
}

// openConnects loads the connection tracer; a test makes it fail.
var openConnects = schedprobe.OpenConnectsWith

// reading is every counter the sampler reads, at one instant.
type reading struct {
	At        time.Time
	CPUs      []cpuTimes
	PSI       psiTotals
	HasPSI    bool
	PSIIO     psiTotals // of /proc/pressure/io
	HasPSIIO  bool
	Cgroup    [2]cgroupCPUStat // of Sampler.cgroups, in order
	HasCgroup [2]bool
	SUT, Tare map[int]uint64 // thread id → cumulative run delay, ns
	SUTOwner  map[int]int    // thread id of the system under test → its process
	TareOwner map[int]int    // thread id of tare → its process
	// Final are the threads of SUT and Tare that exited, whose run delay
	// the scheduler probe kept at their last switch: their final value,
	// which /proc no longer shows.
	Final    map[int]bool
	HasSUT   bool // at least one process of the system under test existed
	HasTare  bool
	Procs    map[int]procStat // every process, for the ledger
	HasProcs bool
	Uptime   uint64 // clock ticks since boot
	// FixedWork is how long tare's fixed piece of CPU work took at this
	// reading, the fastest of a few tries (timeFixedWork).
	FixedWork time.Duration
}

func newReading() reading {
	return reading{SUT: map[int]uint64{}, Tare: map[int]uint64{}, SUTOwner: map[int]int{}, TareOwner: map[int]int{}, Final: map[int]bool{}, Procs: map[int]procStat{}}
}

// NewSampler checks the configuration, finds the measured cgroups and takes
// the first reading, against which the first Sample is computed. A tick
// below tare.MinTick or a bad pid is an *tare.Error with code EINVALID; a pid or
// an explicit cgroup that does not exist, ENOTFOUND. When the cgroup of a
// measured process cannot be found, its throttling is not measured and
// Warnings says why.
func NewSampler(cfg Config) (*Sampler, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = DefaultProcRoot
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Tick == 0:
		cfg.Tick = tare.DefaultTick
	case cfg.Tick < tare.MinTick:
		return nil, tare.Errorf(tare.EINVALID, "host sampling tick %v is too short: use %v or more", cfg.Tick, tare.MinTick)
	}
	cfg.SUT = slices.Clone(cfg.SUT)
	if len(cfg.Parts) == 0 && len(cfg.SUT) > 0 {
		cfg.Parts = []Part{{PIDs: cfg.SUT}}
	}
	cfg.Tare = slices.Clone(cfg.Tare)
	cfg.TareTrees = slices.Clone(cfg.TareTrees)
	for _, pid := range slices.Concat(cfg.SUT, cfg.Tare, cfg.TareTrees) {
		if pid <= 0 {
			return nil, tare.Errorf(tare.EINVALID, "pid %d is not a process id: want a positive integer", pid)
		}
		if !isDir(filepath.Join(cfg.ProcRoot, strconv.Itoa(pid))) {
			return nil, tare.Errorf(tare.ENOTFOUND, "process %d not found in %s", pid, cfg.ProcRoot)
		}
	}
	pfs, err := procfs.NewFS(cfg.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("open proc filesystem %q: %w", cfg.ProcRoot, err)
	}
	s := &Sampler{
		trees:     cfg.TareTrees,
		cfg:       cfg,
		fs:        pfs,
		procs:     newProcTable(cfg.ProcRoot),
		members:   newMembers(),
		graph:     newGraph(cfg.ProcRoot, cfg.Parts),
		sutTasks:  newTaskReader(cfg.ProcRoot),
		tareTasks: newTaskReader(cfg.ProcRoot),
		prev:      newReading(),
		cur:       newReading(),
	}
	s.members.excluded = excluder(cfg.Exclude)
	if !onProcfs(cfg.ProcRoot) {
		s.procs.maxHeld = 0
	}
	s.members.containers = newContainerIndex(cfg.ProcRoot, cfg.Runtimes)
	var sutCgroup cgroupDir
	switch {
	case cfg.Cgroup != "":
		if sutCgroup, err = explicitCgroup(cfg.CgroupRoot, cfg.Cgroup); err != nil {
			return nil, tare.Errorf(tare.ENOTFOUND, "%w", err)
		}
	case len(cfg.SUT) > 0:
		if sutCgroup, err = pidCgroup(pfs, cfg.CgroupRoot, cfg.SUT[0]); err != nil {
			s.warn(fmt.Errorf("throttling of the system under test not measured: cgroup of pid %d: %w", cfg.SUT[0], err))
		}
	}
	if sutCgroup.Path != "" {
		s.cgroups = append(s.cgroups, sutCgroup)
	}
	if own := slices.Concat(cfg.Tare, cfg.TareTrees); len(own) > 0 {
		c, err := pidCgroup(pfs, cfg.CgroupRoot, own[0])
		switch {
		case err != nil:
			s.warn(fmt.Errorf("throttling of tare not measured: cgroup of pid %d: %w", own[0], err))
		case c.Path != sutCgroup.Path:
			s.cgroups = append(s.cgroups, c)
		}
	}
	// The probe and the connection tracer parse the kernel's types once.
	types := schedprobe.NewKernelTypes()
	s.blame = newBlamer(cfg, types)
	// The kernel's own word on the connections the system under test
	// opens, where tare may load eBPF; a look at the socket tables
	// otherwise. Opened after every check that can fail, so that none
	// leaves it loaded.
	// Where the tracer is expected to load, one that does not is said,
	// as the scheduler probe's is, and the run goes on without it.
	if len(cfg.Parts) > 0 && cfg.ProcRoot == DefaultProcRoot && os.Geteuid() == 0 {
		c, err := openConnects(types)
		switch {
		case err == nil:
			s.connects = c
			s.graph.drain = c.Drain
		case schedprobe.ConnectsExpected() == nil:
			s.warn(fmt.Errorf("%w: the system under test's graph is found from its open sockets alone, and misses connections that close between two looks", err))
		}
	}
	if err := s.begin(cfg.Now()); err != nil {
		s.Close()
		return nil, err
	}
	version := ""
	for i, c := range s.cgroups {
		if !s.prev.HasCgroup[i] {
			s.warn(fmt.Errorf("cgroup throttling not measured: %s/cpu.stat has no throttling counters (on cgroup v2, enable the cpu controller in the parent's cgroup.subtree_control)", c.Path))
		}
		version = cmp.Or(version, c.Version)
	}
	if version == "" {
		version = cgroupLayout(cfg.CgroupRoot)
	}
	s.env = readEnv(pfs, cfg.ProcRoot, cfg.Getenv, len(s.prev.CPUs), version, s.prev.HasPSI, cfg.Runtimes)
	if hp := s.env.HostProcesses; hp != nil && !*hp {
		s.warn(ownPIDNamespace(s.env))
	}
	return s, nil
}

// Env describes the machine: hostname, online vCPUs, kernel, cgroup version
// of the measured cgroup, whether PSI and a hypervisor are present.
func (s *Sampler) Env() tare.Env { return s.env }

// AddTareTree counts pid and its descendants as tare from the next reading
// on: a load tool tare started once sampling had begun (tare watch). It
// may be called while Run samples.
func (s *Sampler) AddTareTree(pid int) {
	s.treesMu.Lock()
	defer s.treesMu.Unlock()
	s.trees = append(slices.Clip(s.trees), pid)
}

// Close releases the files the sampler keeps open between readings, and
// the eBPF programs.
func (s *Sampler) Close() {
	s.procs.close()
	if s.connects != nil {
		s.connects.Close()
	}
	if err := s.blame.close(); err != nil {
		s.warn(err)
	}
}

// BlameWhy says why blame is estimated: the scheduler probe is off, or
// cannot run here; "" when it runs.
func (s *Sampler) BlameWhy() string { return s.blame.why }

// Tick is the sampling period Run uses.
func (s *Sampler) Tick() time.Duration { return s.cfg.Tick }

// The system under test's connections are looked at every reading for
// the first lookFirst readings, then every lookEvery: what it calls joins
// it within the first ticks of the first call, and a look costs a listing
// of its descriptors.
const (
	lookFirst = 8
	lookEvery = 2
)

// Called returns the processes of this host that the system under test
// called (it held a connection to their listening socket) and that have
// been counted with it since: its model server, its app server behind a
// proxy, its local database or cache. Sorted; none when it called none,
// or has none.
func (s *Sampler) Called() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.called)
}

// Graph returns the system under test's process graph as of the last
// reading: the parts known before the run, then each node it called,
// with how it was reached and its processes. The figures of each node
// come from the samples' ledgers (CPUBy.SUTNodes), by index.
func (s *Sampler) Graph() []tare.SUTNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.nodes)
}

// Warnings are the distinct non-fatal problems met so far: a source that
// could not be read is nil in the samples, and the reason is here.
func (s *Sampler) Warnings() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.warnings...)
}

// Sample reads the counters at now and returns the tick since the previous
// reading. When /proc/stat cannot be read, or no CPU time elapsed, it
// returns an error and keeps the previous reading, so the next sample
// spans both ticks.
func (s *Sampler) Sample(now time.Time) (tare.HostSample, error) {
	if err := s.read(&s.cur, now); err != nil {
		return tare.HostSample{}, err
	}
	hs, err := diff(&s.prev, &s.cur, s.members, len(s.graph.nodes))
	if err != nil {
		return tare.HostSample{}, err
	}
	gone := threadsGone(&s.prev, &s.cur)
	s.prev, s.cur = s.cur, s.prev
	if hs.Blame, err = s.blame.take(hs.Start, hs.End, hs.CPUBy, gone, s.prev.Procs, s.members); err != nil {
		s.warn(fmt.Errorf("scheduler probe: %w", err))
	}
	return hs, nil
}

// Run samples every tick until ctx is done, sending each sample on out,
// which it closes when it returns. It takes a fresh first reading, so the
// first sample covers one tick however long ago the sampler was made. A
// tick whose reading fails is not sent (the next one covers it: its Start
// is the previous sample's End) and the error goes to Warnings.
func (s *Sampler) Run(ctx context.Context, out chan<- tare.HostSample) {
	defer close(out)
	if err := s.begin(s.cfg.Now()); err != nil {
		s.warn(err)
	}
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hs, err := s.Sample(s.cfg.Now())
		if err != nil {
			s.warn(err)
			continue
		}
		select {
		case out <- hs:
		case <-ctx.Done():
			return
		}
	}
}

// begin takes the reading the next sample is a delta against.
func (s *Sampler) begin(now time.Time) error {
	if err := s.read(&s.cur, now); err != nil {
		return err
	}
	s.prev, s.cur = s.cur, s.prev
	s.blame.begin(now)
	return nil
}

// read fills r with every source at now. Only /proc/stat is required; any
// other source that fails is marked absent and the reason kept in Warnings.
func (s *Sampler) read(r *reading, now time.Time) error {
	r.At = now
	cpus, err := readCPUTimes(s.fs, r.CPUs)
	if err != nil {
		return err
	}
	r.CPUs = cpus
	r.FixedWork = timeFixedWork()

	r.PSI, r.HasPSI, err = readPSI(s.fs, psiCPU)
	if err != nil {
		s.warn(err)
	}
	r.PSIIO, r.HasPSIIO, err = readPSI(s.fs, psiIO)
	if err != nil {
		s.warn(err)
	}

	for i, c := range s.cgroups {
		st, err := readCgroupCPUStat(c.Path)
		if err != nil {
			s.warn(err)
		}
		r.Cgroup[i], r.HasCgroup[i] = st, err == nil && (st.HasThrottling || st.HasPeriods)
	}

	// Who is who, from the process table, so that a worker forked mid-run
	// counts where its parent does. Without the table (a /proc that cannot
	// be listed) the named processes still count, without descendants.
	r.HasProcs = false
	if err := s.procs.read(r.Procs, s.members.measured); err != nil {
		s.warn(fmt.Errorf("whose CPU not measured: %w", err))
	} else if up, err := readUptime(s.cfg.ProcRoot); err != nil {
		s.warn(fmt.Errorf("whose CPU not measured: %w", err))
	} else {
		r.Uptime, r.HasProcs = up, true
	}
	s.treesMu.Lock()
	trees := s.trees
	s.treesMu.Unlock()
	s.members.find(r.Procs, s.graph.roots(), s.cfg.Tare, trees)
	if s.readings++; len(s.graph.nodes) > 0 && (s.readings <= lookFirst || s.readings%lookEvery == 0) {
		for hop := 0; hop < maxHops && s.graph.look(r.Procs, s.members); hop++ {
			s.members.find(r.Procs, s.graph.roots(), s.cfg.Tare, trees)
		}
	}
	if len(s.graph.nodes) > 0 {
		nodes, called := s.graph.summary(s.members, r.Procs), s.graph.called()
		s.members.containers.nameNodes(nodes, r.Procs)
		s.mu.Lock()
		s.nodes, s.called = nodes, called
		s.mu.Unlock()
	}
	// The threads that exited since the last reading are added with their
	// final run delay where the probe kept it, within the same bracket of
	// the probe's figure: their waits are in it.
	clear(r.Final)
	r.HasSUT = s.blame.around(groupSUT, func() bool {
		ok := s.readTasks(s.sutTasks, s.members.sut, r.SUT)
		maps.Copy(clearMap(r.SUTOwner), s.sutTasks.owner)
		s.blame.exited(groupSUT, r.SUT, r.SUTOwner, r.Final)
		return ok
	})
	r.HasTare = s.blame.around(groupTare, func() bool {
		ok := s.readTasks(s.tareTasks, s.members.tare, r.Tare)
		maps.Copy(clearMap(r.TareOwner), s.tareTasks.owner)
		s.blame.exited(groupTare, r.Tare, r.TareOwner, r.Final)
		return ok
	})
	if err := s.blame.read(s.members, s.cfg.Tare, r.Procs, r.HasProcs); err != nil {
		s.warn(fmt.Errorf("scheduler probe: %w", err))
	}
	return nil
}

// readTasks reads the run delay of the threads of set into dst and reports
// whether any of its processes existed.
func (s *Sampler) readTasks(tr *taskReader, set map[int]bool, dst map[int]uint64) bool {
	if len(set) == 0 {
		clear(dst)
		return false
	}
	s.pids = pidsOf(set, s.pids[:0])
	alive, err := tr.read(s.pids, dst)
	if err != nil {
		s.warn(err)
	}
	return err == nil && alive > 0
}

// diff computes the sample between two readings. It is pure: everything it
// needs is in the readings.
func diff(prev, cur *reading, m *members, nodes int) (tare.HostSample, error) {
	tick := cur.At.Sub(prev.At)
	if tick <= 0 {
		return tare.HostSample{}, fmt.Errorf("sample at %s is not after the previous one at %s",
			cur.At.Format(time.RFC3339Nano), prev.At.Format(time.RFC3339Nano))
	}
	cpu, per, all, err := cpuShares(prev.CPUs, cur.CPUs, make([]tare.CPUShares, 0, len(cur.CPUs)))
	if err != nil {
		return tare.HostSample{}, fmt.Errorf("sample %v after the previous one: %w", tick, err)
	}
	hs := tare.HostSample{Start: prev.At, End: cur.At, CPU: cpu, PerCPU: per}
	if prev.HasPSI && cur.HasPSI {
		hs.PSISome, hs.PSIFull = psiShares(prev.PSI, cur.PSI, tick)
	}
	if prev.HasPSIIO && cur.HasPSIIO {
		hs.PSIIOSome, _ = psiShares(prev.PSIIO, cur.PSIIO, tick)
	}
	for i := range cur.Cgroup {
		if prev.HasCgroup[i] && cur.HasCgroup[i] {
			t := throttleOf(prev.Cgroup[i], cur.Cgroup[i], tick).Time
			if hs.Throttled == nil || t != nil && *t > *hs.Throttled {
				hs.Throttled = t
			}
		}
	}
	if prev.HasSUT && cur.HasSUT {
		hs.SUTRunDelay = runDelayShare(runDelayDelta(prev.SUT, cur.SUT, tick, late(prev, cur, prev.SUTOwner, cur.SUTOwner)), tick)
	}
	if prev.HasTare && cur.HasTare {
		hs.TareRunDelay = runDelayShare(runDelayDelta(prev.Tare, cur.Tare, tick, late(prev, cur, prev.TareOwner, cur.TareOwner)), tick)
	}
	switch {
	case hs.SUTRunDelay != nil && hs.TareRunDelay != nil:
		hs.RunDelay = ptr(*hs.SUTRunDelay + *hs.TareRunDelay) // the sets are disjoint
	case hs.SUTRunDelay != nil:
		hs.RunDelay = ptr(*hs.SUTRunDelay)
	case hs.TareRunDelay != nil:
		hs.RunDelay = ptr(*hs.TareRunDelay)
	}
	// Process counters tick in jiffies: over a few of them (the last
	// moments of a run) the split is noise, and none is given.
	if prev.HasProcs && cur.HasProcs && all.total() >= minLedgerJiffies*uint64(max(len(per), 1)) {
		by := ledger(all, prev.Procs, cur.Procs, prev.Uptime, m, nodes)
		if prev.HasSUT && cur.HasSUT {
			skip := late(prev, cur, prev.SUTOwner, cur.SUTOwner)
			for i, d := range runDelayByNode(prev.SUT, cur.SUT, cur.SUTOwner, m.node, nodes, tick, skip) {
				by.SUTNodes[i].RunDelayPct = runDelayShare(d, tick)
			}
		}
		hs.CPUBy = &by
	}
	if prev.HasProcs && cur.HasProcs {
		hs.IOBy = ioBy(prev.Procs, cur.Procs, prev.Uptime)
	}
	if cur.FixedWork > 0 {
		hs.FixedWorkUS = ptr(float64(cur.FixedWork) / float64(time.Microsecond))
	}
	return hs, nil
}

// late is the skip of runDelayDelta between two readings, nil when the
// process table (the processes' start times) was not read at both.
func late(prev, cur *reading, prevOwner, curOwner map[int]int) func(int) bool {
	if !prev.HasProcs || !cur.HasProcs {
		return nil
	}
	return joinedLate(prevOwner, curOwner, cur.Procs, prev.Uptime)
}

// clearMap clears m and returns it.
func clearMap[K comparable, V any](m map[K]V) map[K]V {
	clear(m)
	return m
}

// warn keeps err unless one with the same message is already kept.
func (s *Sampler) warn(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.warnings) >= maxWarnings {
		return
	}
	for _, w := range s.warnings {
		if w.Error() == err.Error() {
			return
		}
	}
	s.warnings = append(s.warnings, err)
}
