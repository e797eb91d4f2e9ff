package host

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// Container runtimes as tare.Container.Runtime names them.
const (
	RuntimeDocker     = "docker"
	RuntimePodman     = "podman"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimeNspawn     = "systemd-nspawn"
	RuntimeLibvirt    = "libvirt"
	// RuntimeKubernetes is a container the kubelet's cgroup path places
	// in a pod, with a bare id that does not say which runtime made it.
	RuntimeKubernetes = "kubernetes"
)

// containerScopes are the prefixes of the cgroup a runtime makes for a
// container with the systemd cgroup driver (<prefix><id>.scope) or, for
// some, with the cgroupfs one (<prefix><id>):
//
//	docker       /system.slice/docker-<id>.scope
//	podman       /machine.slice/libpod-<id>.scope, /libpod_parent/libpod-<id>
//	containerd   /kubepods.slice/…/cri-containerd-<id>.scope, /system.slice/nerdctl-<id>.scope
//	cri-o        /kubepods.slice/…/crio-<id>.scope, /kubepods/…/crio-<id>
//
// The conmon monitors of podman and CRI-O (libpod-conmon-<id>.scope,
// crio-conmon-<id>.scope) are the runtime's processes, not the
// container's, and match none: "conmon-" is not a hex id.
var containerScopes = []struct{ prefix, runtime string }{
	{"docker-", RuntimeDocker},
	{"libpod-", RuntimePodman},
	{"cri-containerd-", RuntimeContainerd},
	{"nerdctl-", RuntimeContainerd},
	{"crio-", RuntimeCRIO},
}

// parseContainerCgroup reads a container off a cgroup path, as a line of
// /proc/<pid>/cgroup gives it, and returns the container's own cgroup:
// the path up to the container's part, which is where its runtime sets
// its CPU limits (a container may make cgroups of its own below it). The
// innermost container wins: a container in a container (kind's nodes,
// docker in docker) is the inner one. Besides containerScopes it knows:
//
//	/docker/<id>                              docker, cgroupfs driver
//	/kubepods/burstable/pod<uid>/<id>         a pod's container, cgroupfs driver
//	/<anything>/<id>                          a bare 64-digit id: a container of unknown runtime
//	/machine.slice/systemd-nspawn@<name>.service
//	/machine.slice/machine-<name>.scope       systemd-nspawn, or libvirt (qemu-…, lxc-…)
//
// The Runtime of a bare id is "" (docker's parent says docker, a pod's
// says kubernetes): the runtimes' files on the host may say more.
func parseContainerCgroup(p string) (c tare.Container, cgroup string, ok bool) {
	if !strings.HasPrefix(p, "/") {
		return c, "", false
	}
	for end := len(p); end > 0; {
		start := strings.LastIndexByte(p[:end], '/')
		parent := p[strings.LastIndexByte(p[:max(start, 0)], '/')+1 : max(start, 0)]
		if c, ok = containerSegment(p[start+1:end], parent); ok {
			return c, p[:end], true
		}
		end = start
	}
	return c, "", false
}

// containerSegment reads one part of a cgroup path (its parent is the part
// above it, for a bare id).
func containerSegment(seg, parent string) (tare.Container, bool) {
	if name, ok := strings.CutPrefix(seg, "systemd-nspawn@"); ok {
		if name, ok = strings.CutSuffix(name, ".service"); ok && name != "" {
			name = unescapeUnit(name)
			return tare.Container{ID: name, Name: name, Runtime: RuntimeNspawn}, true
		}
		return tare.Container{}, false
	}
	if name, ok := strings.CutPrefix(seg, "machine-"); ok {
		if name, ok = strings.CutSuffix(name, ".scope"); ok && name != "" {
			name = unescapeUnit(name)
			rt := RuntimeNspawn
			if strings.HasPrefix(name, "qemu-") || strings.HasPrefix(name, "lxc-") {
				rt = RuntimeLibvirt
			}
			return tare.Container{ID: name, Name: name, Runtime: rt}, true
		}
		return tare.Container{}, false
	}
	id := strings.TrimSuffix(seg, ".scope")
	for _, s := range containerScopes {
		if hexID, ok := strings.CutPrefix(id, s.prefix); ok {
			if isContainerID(hexID) {
				return tare.Container{ID: hexID, Runtime: s.runtime}, true
			}
			return tare.Container{}, false
		}
	}
	if id != seg || !isContainerID(id) {
		return tare.Container{}, false
	}
	c := tare.Container{ID: id}
	switch {
	case parent == "docker":
		c.Runtime = RuntimeDocker
	case podUID.MatchString(parent):
		c.Runtime = RuntimeKubernetes
	}
	return c, true
}

