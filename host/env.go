package host

import (
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

// The environment variables tare reads its place from. TARE_HOSTNAME
// names the host tare records in place of the kernel's host name: in a
// pod that is the pod's own name, so the manifests pass the node's
// (spec.nodeName) through the downward API. The TARE_POD_* variables are
// the downward API's metadata.name, metadata.namespace and metadata.uid.
// Kubernetes sets KUBERNETES_SERVICE_HOST in every container it starts.
const (
	EnvHostname     = "TARE_HOSTNAME"
	EnvPodName      = "TARE_POD_NAME"
	EnvPodNamespace = "TARE_POD_NAMESPACE"
	EnvPodUID       = "TARE_POD_UID"
	envKubernetes   = "KUBERNETES_SERVICE_HOST"
)

// Hostname is the name tare records for this host, as a run's Env does:
// $TARE_HOSTNAME (in a pod, the node's), else the kernel's host name.
func Hostname() string {
	name := cmp.Or(os.Getenv(EnvHostname), readLine("/proc/sys/kernel/hostname"))
	if name == "" {
		name, _ = os.Hostname()
	}
	return name
}

// readEnv describes the machine once per run. Anything it cannot read is
// left empty (or nil): the environment is context for the figures, never a
// reason to refuse to measure.
func readEnv(pfs procfs.FS, procRoot string, getenv func(string) string, vcpus int, cgroupVersion string, psi bool, rt Runtimes) tare.Env {
	env := tare.Env{
		Hostname:      cmp.Or(getenv(EnvHostname), readLine(filepath.Join(procRoot, "sys", "kernel", "hostname"))),
		VCPUs:         vcpus,
		Kernel:        readLine(filepath.Join(procRoot, "sys", "kernel", "osrelease")),
		ClkTck:        ClkTck,
		Cgroup:        cgroupVersion,
		PSI:           psi,
		HostProcesses: hostProcesses(procRoot),
	}
	if env.Hostname == "" {
		env.Hostname, _ = os.Hostname()
	}
	if cpus, err := pfs.CPUInfo(); err == nil {
		env.Hypervisor = hypervisorFlag(cpus)
	}
	var cgroups []procfs.Cgroup
	if self, err := pfs.Self(); err == nil {
		cgroups, _ = self.Cgroups()
	}
	env.Pod = readPod(getenv, cgroups)
	env.Container = selfContainer(procRoot, rt)
	return env
}

// hostProcesses tells the host's PID namespace from a container's own: in
// the host's, pid 2 is kthreadd, the parent of every kernel thread; a
// PID namespace of its own shows no kernel thread at all. It is nil when
// /proc shows neither pid 1 nor pid 2.
func hostProcesses(procRoot string) *bool {
	b, err := os.ReadFile(filepath.Join(procRoot, "2", "stat"))
	switch {
	case err == nil:
		v := strings.Contains(string(b), "(kthreadd)")
		return &v
	case isDir(filepath.Join(procRoot, "1")):
		v := false
		return &v
	}
	return nil
}

// podUID is the pod's uid in a kubelet cgroup path: "pod<uid>" with the
// cgroupfs driver, "pod<uid with _ for ->.slice" with the systemd one.
var podUID = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// readPod says which pod tare runs in, or nil outside Kubernetes: in a pod
// when Kubernetes set its variables, the manifests passed the downward
// API's, or the cgroup path is the kubelet's (kubepods). The kubelet puts
// a Guaranteed pod's cgroup right under kubepods and the others under
// kubepods/burstable or kubepods/besteffort, so the path tells the QoS
// class; a cgroup namespace (the default on cgroup v2) shows "/" instead,
// and then the class is not known here.
func readPod(getenv func(string) string, cgroups []procfs.Cgroup) *tare.Pod {
	pod := tare.Pod{
		Name:      getenv(EnvPodName),
		Namespace: getenv(EnvPodNamespace),
		UID:       getenv(EnvPodUID),
		Node:      getenv(EnvHostname),
	}
	for _, c := range cgroups {
		if strings.Contains(c.Path, "kubepods") {
			pod.Cgroup = c.Path
			break
		}
	}
	if pod.Cgroup == "" && pod.Name == "" && getenv(envKubernetes) == "" {
		return nil
	}
	if p := pod.Cgroup; p != "" {
		switch {
		case strings.Contains(p, "besteffort"):
			pod.QoS = "BestEffort"
		case strings.Contains(p, "burstable"):
			pod.QoS = "Burstable"
		default:
			pod.QoS = "Guaranteed"
		}
		if m := podUID.FindStringSubmatch(p); m != nil && pod.UID == "" {
			pod.UID = strings.ReplaceAll(m[1], "_", "-")
		}
	}
	return &pod
}

// hypervisorFlag reads the "hypervisor" CPU flag, which x86 guests see set
// by the hypervisor. Without any flags (other architectures) it is unknown.
func hypervisorFlag(cpus []procfs.CPUInfo) *bool {
	known := false
	for _, c := range cpus {
		if slices.Contains(c.Flags, "hypervisor") {
			v := true
			return &v
		}
		known = known || len(c.Flags) > 0
	}
	if !known {
		return nil
	}
	v := false
	return &v
}

func readLine(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
