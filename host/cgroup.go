package host

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// ErrParse is wrapped by every error about a file this package could not
// parse, together with the cause and the offending input.
var ErrParse = errors.New("parse error")

// cgroupCPUStat are the CFS bandwidth counters of a cgroup's cpu.stat:
//
//	v1 (cpu controller):  nr_periods, nr_throttled, throttled_time (ns)
//	v2 (unified):         nr_periods, nr_throttled, throttled_usec (µs)
//
// https://docs.kernel.org/scheduler/sched-bwc.html (v1) and
// https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files (v2).
// A v2 cgroup whose parent did not enable the cpu controller has only the
// usage_usec lines: HasThrottling is then false.
type cgroupCPUStat struct {
	Periods       uint64 // nr_periods: enforcement periods that elapsed with runnable tasks
	Throttled     uint64 // nr_throttled: periods in which the quota ran out
	ThrottledNS   uint64 // throttled_time, or throttled_usec × 1000
	HasPeriods    bool
	HasThrottling bool // a throttled_time or throttled_usec line was present
}

// parseCgroupCPUStat parses the "key value" lines of a cgroup cpu.stat file.
// Keys it does not use are skipped whatever their value, so new kernel
// fields never break it.
func parseCgroupCPUStat(b []byte) (cgroupCPUStat, error) {
	var st cgroupCPUStat
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, val, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		var dst *uint64
		scale := uint64(1)
		switch string(key) {
		case "nr_periods":
			dst, st.HasPeriods = &st.Periods, true
		case "nr_throttled":
			dst = &st.Throttled
		case "throttled_time":
			dst, st.HasThrottling = &st.ThrottledNS, true
		case "throttled_usec":
			dst, st.HasThrottling, scale = &st.ThrottledNS, true, 1000
		default:
			continue
		}
		if !ok {
			return cgroupCPUStat{}, fmt.Errorf("%w: cpu.stat line %q: no value", ErrParse, line)
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			return cgroupCPUStat{}, fmt.Errorf("%w: cpu.stat line %q: %w", ErrParse, line, err)
		}
		if v > math.MaxUint64/scale {
			return cgroupCPUStat{}, fmt.Errorf("%w: cpu.stat line %q: value out of range", ErrParse, line)
		}
		*dst = v * scale
	}
	return st, nil
}

// throttle is how much of a tick a cgroup spent throttled.
type throttle struct {
	// Time is Δthrottled time / tick × 100, capped at 100: the kernel adds
	// the throttled time of every CPU's run queue of the cgroup, so on
	// several CPUs the sum can exceed the wall time. It adds it when the
	// run queue is unthrottled, so a throttle that spans a tick boundary
	// lands in the later tick. nil when the cgroup has no throttling
	// counters.
	Time *float64
	// Periods is Δnr_throttled / Δnr_periods × 100: the share of the CFS
	// periods of the tick in which the quota ran out. nil when no period
	// elapsed (no quota set, or nothing ran).
	Periods *float64
	// Throttled is Δnr_throttled: a tick with any throttled period.
	Throttled uint64
}

// throttleOf computes a tick's throttling from two readings of cpu.stat.
// Counters that go backwards (the cgroup was removed and made again under
// the same name) count as 0.
func throttleOf(prev, cur cgroupCPUStat, tick time.Duration) throttle {
	var t throttle
	if prev.HasThrottling && cur.HasThrottling && tick > 0 {
		t.Time = ptr(clamp100(float64(sub(cur.ThrottledNS, prev.ThrottledNS)) * 100 / float64(tick)))
	}
	if prev.HasPeriods && cur.HasPeriods {
		t.Throttled = sub(cur.Throttled, prev.Throttled)
		if n := sub(cur.Periods, prev.Periods); n > 0 {
			t.Periods = ptr(clamp100(float64(t.Throttled) * 100 / float64(n)))
		}
	}
	return t
}

// cgroupDir is a cgroup found on disk: the directory holding its cpu.stat.
type cgroupDir struct {
	Path    string // filesystem directory, e.g. /sys/fs/cgroup/cpu/tare
	Version string // "v1" or "v2"
}

// v1CPUMounts are the directory names under the cgroup root where hybrid
// and legacy layouts mount the v1 cpu controller, alone or co-mounted with
// cpuacct.
var v1CPUMounts = []string{"cpu,cpuacct", "cpuacct,cpu", "cpu"}

