package host

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Exists says whether process pid is in the process table procRoot shows
// (DefaultProcRoot when empty): a pid of 0 or below never is.
func Exists(procRoot string, pid int) bool {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	if pid <= 0 {
		return false
	}
	_, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(pid)))
	return err == nil
}

// SetCommand renames this process: the comm of its main thread, which is
// the process's name in /proc/<pid>/stat (prctl PR_SET_NAME would rename
// only the calling thread, and a Go program's code runs on any of them;
// proc(5) lets any thread of the group write the main thread's comm).
func SetCommand(name string) error {
	pid := strconv.Itoa(os.Getpid())
	return os.WriteFile(filepath.Join(DefaultProcRoot, "self", "task", pid, "comm"), []byte(name), 0)
}

// ProcessTable names the process table this process sees: the kernel's
// boot (/proc/sys/kernel/random/boot_id) and the pid namespace
// (/proc/self/ns/pid). Two processes that give the same name see each
// other under the same pids, so one may count the other's pid (the other
// shards of a sharded run on this host, as tare); in another container's
// pid namespace, or on another host, a pid names another process.
// procRoot is where proc is mounted; DefaultProcRoot when empty.
func ProcessTable(procRoot string) (string, error) {
	boot, ns, err := readProcessTable(procRoot)
	if err != nil {
		return "", err
	}
	return boot + " " + ns, nil
}

// readProcessTable reads the two parts of ProcessTable's name: the boot id
// and the pid namespace link, e.g. "pid:[4026531836]".
func readProcessTable(procRoot string) (boot, pidNS string, err error) {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	b, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return "", "", fmt.Errorf("read the boot id: %w", err)
	}
	ns, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "pid"))
	if err != nil {
		return "", "", fmt.Errorf("read the pid namespace: %w", err)
	}
	return strings.TrimSpace(string(b)), ns, nil
}

// localAddrs are the addresses a network namespace takes as its own: a
// connection to one of them is received there (ip-route(8)'s local
// routes), IPv4 from net/fib_trie, IPv6 from net/if_inet6.
type localAddrs []netip.Prefix

// has reports whether a is an address of the namespace.
func (l localAddrs) has(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range l {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// readLocalAddrs reads the local addresses of the network namespace whose
// proc files are under root (procRoot, or procRoot/<pid> for another
// namespace); a file that cannot be read or parsed adds none.
func readLocalAddrs(root string) localAddrs {
	var out localAddrs
	if b, err := os.ReadFile(filepath.Join(root, "net", "fib_trie")); err == nil {
		out, _ = parseFibTrie(b, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "net", "if_inet6")); err == nil {
		out, _ = parseIfInet6(b, out)
	}
	return out
}

// parseFibTrie appends the IPv4 local routes of net/fib_trie to dst: a
// leaf line "|-- 10.0.0.2" names an address, and each line under it
// ("/32 host LOCAL") a prefix length from it, with its scope and type.
// An address of the namespace is a /32 LOCAL; a whole prefix may be
// local too (127.0.0.0/8, `ip route add local 10.9.0.0/24 dev lo`). The
// main and local tables both list them: each is appended once.
//
// https://docs.kernel.org/networking/fib_trie.html
func parseFibTrie(b []byte, dst localAddrs) (localAddrs, error) {
	var leaf netip.Addr
	seen := map[netip.Prefix]bool{}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		fields := bytes.Fields(line)
		switch {
		case len(fields) == 2 && string(fields[0]) == "|--":
			a, err := netip.ParseAddr(string(fields[1]))
			if err != nil || !a.Is4() {
				return dst, fmt.Errorf("%w: net/fib_trie line %q: bad leaf address", ErrParse, line)
			}
			leaf = a
		case len(fields) >= 3 && bytes.HasPrefix(fields[0], []byte("/")) && string(fields[2]) == "LOCAL":
			if !leaf.IsValid() {
				return dst, fmt.Errorf("%w: net/fib_trie line %q: a route before any leaf", ErrParse, line)
			}
			bits, ok := parseDec(fields[0][1:])
			if !ok || bits > 32 {
				return dst, fmt.Errorf("%w: net/fib_trie line %q: bad prefix length", ErrParse, line)
			}
			p, _ := leaf.Prefix(int(bits))
			if !seen[p] {
				seen[p] = true
				dst = append(dst, p)
			}
		}
	}
	return dst, nil
}

// parseIfInet6 appends the IPv6 addresses of net/if_inet6 to dst, each a
// /128: a line is the address in 32 hex digits, then the interface's
// index, the prefix length, scope, flags and name.
func parseIfInet6(b []byte, dst localAddrs) (localAddrs, error) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var a [16]byte
		if len(fields[0]) != 32 {
			return dst, fmt.Errorf("%w: net/if_inet6 line %q: an address of %d hex digits, want 32", ErrParse, line, len(fields[0]))
		}
		if _, err := hex.Decode(a[:], fields[0]); err != nil {
			return dst, fmt.Errorf("%w: net/if_inet6 line %q: %w", ErrParse, line, err)
		}
		dst = append(dst, netip.PrefixFrom(netip.AddrFrom16(a), 128))
	}
	return dst, nil
}
