package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ProcessTable names the process table this process sees: the kernel's
// boot (/proc/sys/kernel/random/boot_id) and the pid namespace
// (/proc/self/ns/pid). Two processes that give the same name see each
// other under the same pids, so one may count the other's pid (the other
// shards of a sharded run on this host, as tare); in another container's
// pid namespace, or on another host, a pid names another process.
// procRoot is where proc is mounted; DefaultProcRoot when empty.
func ProcessTable(procRoot string) (string, error) {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	boot, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return "", fmt.Errorf("read the boot id: %w", err)
	}
	ns, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "pid"))
	if err != nil {
		return "", fmt.Errorf("read the pid namespace: %w", err)
	}
	return strings.TrimSpace(string(boot)) + " " + ns, nil
}
