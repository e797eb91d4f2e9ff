package host

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

// readEnv describes the machine once per run. Anything it cannot read is
// left empty (or nil): the environment is context for the figures, never a
// reason to refuse to measure.
func readEnv(pfs procfs.FS, procRoot string, vcpus int, cgroupVersion string, psi bool) tare.Env {
	env := tare.Env{
		Hostname: readLine(filepath.Join(procRoot, "sys", "kernel", "hostname")),
		VCPUs:    vcpus,
		Kernel:   readLine(filepath.Join(procRoot, "sys", "kernel", "osrelease")),
		ClkTck:   ClkTck,
		Cgroup:   cgroupVersion,
		PSI:      psi,
	}
	if env.Hostname == "" {
		env.Hostname, _ = os.Hostname()
	}
	if cpus, err := pfs.CPUInfo(); err == nil {
		env.Hypervisor = hypervisorFlag(cpus)
	}
	return env
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