// findCgroup locates the directory of a cgroup, given its path inside the
// hierarchy (as /proc/<pid>/cgroup shows it) and, for v1, the controllers
// of its line. The v1 cpu controller wins when the layout is hybrid: then
// the unified v2 tree has no cpu controller and no throttling counters.
func findCgroup(root string, lines []procfs.Cgroup) (cgroupDir, error) {
	for _, l := range lines {
		if l.HierarchyID == 0 || !slices.Contains(l.Controllers, "cpu") {
			continue
		}
		mounts := append([]string{strings.Join(l.Controllers, ",")}, v1CPUMounts...)
		for _, m := range mounts {
			dir := filepath.Join(root, m, l.Path)
			if isDir(filepath.Join(root, m)) {
				if !isDir(dir) {
					return cgroupDir{}, fmt.Errorf("cgroup %q: %s does not exist (is the cgroup root %q the host's?)", l.Path, dir, root)
				}
				return cgroupDir{Path: dir, Version: "v1"}, nil
			}
		}
		return cgroupDir{}, fmt.Errorf("cgroup %q: no v1 cpu controller mounted under %s", l.Path, root)
	}
	for _, l := range lines {
		if l.HierarchyID != 0 {
			continue
		}
		mount, ok := unifiedMount(root)
		if !ok {
			return cgroupDir{}, fmt.Errorf("cgroup %q: no cgroup v2 hierarchy under %s", l.Path, root)
		}
		dir := filepath.Join(mount, l.Path)
		if !isDir(dir) {
			return cgroupDir{}, fmt.Errorf("cgroup %q: %s does not exist (is the cgroup root %q the host's?)", l.Path, dir, root)
		}
		return cgroupDir{Path: dir, Version: "v2"}, nil
	}
	return cgroupDir{}, errors.New("no cpu cgroup in /proc/<pid>/cgroup")
}

// pidCgroup finds the cpu cgroup of a process from /proc/<pid>/cgroup.
func pidCgroup(pfs procfs.FS, root string, pid int) (cgroupDir, error) {
	p, err := pfs.Proc(pid)
	if err != nil {
		return cgroupDir{}, err
	}
	lines, err := p.Cgroups()
	if err != nil {
		return cgroupDir{}, err
	}
	return findCgroup(root, lines)
}

// unifiedMount is where the v2 hierarchy is mounted: the root itself on a
// unified layout, root/unified on a hybrid one.
func unifiedMount(root string) (string, bool) {
	for _, m := range []string{root, filepath.Join(root, "unified")} {
		if isFile(filepath.Join(m, "cgroup.controllers")) {
			return m, true
		}
	}
	return "", false
}

// explicitCgroup resolves a cgroup the user named: a directory under the
// cgroup root (/sys/fs/cgroup/cpu/tare), or a path inside the hierarchy
// (/tare), looked up in the v1 cpu controller first, then in v2.
func explicitCgroup(root, name string) (cgroupDir, error) {
	if rel, err := filepath.Rel(root, name); err == nil && filepath.IsAbs(name) && !strings.HasPrefix(rel, "..") && rel != "." {
		if !isDir(name) {
			return cgroupDir{}, fmt.Errorf("cgroup %q does not exist", name)
		}
		v := "v1"
		if isFile(filepath.Join(name, "cgroup.controllers")) {
			v = "v2"
		}
		return cgroupDir{Path: name, Version: v}, nil
	}
	for _, m := range v1CPUMounts {
		if isDir(filepath.Join(root, m)) {
			if dir := filepath.Join(root, m, name); isDir(dir) {
				return cgroupDir{Path: dir, Version: "v1"}, nil
			}
		}
	}
	if mount, ok := unifiedMount(root); ok {
		if dir := filepath.Join(mount, name); isDir(dir) {
			return cgroupDir{Path: dir, Version: "v2"}, nil
		}
	}
	return cgroupDir{}, fmt.Errorf("cgroup %q not found under %s (v1 cpu controller or v2)", name, root)
}

// cgroupLayout says which cgroup version the machine uses for the cpu
// controller, for the run's environment: "v1", "v2" or "" when unknown.
func cgroupLayout(root string) string {
	for _, m := range v1CPUMounts {
		if isDir(filepath.Join(root, m)) {
			return "v1"
		}
	}
	if _, ok := unifiedMount(root); ok {
		return "v2"
	}
	return ""
}

// readCgroupCPUStat reads and parses dir/cpu.stat.
func readCgroupCPUStat(dir string) (cgroupCPUStat, error) {
	name := filepath.Join(dir, "cpu.stat")
	b, err := os.ReadFile(name)
	if err != nil {
		return cgroupCPUStat{}, fmt.Errorf("read %s: %w", name, err)
	}
	st, err := parseCgroupCPUStat(b)
	if err != nil {
		return cgroupCPUStat{}, fmt.Errorf("%s: %w", name, err)
	}
	return st, nil
}

func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}

func isFile(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}
