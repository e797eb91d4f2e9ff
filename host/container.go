package host

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	byID     map[string]*tare.Container     // runtime/id → the container, described
	groups   map[*tare.Container]shareGroup // scratch of group
}

type pidContainer struct {
	start uint64
	c     *tare.Container // nil: in no container
}

func newContainerIndex(procRoot string, rt Runtimes) *containerIndex {
	return &containerIndex{procRoot: procRoot, runtimes: rt, byPID: map[int]pidContainer{}, byID: map[string]*tare.Container{}}
}

// of returns the container of the process pid (p, at the reading procs),
// nil outside one (or on a nil index). A child of a process known to be in
// a container is in it too (a fork stays in its parent's cgroup, and only
// the host moves a process out of a container's subtree), so the
// processes a container keeps starting (a build, a worker pool) cost a
// map lookup each, not a read of their cgroup file (about 20 µs on the
// development VM, as much as opening their stat).
func (x *containerIndex) of(pid int, p procStat, procs map[int]procStat) *tare.Container {
	if x == nil {
		return nil
	}
	if e, ok := x.byPID[pid]; ok && e.start == p.Start {
		return e.c
	}
	var c *tare.Container
	if e, ok := x.byPID[p.PPID]; ok && e.c != nil && procs[p.PPID].Start == e.start {
		c = e.c
	} else if found, _, ok := readContainer(x.procRoot, pid); ok {
		c = x.described(found)
	}
	x.byPID[pid] = pidContainer{start: p.Start, c: c}
	return c
}

