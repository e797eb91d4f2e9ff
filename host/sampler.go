package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

// Defaults and limits of a Config.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
	DefaultTick       = time.Second
	// MinTick is the shortest tick: /proc/stat counts in 10 ms jiffies, so
	// a 100 ms tick already quantises each CPU's shares to 10 %.
	MinTick = 100 * time.Millisecond
)

// maxWarnings bounds the distinct warnings a sampler keeps.
const maxWarnings = 16

// Config says what a Sampler measures. Its zero value samples the host every
// DefaultTick with no measured process (Throttled and RunDelay nil).
type Config struct {
	ProcRoot   string        // where proc is mounted; DefaultProcRoot when empty
	CgroupRoot string        // where cgroupfs is mounted; DefaultCgroupRoot when empty
	Tick       time.Duration // sampling period for Run; DefaultTick when 0, at least MinTick

	// PIDs are the measured processes: their threads' run delay is
	// RunDelay, and the cgroup of PIDs[0] is the one whose throttling is
	// Throttled unless Cgroup names another.
	PIDs []int
	// Descendants also measures every descendant of PIDs (what they
	// started), found again at every tick.
	Descendants bool
	// Cgroup names the cgroup whose throttling is measured: a directory
	// under CgroupRoot (/sys/fs/cgroup/cpu/app) or a path inside the
	// hierarchy (/app).
	Cgroup string

	// Now is the clock; time.Now when nil. Tests inject one.
	Now func() time.Time
}

// Sampler reads the host's counters and turns each pair of consecutive
// readings into a tare.HostSample. Its methods must not be called
// concurrently, except Warnings.
type Sampler struct {
	cfg    Config
	fs     procfs.FS
	tasks  *taskReader
	cgroup cgroupDir // Path is "" when no cgroup is measured
	env    tare.Env

	// prev is the reading the next sample is a delta against; cur is
	// filled by the next reading. They swap after every good sample so
	// their slices and maps are reused.
	prev, cur reading

	mu       sync.Mutex // guards warnings, added by Run's goroutine and read by its owner
	warnings []error
}

// reading is every counter the sampler reads, at one instant.
type reading struct {
	At        time.Time
	CPUs      []cpuTimes
	PSI       psiTotals
	HasPSI    bool
	Cgroup    cgroupCPUStat
	HasCgroup bool
	Tasks     map[int]uint64 // thread id → cumulative run delay, ns
	HasTasks  bool           // at least one measured process existed
}

// NewSampler checks the configuration, finds the measured cgroup and takes
// the first reading, against which the first Sample is computed. A tick
// below MinTick or a bad pid is an *tare.Error with code EINVALID; a pid or
// an explicit cgroup that does not exist, ENOTFOUND. When the cgroup of
// PIDs[0] cannot be found, throttling is not measured and Warnings says why.
func NewSampler(cfg Config) (*Sampler, error) {
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
		cfg.Tick = DefaultTick
	case cfg.Tick < MinTick:
		return nil, tare.Errorf(tare.EINVALID, "host sampling tick %v is too short: use %v or more", cfg.Tick, MinTick)
	}
	cfg.PIDs = append([]int(nil), cfg.PIDs...)
	for _, pid := range cfg.PIDs {
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
		cfg:   cfg,
		fs:    pfs,
		tasks: newTaskReader(cfg.ProcRoot, cfg.Descendants, cfg.PIDs),
		prev:  reading{Tasks: map[int]uint64{}},
		cur:   reading{Tasks: map[int]uint64{}},
	}
	switch {
	case cfg.Cgroup != "":
		if s.cgroup, err = explicitCgroup(cfg.CgroupRoot, cfg.Cgroup); err != nil {
			return nil, tare.Errorf(tare.ENOTFOUND, "%v", err)
		}
	case len(cfg.PIDs) > 0:
		s.cgroup, err = pidCgroup(pfs, cfg.CgroupRoot, cfg.PIDs[0])
		if err != nil {
			s.warn(fmt.Errorf("cgroup throttling not measured: cgroup of pid %d: %w", cfg.PIDs[0], err))
		}
	}
	if err := s.begin(cfg.Now()); err != nil {
		return nil, err
	}
	if s.cgroup.Path != "" && !s.prev.HasCgroup {
		s.warn(fmt.Errorf("cgroup throttling not measured: %s/cpu.stat has no throttling counters (on cgroup v2, enable the cpu controller in the parent's cgroup.subtree_control)", s.cgroup.Path))
	}
	version := s.cgroup.Version
	if version == "" {
		version = cgroupLayout(cfg.CgroupRoot)
	}
	s.env = readEnv(pfs, cfg.ProcRoot, len(s.prev.CPUs), version, s.prev.HasPSI)
	return s, nil
}

// Env describes the machine: hostname, online vCPUs, kernel, cgroup version
// of the measured cgroup, whether PSI and a hypervisor are present.
func (s *Sampler) Env() tare.Env { return s.env }

// Tick is the sampling period Run uses.
func (s *Sampler) Tick() time.Duration { return s.cfg.Tick }

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
	hs, err := diff(&s.prev, &s.cur)
	if err != nil {
		return tare.HostSample{}, err
	}
	s.prev, s.cur = s.cur, s.prev
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

	r.PSI, r.HasPSI, err = readPSI(s.fs)
	if err != nil {
		s.warn(err)
	}

	r.HasCgroup = false
	if s.cgroup.Path != "" {
		st, err := readCgroupCPUStat(s.cgroup.Path)
		if err != nil {
			s.warn(err)
		}
		r.Cgroup, r.HasCgroup = st, err == nil && (st.HasThrottling || st.HasPeriods)
	}

	r.HasTasks = false
	if len(s.cfg.PIDs) > 0 {
		alive, err := s.tasks.read(s.cfg.PIDs, r.Tasks)
		if err != nil {
			s.warn(err)
		}
		r.HasTasks = err == nil && alive > 0
	}
	return nil
}

// diff computes the sample between two readings. It is pure: everything it
// needs is in the readings.
func diff(prev, cur *reading) (tare.HostSample, error) {
	tick := cur.At.Sub(prev.At)
	if tick <= 0 {
		return tare.HostSample{}, fmt.Errorf("sample at %s is not after the previous one at %s",
			cur.At.Format(time.RFC3339Nano), prev.At.Format(time.RFC3339Nano))
	}
	cpu, per, err := cpuShares(prev.CPUs, cur.CPUs, make([]tare.CPUShares, 0, len(cur.CPUs)))
	if err != nil {
		return tare.HostSample{}, fmt.Errorf("sample %v after the previous one: %w", tick, err)
	}
	hs := tare.HostSample{Start: prev.At, End: cur.At, CPU: cpu, PerCPU: per}
	if prev.HasPSI && cur.HasPSI {
		hs.PSISome, hs.PSIFull = psiShares(prev.PSI, cur.PSI, tick)
	}
	if prev.HasCgroup && cur.HasCgroup {
		hs.Throttled = throttleOf(prev.Cgroup, cur.Cgroup, tick).Time
	}
	if prev.HasTasks && cur.HasTasks {
		hs.RunDelay = runDelayShare(runDelayDelta(prev.Tasks, cur.Tasks, tick), tick)
	}
	return hs, nil
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
