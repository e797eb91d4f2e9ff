package schedprobe

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Connects traces the connections processes open, as the kernel makes
// them: a TCP connect (tracepoint sock/inet_sock_set_state, entering
// SYN_SENT) and a Unix-domain connect (tracepoint
// syscalls/sys_enter_connect with an AF_UNIX address). A look at the socket tables sees only the
// connections open at that instant; this sees every one, however short,
// with the processes the connecting one descended from: the parent that
// forked it for one connection (socat's fork) is there when the child is
// long gone.
type Connects struct {
	objs  connectObjects
	links []link.Link
}

// KernelTypes is the kernel's BTF, which relocating a program reads:
// parsing it costs about 13 ms of CPU on the 2-vCPU test host, for each
// program loaded with types of its own, so the programs a run loads
// together (the probe, the connection tracer) share one parse. It is
// held only as long as the KernelTypes is: let it go once they are
// loaded, since the parsed types are megabytes.
type KernelTypes struct{ cache *btf.Cache }

// NewKernelTypes returns kernel types not parsed yet: the first load
// parses them.
func NewKernelTypes() *KernelTypes { return &KernelTypes{cache: btf.NewCache()} }

// options loads with k's types, or with a parse of their own when k is
// nil.
func (k *KernelTypes) options() *ebpf.CollectionOptions {
	if k == nil {
		return nil
	}
	return &ebpf.CollectionOptions{Cache: k.cache}
}

// Connect is one process's connections to one place since the last
// Drain: a TCP address, or a Unix socket's name ("@name" for the
// abstract namespace).
type Connect struct {
	PID int // the process (thread group) that connected
	// Ancestors are the processes PID descended from at its last connect
	// there: its parent, the parent's parent, and so on; 0 past init or
	// past the Ancestry nearest.
	Ancestors [Ancestry]int
	TCP       netip.AddrPort
	Unix      string
}

// Ancestry is how many of a connecting process's ancestors the tracer
// records.
const Ancestry = 4

// OpenConnects loads and attaches the tracer. It needs root (or CAP_BPF
// and CAP_PERFMON), tracepoints (tracefs) and the kernel's BTF; an error says what was
// missing, and the caller goes on without it.
func OpenConnects() (*Connects, error) { return OpenConnectsWith(nil) }

// OpenConnectsWith is OpenConnects with the kernel's types parsed once
// for every program loaded with the same k (nil: parsed for this one).
func OpenConnectsWith(k *KernelTypes) (*Connects, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("connection tracer: %w", err)
	}
	c := &Connects{}
	if err := loadConnectObjects(&c.objs, k.options()); err != nil {
		return nil, fmt.Errorf("connection tracer: load the eBPF program: %w", err)
	}
	tp, err := link.Tracepoint("sock", "inet_sock_set_state", c.objs.OnTcpState, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connection tracer: attach to tracepoint sock/inet_sock_set_state: %w", err)
	}
	c.links = append(c.links, tp)
	un, err := link.Tracepoint("syscalls", "sys_enter_connect", c.objs.OnConnect, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connection tracer: attach to tracepoint syscalls/sys_enter_connect: %w", err)
	}
	c.links = append(c.links, un)
	return c, nil
}

// Drain returns the connections recorded since the last Drain, and
// forgets them.
func (c *Connects) Drain() ([]Connect, error) {
	var out []Connect
	var tk connectTcpConnect
	var seen connectSeen
	var tcpKeys []connectTcpConnect
	var tcpSeen []connectSeen
	it := c.objs.TcpConnects.Iterate()
	for it.Next(&tk, &seen) {
		tcpKeys, tcpSeen = append(tcpKeys, tk), append(tcpSeen, seen)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("connection tracer: read TCP connects: %w", err)
	}
	for i, k := range tcpKeys {
		if err := c.objs.TcpConnects.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, fmt.Errorf("connection tracer: forget a TCP connect: %w", err)
		}
		var addr netip.Addr
		switch k.Family {
		case 2:
			addr = netip.AddrFrom4([4]byte(k.Daddr[:4]))
		case 10:
			addr = netip.AddrFrom16(k.Daddr).Unmap()
		default:
			continue
		}
		out = append(out, Connect{PID: int(k.Tgid), Ancestors: asPIDs(tcpSeen[i].Ancestors), TCP: netip.AddrPortFrom(addr, k.Dport)})
	}
	var uk connectUnixConnect
	var unixKeys []connectUnixConnect
	var unixSeen []connectSeen
	it = c.objs.UnixConnects.Iterate()
	for it.Next(&uk, &seen) {
		unixKeys, unixSeen = append(unixKeys, uk), append(unixSeen, seen)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("connection tracer: read Unix connects: %w", err)
	}
	for i, k := range unixKeys {
		if err := c.objs.UnixConnects.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, fmt.Errorf("connection tracer: forget a Unix connect: %w", err)
		}
		if name := unixName(k.Path[:min(int(k.Len), len(k.Path))]); name != "" {
			out = append(out, Connect{PID: int(k.Tgid), Ancestors: asPIDs(unixSeen[i].Ancestors), Unix: name})
		}
	}
	return out, nil
}

// asPIDs are the ancestors the programs record, as ints. (Its argument's
// type is how the build checks that both programs record Ancestry.)
func asPIDs(ancestors [Ancestry]uint32) [Ancestry]int {
	var out [Ancestry]int
	for i, pid := range ancestors {
		out[i] = int(pid)
	}
	return out
}

// unixName is a connect(2) address's path as ss writes it: up to its
// first NUL, or for the abstract namespace (a leading NUL) '@' and all
// the bytes given.
func unixName(path []int8) string {
	b := make([]byte, len(path))
	for i, c := range path {
		b[i] = byte(c)
	}
	if len(b) > 0 && b[0] == 0 {
		return "@" + string(b[1:])
	}
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Close detaches and unloads the tracer.
func (c *Connects) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}