// nameNodes sets the container of each node of the graph from its first
// process that procs has.
func (x *containerIndex) nameNodes(nodes []tare.SUTNode, procs map[int]procStat) {
	if x == nil {
		return
	}
	for i := range nodes {
		for _, pid := range nodes[i].PIDs {
			if p, ok := procs[pid]; ok {
				nodes[i].Container = x.of(pid, p, procs)
				break
			}
		}
	}
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

// group makes the shares of each container's processes one share (see
// byContainer), reusing the index's scratch map; on a nil index it leaves
// shares as they are.
func (x *containerIndex) group(shares []tare.ProcessShare) []tare.ProcessShare {
	if x == nil {
		return shares
	}
	if x.groups == nil {
		x.groups = map[*tare.Container]shareGroup{}
	}
	clear(x.groups)
	return byContainer(shares, x.groups)
}

// shareGroup is a container's share being summed by byContainer.
type shareGroup struct {
	at      int     // its index in the result
	busiest float64 // the share of the process that names it
}

// byContainer makes the shares of the processes of one container one
// share: their CPU summed, named by the busiest of them, with their count
// and the short-lived children charged to any of them.
// Shares outside a container are left as they are, and the result is not
// sorted. It works in place, in shares' array; groups is scratch, empty.
// Containers are told apart by pointer: containerIndex gives one per
// container.
func byContainer(shares []tare.ProcessShare, groups map[*tare.Container]shareGroup) []tare.ProcessShare {
	out := shares[:0]
	for _, p := range shares {
		if p.Container == nil {
			out = append(out, p)
			continue
		}
		g, ok := groups[p.Container]
		if !ok {
			groups[p.Container] = shareGroup{at: len(out), busiest: p.CPUPct}
			p.Processes = 1
			out = append(out, p)
			continue
		}
		o := &out[g.at]
		if p.CPUPct > g.busiest || p.CPUPct == g.busiest && p.PID < o.PID {
			o.Name, o.PID, g.busiest = p.Name, p.PID, p.CPUPct
			groups[p.Container] = g
		}
		o.CPUPct += p.CPUPct
		o.Processes++
		for _, c := range p.Children {
			if !slices.Contains(o.Children, c) {
				o.Children = append(o.Children, c)
			}
		}
	}
	return out
}

// ContainerSUT is a container named as the system under test.
type ContainerSUT struct {
	Container tare.Container
	PIDs      []int // its processes, sorted
	// Cgroup is the directory of its own cgroup, where its CPU limit is
	// (under the v1 cpu controller or the unified hierarchy); "" when it
	// is not under the cgroup root tare was given.
	Cgroup string
}

// running is a container seen in the process table, with its processes.
type running struct {
	c      tare.Container
	cgroup string // its own cgroup's path in the hierarchy
	pids   []int
}

// FindContainer finds the container ref names, by its name, its id or a
// unique prefix of its id (4 hex digits at least, as docker ps prints 12),
// or as pod/name or namespace/pod/name for a Kubernetes container, among
// the containers the processes under procRoot run in (their cgroup paths),
// named from the runtimes' files. A ref that matches none, or several, is
// an ENOTFOUND or EINVALID *tare.Error that says what was looked at and
// what was found there.
func FindContainer(procRoot, cgroupRoot string, rt Runtimes, ref string) (ContainerSUT, error) {
	if ref == "" {
		return ContainerSUT{}, tare.Errorf(tare.EINVALID, "no container named: give its name or id")
	}
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	if cgroupRoot == "" {
		cgroupRoot = DefaultCgroupRoot
	}
	seen, err := runningContainers(procRoot, rt)
	if err != nil {
		return ContainerSUT{}, err
	}
	var exact, prefix []*running
	for _, r := range seen {
		switch {
		case refersTo(ref, &r.c):
			exact = append(exact, r)
		case len(ref) >= 4 && isContainerID(r.c.ID) && strings.HasPrefix(r.c.ID, ref):
			prefix = append(prefix, r)
		}
	}
	if len(exact) == 0 {
		exact = prefix
	}
	switch len(exact) {
	case 0:
		return ContainerSUT{}, notFound(procRoot, rt, ref, seen)
	case 1:
	default:
		var names []string
		for _, r := range exact {
			names = append(names, r.c.String())
		}
		return ContainerSUT{}, tare.Errorf(tare.EINVALID, "container %q names %d running containers: %s; give the id of one", ref, len(exact), strings.Join(names, ", "))
	}
	r := exact[0]
	out := ContainerSUT{Container: r.c, PIDs: r.pids}
	if dir, err := explicitCgroup(cgroupRoot, r.cgroup); err == nil {
		out.Cgroup = dir.Path
	}
	return out, nil
}

// refersTo reports whether ref is c's id or one of its names.
func refersTo(ref string, c *tare.Container) bool {
	if ref == c.ID || c.Name != "" && ref == c.Name {
		return true
	}
	if c.Pod == "" || c.Name == "" {
		return false
	}
	_, pod, _ := strings.Cut(c.Pod, "/")
	return ref == c.Pod+"/"+c.Name || ref == pod+"/"+c.Name
}

// runningContainers lists the containers the processes under procRoot run
// in, each described from the runtimes' files, in the order of their first
// process.
func runningContainers(procRoot string, rt Runtimes) ([]*running, error) {
	names, err := readDirNames(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes under %s: %w", procRoot, err)
	}
	var pids []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	byKey := map[string]*running{}
	var out []*running
	for _, pid := range pids {
		c, line, ok := readContainer(procRoot, pid)
		if !ok {
			continue
		}
		key := c.Runtime + "/" + c.ID
		r := byKey[key]
		if r == nil {
			_, cg, _ := parseContainerCgroup(line.path)
			rt.describe(&c)
			r = &running{c: c, cgroup: cg}
			byKey[key] = r
			out = append(out, r)
		}
		r.pids = append(r.pids, pid)
	}
	return out, nil
}

// notFound says that ref names no running container, what was looked at,
// and what was found there: the containers running, and a container the
// runtimes' files know by that name or id (stopped, or its processes out
// of sight).
func notFound(procRoot string, rt Runtimes, ref string, seen []*running) error {
	var b strings.Builder
	fmt.Fprintf(&b, "container %q not found: ", ref)
	known, places := rt.known()
	for _, k := range known {
		if refersTo(ref, &k.Container) || len(ref) >= 4 && strings.HasPrefix(k.ID, ref) {
			fmt.Fprintf(&b, "%s is in %s, but no process under %s runs in it: is it running?", k.Container.String(), k.From, procRoot)
			return tare.Errorf(tare.ENOTFOUND, "%s%s", b.String(), pidNamespaceNote(procRoot))
		}
	}
	fmt.Fprintf(&b, "no process under %s runs in a container of that name or id", procRoot)
	if len(seen) == 0 {
		b.WriteString(" (no process there runs in any container)")
	} else {
		var names []string
		for _, r := range seen {
			names = append(names, r.c.String())
		}
		fmt.Fprintf(&b, " (running: %s)", strings.Join(names, ", "))
	}
	fmt.Fprintf(&b, ", and no runtime's files name it (%s; --runtime-dir names another place)", strings.Join(places, ", "))
	return tare.Errorf(tare.ENOTFOUND, "%s%s", b.String(), pidNamespaceNote(procRoot))
}

// pidNamespaceNote says, when tare sees only its own PID namespace, why
// another container's processes are out of its sight.
func pidNamespaceNote(procRoot string) string {
	if hp := hostProcesses(procRoot); hp != nil && !*hp {
		return "; " + procRoot + " lists only the processes of tare's own PID namespace: run tare in the host's (docker or podman run --pid=host; hostPID: true in a pod)"
	}
	return ""
}

// selfContainer says which container tare itself runs in, as far as it
// can tell from inside; nil when it sees none. Its cgroup path says so
// where the runtime does not give it a cgroup namespace of its own (cgroup
// v1, or --cgroupns=host); else the files the runtime bind-mounts into a
// container (/etc/hostname and /etc/resolv.conf from docker's
// containers/<id>/ or containers/storage's <id>/userdata/) show its id in
// /proc/self/mountinfo. Failing both, and only in a PID namespace of its
// own, the marker files docker (/.dockerenv), podman (/run/.containerenv,
// with the name and image when it is privileged) and systemd-nspawn
// (/run/systemd/container) leave say which runtime: alone they prove
// little, since a VM's disk made from a container image keeps them. The
// markers are looked for beside procRoot (/ for /proc).
func selfContainer(procRoot string, rt Runtimes) *tare.Container {
	if b, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup")); err == nil {
		if c, _, ok := containerOfLines(b); ok {
			rt.describe(&c)
			return &c
		}
	}
	if b, err := os.ReadFile(filepath.Join(procRoot, "self", "mountinfo")); err == nil {
		if c, ok := mountedContainer(b); ok {
			rt.describe(&c)
			return &c
		}
	}
	if hp := hostProcesses(procRoot); hp == nil || *hp {
		return nil
	}
	root := filepath.Dir(filepath.Clean(procRoot))
	if b, err := os.ReadFile(filepath.Join(root, "run", ".containerenv")); err == nil {
		return containerEnv(b)
	}
	if isFile(filepath.Join(root, ".dockerenv")) {
		return &tare.Container{Runtime: RuntimeDocker}
	}
	if b, err := os.ReadFile(filepath.Join(root, "run", "systemd", "container")); err == nil {
		if rt := strings.TrimSpace(string(b)); rt != "" {
			return &tare.Container{Runtime: rt}
		}
	}
	return nil
}

