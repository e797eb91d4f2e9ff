package host

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
)

// FindService finds the system under test of a target URL on this host:
// for a loopback address (127.0.0.0/8, ::1, localhost), the processes that
// hold the listening socket of its port. It returns none, and says why in
// how, for a target elsewhere or a port no visible process listens on.
func FindService(procRoot, rawURL string) (pids []int, how string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil, "not found: the target is not a URL with a host", nil
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Sprintf("not found: %s is not a loopback address, so it does not run on this host as far as tare can tell", h), nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, "", fmt.Errorf("port %q of %s: %w", port, rawURL, err)
	}
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	pids, err = ListenerPIDs(procRoot, n)
	if err != nil {
		return nil, "", fmt.Errorf("find the process listening on port %d: %w", n, err)
	}
	if len(pids) == 0 {
		return nil, fmt.Sprintf("not found: no visible process listens on port %d", n), nil
	}
	return pids, fmt.Sprintf("listening socket of %s:%d", h, n), nil
}

// FindUnixService finds the system under test of a target reached
// through the Unix socket at path: the processes that hold it listening.
// It returns none, and says why in how, when no visible process does.
func FindUnixService(procRoot, path string) (pids []int, how string, err error) {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	pids, err = UnixListenerPIDs(procRoot, path)
	if err != nil {
		return nil, "", fmt.Errorf("find the process listening on unix %s: %w", path, err)
	}
	if len(pids) == 0 {
		return nil, fmt.Sprintf("not found: no visible process listens on unix %s", path), nil
	}
	return pids, "listening socket of unix " + path, nil
}

// CgroupPIDs returns the processes in a cgroup, named as Config.Cgroup
// names it.
func CgroupPIDs(cgroupRoot, cgroup string) ([]int, error) {
	if cgroupRoot == "" {
		cgroupRoot = DefaultCgroupRoot
	}
	dir, err := explicitCgroup(cgroupRoot, cgroup)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir.Path, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("processes of cgroup %s: %w", dir.Path, err)
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		pid, err := strconv.Atoi(string(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("%w: %s/cgroup.procs: bad pid %q", ErrParse, dir.Path, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