// isContainerID reports whether s is a full container id: 64 lowercase
// hex digits, as docker, podman, containerd and CRI-O make them.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// unescapeUnit undoes systemd's escaping of a unit name: "\x2d" is "-"
// (systemd.unit(5), "String Escaping"). A malformed escape is left as is.
func unescapeUnit(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupLine is one line of /proc/<pid>/cgroup: "hierarchy:controllers:path".
type cgroupLine struct {
	v2          bool   // hierarchy 0, the unified one
	controllers []byte // comma-separated, empty on v2
	path        string
}

// containerOfLines finds the container of a process from the lines of its
// /proc/<pid>/cgroup, and the line it read it from. It prefers the line
// whose cgroup tare reads throttling from (the v1 cpu controller's, or
// the unified one) and takes any other that names a container, since
// runtimes put a container in the same place in every hierarchy.
func containerOfLines(b []byte) (c tare.Container, line cgroupLine, ok bool) {
	var found []cgroupLine
	var cs []tare.Container
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte{'\n'})
		hier, rest, ok1 := bytes.Cut(l, []byte{':'})
		ctrl, p, ok2 := bytes.Cut(rest, []byte{':'})
		if !ok1 || !ok2 {
			continue
		}
		if c, _, ok := parseContainerCgroup(string(p)); ok {
			found = append(found, cgroupLine{v2: string(hier) == "0", controllers: ctrl, path: string(p)})
			cs = append(cs, c)
		}
	}
	if len(found) == 0 {
		return c, line, false
	}
	best := 0
	for i, l := range found {
		if hasController(l.controllers, "cpu") {
			best = i
			break
		}
		if l.v2 {
			best = i
		}
	}
	return cs[best], found[best], true
}

// hasController reports whether a comma-separated controller list holds name.
func hasController(list []byte, name string) bool {
	for len(list) > 0 {
		var c []byte
		c, list, _ = bytes.Cut(list, []byte{','})
		if string(c) == name {
			return true
		}
	}
	return false
}

// readContainer reads the container of a process from procRoot/<pid>/cgroup.
func readContainer(procRoot string, pid int) (tare.Container, cgroupLine, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return tare.Container{}, cgroupLine{}, false
	}
	return containerOfLines(b)
}

// containerIndex says which container each process runs in, for the
// ledger. A process never changes container, so its cgroup is read once,
// the first time it uses CPU as someone else's (pid and start time: a
// reused pid is another process), and each container is described from
// the runtimes' files once, then shared by all its processes. Not safe
// for concurrent use: the sampler's goroutine owns it.
type containerIndex struct {
	procRoot string
	runtimes Runtimes
	byPID    map[int]pidContainer
	byID     map[string]*tare.Container // runtime/id → the container, described
}

type pidContainer struct {
	start uint64
	c     *tare.Container // nil: in no container
}

func newContainerIndex(procRoot string, rt Runtimes) *containerIndex {
	return &containerIndex{procRoot: procRoot, runtimes: rt, byPID: map[int]pidContainer{}, byID: map[string]*tare.Container{}}
}

// of returns the container of the process pid that started at start, nil
// outside one (or on a nil index).
func (x *containerIndex) of(pid int, start uint64) *tare.Container {
	if x == nil {
		return nil
	}
	if e, ok := x.byPID[pid]; ok && e.start == start {
		return e.c
	}
	var c *tare.Container
	if found, _, ok := readContainer(x.procRoot, pid); ok {
		c = x.described(found)
	}
	x.byPID[pid] = pidContainer{start: start, c: c}
	return c
}

// described returns the one described copy of c.
func (x *containerIndex) described(c tare.Container) *tare.Container {
	key := c.Runtime + "/" + c.ID
	if d, ok := x.byID[key]; ok {
		return d
	}
	x.runtimes.describe(&c)
	x.byID[key] = &c
	return &c
}

// forget drops the processes that are gone from procs, once the index
// holds more processes than the table (it holds only those that ran).
func (x *containerIndex) forget(procs map[int]procStat) {
	if x == nil || len(x.byPID) <= len(procs) {
		return
	}
	for pid, e := range x.byPID {
		if p, ok := procs[pid]; !ok || p.Start != e.start {
			delete(x.byPID, pid)
		}
	}
}

// byContainer makes the shares of the processes of one container one
// share: their CPU summed, named by the busiest of them, with their count.
// Shares outside a container are left as they are, and the result is not
// sorted. It works in place, in shares' array.
func byContainer(shares []tare.ProcessShare) []tare.ProcessShare {
	type group struct {
		at      int     // its index in out
		busiest float64 // the share of the process that names it
	}
	var groups map[*tare.Container]*group // containerIndex gives one pointer per container
	out := shares[:0]
	for _, p := range shares {
		if p.Container == nil {
			out = append(out, p)
			continue
		}
		if groups == nil {
			groups = map[*tare.Container]*group{}
		}
		g := groups[p.Container]
		if g == nil {
			groups[p.Container] = &group{at: len(out), busiest: p.CPUPct}
			p.Processes = 1
			out = append(out, p)
			continue
		}
		o := &out[g.at]
		if p.CPUPct > g.busiest || p.CPUPct == g.busiest && p.PID < o.PID {
			o.Name, o.PID, g.busiest = p.Name, p.PID, p.CPUPct
		}
		o.CPUPct += p.CPUPct
		o.Processes++
	}
	return out
}