// mountedContainer finds a container id in the roots of the mounts of
// /proc/self/mountinfo (the fourth field, the path inside the mounted
// filesystem): docker's containers/<id>/hostname, containers/storage's
// <driver>-containers/<id>/userdata/hostname.
func mountedContainer(mountinfo []byte) (tare.Container, bool) {
	for len(mountinfo) > 0 {
		var line []byte
		line, mountinfo, _ = bytes.Cut(mountinfo, []byte{'\n'})
		f := bytes.Fields(line)
		if len(f) < 5 {
			continue
		}
		dir, file := filepath.Split(string(f[3]))
		if file != "hostname" && file != "resolv.conf" && file != "hosts" {
			continue
		}
		parts := strings.Split(strings.Trim(dir, "/"), "/")
		n := len(parts)
		switch {
		case n >= 2 && parts[n-2] == "containers" && isContainerID(parts[n-1]):
			return tare.Container{ID: parts[n-1], Runtime: RuntimeDocker}, true
		case n >= 3 && parts[n-1] == "userdata" && strings.HasSuffix(parts[n-3], "-containers") && isContainerID(parts[n-2]):
			return tare.Container{ID: parts[n-2]}, true // podman's or CRI-O's: their files tell
		}
	}
	return tare.Container{}, false
}

// containerEnv reads podman's /run/.containerenv: key="value" lines, with
// name, id and image filled in for a privileged container only.
func containerEnv(b []byte) *tare.Container {
	c := &tare.Container{Runtime: RuntimePodman}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{'='})
		if !ok {
			continue
		}
		val, err := strconv.Unquote(string(bytes.TrimSpace(v)))
		if err != nil {
			continue
		}
		switch string(k) {
		case "name":
			c.Name = val
		case "id":
			c.ID = val
		case "image":
			c.Image = val
		}
	}
	return c
}

// ownPIDNamespace says what tare can and cannot see when it runs with a
// PID namespace of its own (in a container, or a pod without hostPID).
func ownPIDNamespace(env tare.Env) error {
	where := "a container"
	switch {
	case env.Container != nil:
		where = env.Container.String()
	case env.Pod != nil && env.Pod.Name != "":
		where = "pod " + env.Pod.Namespace + "/" + env.Pod.Name
	}
	return fmt.Errorf("/proc lists only this container's processes (tare runs in %s with a PID namespace of its own; in a Kubernetes pod, hostPID is not set): "+
		"steal, CPU pressure and the CPU time are the host's, and the processes and throttling of tare's own container are measured, "+
		"but other processes' CPU is counted as unattributed, not named, and --pid, --container and a loopback target's listener find only this container's processes; "+
		"to name them, run tare in the host's PID namespace (docker or podman run --pid=host; hostPID: true in a pod)", where)
}
