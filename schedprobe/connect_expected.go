package schedprobe

import (
	"fmt"
	"os"
	"path/filepath"
)

// tracefsDirs are where tracefs is mounted, as cilium/ebpf looks for it
// to find a tracepoint's id.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// kernelBTF is where the kernel describes its own types.
const kernelBTF = "/sys/kernel/btf/vmlinux"

// ConnectsExpected says why the connection tracer is not expected to load
// here: not root, a kernel without BTF (the program reads each connecting
// process's ancestors from the task structs, relocated by CO-RE), or no
// tracefs mounted; nil where OpenConnects should succeed, and a failure
// of it is a fault (a verifier that rejects the program, a tracepoint
// that is gone).
func ConnectsExpected() error {
	return connectsExpected(os.Geteuid(), kernelBTF, tracefsDirs)
}

func connectsExpected(euid int, btf string, tracefs []string) error {
	if euid != 0 {
		return fmt.Errorf("connection tracer unavailable: not root (it needs root, or CAP_BPF and CAP_PERFMON)")
	}
	if _, err := os.Stat(btf); err != nil {
		return fmt.Errorf("connection tracer unavailable: the kernel has no BTF (%w)", err)
	}
	for _, dir := range tracefs {
		if _, err := os.Stat(filepath.Join(dir, "events")); err == nil {
			return nil
		}
	}
	return fmt.Errorf("connection tracer unavailable: tracefs is not mounted on %s (as root: mount -t tracefs tracefs %s; scripts/test does)", tracefs[0], tracefs[0])
}
