package host

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/schedprobe"
)

// Part is a part of the system under test known before the run: the
// processes the user named, or those tare found holding a loopback
// target's listening socket, and how.
type Part struct {
	PIDs []int
	How  string // "--pid", "listening socket of 127.0.0.1:8080", "started by tare"
}

// graph is the system under test as a process graph. Its first nodes are
// the parts known before the run; then, transitively, every process of
// this host that a node calls: the holders of the listening socket at the
// far end of its connections, over TCP (loopback, or any address of a
// network namespace on this host: a container behind a userland proxy)
// and Unix-domain stream sockets (a database on a socket file). A node
// is the holders of one listening socket, which is a pre-fork pool
// (nginx, gunicorn, PostgreSQL's postmaster) with its descendants.
//
// Direction matters: a connection the system under test accepted (its
// local port is one it listens on) leads to a client, another load
// generator or a scraper, which is not part of it; only the connections
// it opened lead to what it calls.
//
// A look reads the descriptors of the system under test's processes, and
// the socket tables only when it holds a socket it did not hold at the
// last look, so a service on keep-alive connections costs one listing of
// its descriptors per look.
type graph struct {
	procRoot string
	nodes    []graphNode
	parts    int            // how many nodes were known before the run
	keys     map[string]int // what a node listens on ("tcp <netns>:8000", "unix /run/app.sock") → its index

	held    map[uint64]int // the system under test's sockets at the last look → the pid holding one
	now     map[uint64]int // scratch: its sockets now
	socks   []tcpSocket    // scratch
	fds     fdReader
	hostNS  string         // tare's network namespace, "net:[4026531840]"; "" when it cannot be read
	netns   map[int]nsSeen // pid → its network namespace, read once per process
	unixAll func() ([]unixSocket, error)
	// drain returns the connections processes opened since the last call,
	// traced in the kernel (schedprobe.Connects); nil without the tracer.
	drain      func() ([]schedprobe.Connect, error)
	traced     []schedprobe.Connect        // scratch: the system under test's, this look
	tracedSeen map[schedprobe.Connect]bool // scratch: those in traced
	looks      int                         // looks that read the socket tables
	unfound    map[string]int              // listeners whose holders were not found → the look that tried

	// What one look learnt of the host's network namespaces, each read
	// at most once a look and only when needed; cleared by tcpCallees.
	nsByPID map[string]int        // namespace → a process of it (the lowest pid once nsAll)
	nsAll   bool                  // whether nsByPID holds every namespace of the host
	tables  map[string]*tcpTable  // namespace → its TCP sockets
	locals  map[string]localAddrs // namespace → its own addresses
}

type graphNode struct {
	name      string
	roots     []int
	reachedBy string
	from      int // the node that called it; -1 for a part known before the run
}

// nsSeen is a process's network namespace, with the start time that tells
// a reused pid apart.
type nsSeen struct {
	start uint64
	ns    string
}

// maxHops bounds how many times one look follows new nodes' connections
// (proxy → app → database is three): a loop of calls cannot run away.
const maxHops = 8

func newGraph(procRoot string, parts []Part) *graph {
	g := &graph{procRoot: procRoot, keys: map[string]int{}, held: map[uint64]int{}, now: map[uint64]int{},
		netns: map[int]nsSeen{}, unixAll: unixSockets, unfound: map[string]int{}, tracedSeen: map[schedprobe.Connect]bool{},
		nsByPID: map[string]int{}, tables: map[string]*tcpTable{}, locals: map[string]localAddrs{}}
	g.hostNS, _ = os.Readlink(filepath.Join(procRoot, "self", "ns", "net"))
	for _, p := range parts {
		if len(p.PIDs) > 0 {
			g.nodes = append(g.nodes, graphNode{roots: slices.Clone(p.PIDs), reachedBy: p.How, from: -1})
		}
	}
	g.parts = len(g.nodes)
	return g
}

// roots are each node's root processes, in the graph's order, for
// members.find.
func (g *graph) roots() [][]int {
	out := make([][]int, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = n.roots
	}
	return out
}

// called are the roots of the nodes tare found during the run, sorted.
func (g *graph) called() []int {
	var pids []int
	for _, n := range g.nodes[g.parts:] {
		pids = append(pids, n.roots...)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// summary describes the nodes with the processes m holds of each now.
func (g *graph) summary(m *members, procs map[int]procStat) []tare.SUTNode {
	out := make([]tare.SUTNode, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = tare.SUTNode{Name: n.name, ReachedBy: n.reachedBy}
		if n.from >= 0 {
			out[i].From = tare.Int(n.from)
		}
	}
	for pid, i := range m.node {
		out[i].PIDs = append(out[i].PIDs, pid)
	}
	for i := range out {
		slices.Sort(out[i].PIDs)
		if out[i].PIDs == nil {
			out[i].PIDs = slices.Clone(g.nodes[i].roots) // gone: as last known
		}
		if out[i].Name == "" {
			out[i].Name = procs[out[i].PIDs[0]].Comm
			g.nodes[i].name = out[i].Name
		}
	}
	return out
}

// look follows the connections the processes of m's system under test
// opened since the last look, adds a node for each listening socket they
// lead to that is not one yet, and reports whether it added any. m must
// be found again (members.find with roots) before the next look, so that
// the new nodes' own connections are followed.
func (g *graph) look(procs map[int]procStat, m *members) bool {
	// Name the parts once their processes are seen.
	for i := range g.nodes[:g.parts] {
		if g.nodes[i].name == "" {
			g.nodes[i].name = procs[slices.Min(g.nodes[i].roots)].Comm
		}
	}
	clear(g.now)
	fresh := false
	for pid := range m.sut {
		g.fds.sockets(g.procRoot, pid, func(ino uint64) bool {
			g.now[ino] = pid
			if _, ok := g.held[ino]; !ok {
				fresh = true
			}
			return true
		})
	}
	// The socket tables list every socket of the host, and reading them
	// walks the kernel's whole connection hash: about as much CPU as the
	// sampler's every other reading together. Sockets held at the last
	// look (a service's keep-alive connections) can lead nowhere new,
	// unless the kernel saw it open others since (and close them again).
	g.traced = g.traced[:0]
	if g.drain != nil {
		all, _ := g.drain() // a failed read leaves the look to the socket tables
		clear(g.tracedSeen)
		for _, c := range all {
			// A proxy's child for each connection is an entry each: one
			// for the member it counts for is enough.
			if pid, ok := tracedMember(c, procs, m); ok {
				c.PID, c.Ancestors = pid, [schedprobe.Ancestry]int{}
				if !g.tracedSeen[c] {
					g.tracedSeen[c] = true
					g.traced = append(g.traced, c)
				}
			}
		}
	}
	if !fresh && len(g.traced) == 0 {
		return false
	}
	newSocks := map[uint64]int{}
	for ino, pid := range g.now {
		if _, ok := g.held[ino]; !ok {
			newSocks[ino] = pid
		}
	}
	g.held, g.now = g.now, g.held
	g.looks++

	added := false
	for _, c := range g.tcpCallees(newSocks, procs, m) {
		added = g.add(c, procs, m) || added
	}
	// Sockets that were not TCP (Unix, or others), or Unix connects traced.
	if len(newSocks) > 0 || slices.ContainsFunc(g.traced, func(c schedprobe.Connect) bool { return c.Unix != "" }) {
		for _, c := range g.unixCallees(newSocks, procs, m) {
			added = g.add(c, procs, m) || added
		}
	}
	return added
}

// tracedMember is the process of the system under test that a traced
// connect counts for: the one that connected or, when that one is not in
// the process table (a proxy's child forked for one connection after the
// table was read, and gone since), the nearest of the processes it
// descended from that is. A process in the table but not in the system
// under test (a client, or one the user excluded) is not its, whatever
// it descends from.
func tracedMember(c schedprobe.Connect, procs map[int]procStat, m *members) (int, bool) {
	for i := -1; i < len(c.Ancestors); i++ {
		pid := c.PID
		if i >= 0 {
			pid = c.Ancestors[i]
		}
		if m.sut[pid] {
			return pid, true
		}
		if _, known := procs[pid]; known || pid <= 1 {
			return 0, false
		}
	}
	return 0, false
}

// callee is where one connection of the system under test leads.
type callee struct {
	key    string // what it listens on, one node per key
	owners []int  // the holders of that listening socket
	via    string // "tcp 127.0.0.1:8000", "unix /run/app.sock"
	caller int    // the pid of the system under test that opened the connection
	socket uint64 // that connection's socket
}

// add makes c a node unless it is one, or its holders are tare's or the
// system under test's already, or the user excluded them.
func (g *graph) add(c callee, procs map[int]procStat, m *members) bool {
	if _, ok := g.keys[c.key]; ok {
		return false
	}
	var roots []int
	for _, pid := range c.owners {
		if !m.sut[pid] && !m.tare[pid] && (m.excluded == nil || !m.excluded(pid, procs[pid].Comm)) {
			roots = append(roots, pid)
		}
	}
	if len(c.owners) == 0 {
		g.unfound[c.key] = g.looks // the listener's holder may show yet: look again later
		delete(g.held, c.socket)
		return false
	}
	delete(g.unfound, c.key)
	if len(roots) == 0 {
		return false
	}
	from := m.node[c.caller]
	g.keys[c.key] = len(g.nodes)
	g.nodes = append(g.nodes, graphNode{
		name:      procs[roots[0]].Comm,
		roots:     roots,
		reachedBy: fmt.Sprintf("%s from %s", c.via, g.nodes[from].name),
		from:      from,
	})
	return true
}

// tcpCallees finds where the system under test's new TCP connections
// lead, removing from socks the sockets it found in the TCP tables. A
// connection in any state counts, a closing one too: a proxy's upstream
// connection to an app server that closes after each response (gunicorn's
// sync workers) lives a few milliseconds established and longer closing.
func (g *graph) tcpCallees(socks map[uint64]int, procs map[int]procStat, m *members) []callee {
	here := indexTCP(g.readTCP(g.procRoot))
	clear(g.nsByPID)
	clear(g.tables)
	clear(g.locals)
	g.nsAll, g.tables[g.hostNS] = false, here
	var out []callee
	done := map[string]bool{} // keys resolved in this look
	for _, s := range here.socks {
		pid, ours := socks[s.Inode]
		if !ours || s.Inode == 0 {
			continue
		}
		delete(socks, s.Inode)
		if s.State == tcpListen || here.listensOn(s.Local) {
			continue // not a connection, or one it accepted: a client's
		}
		dst := s.Remote
		c := callee{caller: pid, socket: s.Inode, via: "tcp " + dst.String()}
		table, ns := here, g.hostNS
		if !dst.Addr().Unmap().IsLoopback() && !here.hasPeer(s) {
			found := false
			for key := range g.namespaces(procs) {
				if g.hostNS == "" || key == g.hostNS {
					continue // tare's own, or none told apart from it
				}
				if t := g.table(key); t.hasPeer(s) {
					ns, table, found = key, t, true
					c.via = fmt.Sprintf("tcp %s in netns of pid %d", dst, g.nsByPID[key])
					break
				}
			}
			if !found {
				continue // a remote host, or a namespace tare cannot see
			}
		}
		c.key = fmt.Sprintf("tcp %s:%d", ns, dst.Port())
		if _, known := g.keys[c.key]; known || done[c.key] || !g.due(c.key) {
			continue
		}
		done[c.key] = true
		if inodes := table.listeners(dst); len(inodes) > 0 {
			c.owners = socketOwners(g.procRoot, inodes)
		}
		out = append(out, c)
	}
	// The connections the kernel saw it open to this host's listeners,
	// in its own network namespace or another, closed by now or not.
	for _, t := range g.traced {
		if !t.TCP.IsValid() {
			continue
		}
		ns, ok := g.tracedNamespace(t, procs)
		if !ok {
			continue // a remote host, or a namespace tare cannot see
		}
		c := callee{caller: t.PID, via: "tcp " + t.TCP.String(), key: fmt.Sprintf("tcp %s:%d", ns, t.TCP.Port())}
		if ns != g.hostNS {
			c.via = fmt.Sprintf("tcp %s in netns of pid %d", t.TCP, g.namespaces(procs)[ns])
		}
		inodes := g.table(ns).listeners(t.TCP)
		if len(inodes) == 0 || done[c.key] || !g.due(c.key) {
			continue
		}
		if _, known := g.keys[c.key]; known {
			continue
		}
		done[c.key] = true
		c.owners = socketOwners(g.procRoot, inodes)
		out = append(out, c)
	}
	return out
}

// tcpTable is a namespace's TCP sockets, indexed for the questions a
// look asks of each of the system under test's connections.
type tcpTable struct {
	socks  []tcpSocket
	listen map[uint16][]tcpSocket     // listening sockets by port
	conns  map[[2]netip.AddrPort]bool // local, remote of every connection; made by the first hasPeer
}

func indexTCP(socks []tcpSocket) *tcpTable {
	t := &tcpTable{socks: socks, listen: map[uint16][]tcpSocket{}}
	for _, s := range socks {
		if s.State == tcpListen {
			t.listen[s.Local.Port()] = append(t.listen[s.Local.Port()], s)
		}
	}
	return t
}

func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// listeners are the inodes of the sockets listening where addr points:
// on its port, at its address or at every address.
func (t *tcpTable) listeners(addr netip.AddrPort) map[uint64]bool {
	inodes := map[uint64]bool{}
	for _, l := range t.listen[addr.Port()] {
		if l.Inode != 0 && (l.Local.Addr().IsUnspecified() || l.Local.Addr().Unmap() == addr.Addr().Unmap()) {
			inodes[l.Inode] = true
		}
	}
	return inodes
}

// listensOn reports whether a socket of the table listens where addr is:
// then a connection at addr is one that was accepted there.
func (t *tcpTable) listensOn(addr netip.AddrPort) bool { return len(t.listeners(addr)) > 0 }

// hasPeer reports whether the table holds the other end of connection s:
// the socket bound where s points, pointing back at s.
func (t *tcpTable) hasPeer(s tcpSocket) bool {
	if t.conns == nil {
		t.conns = make(map[[2]netip.AddrPort]bool, len(t.socks))
		for _, c := range t.socks {
			if c.State != tcpListen {
				t.conns[[2]netip.AddrPort{unmap(c.Local), unmap(c.Remote)}] = true
			}
		}
	}
	return t.conns[[2]netip.AddrPort{unmap(s.Remote), unmap(s.Local)}]
}

// due reports whether a listener whose holders were not found may be
// looked for again: every retryEvery looks, since finding them reads
// every descriptor on the host.
func (g *graph) due(key string) bool {
	at, failed := g.unfound[key]
	return !failed || g.looks-at >= retryEvery
}

// retryEvery is how many looks apart the holders of a listening socket
// that no visible process held are looked for again: one may yet show (a
// server starting), or never (a process tare may not read).
const retryEvery = 8

// tracedNamespace is the network namespace a traced connect went to: a
// loopback address is the connecting process's own namespace; another
// address, the namespace that has it as its own (a container's, behind
// a proxy on the host), the connecting process's first. Where several
// namespaces have it, the one listening there; it is not known when none
// has it (a remote host), or more than one listens.
func (g *graph) tracedNamespace(t schedprobe.Connect, procs map[int]procStat) (string, bool) {
	if g.hostNS == "" {
		return "", true // tare's own namespace unknown: the others cannot be told apart from it
	}
	own := g.nsOf(t.PID, procs)
	addr := t.TCP.Addr().Unmap()
	if addr.IsLoopback() || g.local(own).has(addr) {
		return own, true
	}
	var found []string
	for ns := range g.namespaces(procs) {
		if g.local(ns).has(addr) {
			found = append(found, ns)
		}
	}
	if len(found) > 1 {
		found = slices.DeleteFunc(found, func(ns string) bool { return len(g.table(ns).listeners(t.TCP)) == 0 })
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// namespaces names one process (the lowest pid) of each network
// namespace of the host's user processes, read once a look.
func (g *graph) namespaces(procs map[int]procStat) map[string]int {
	if !g.nsAll {
		maps.Copy(g.nsByPID, g.nsPIDs(procs))
		g.nsAll = true
	}
	return g.nsByPID
}

// nsRoot is where the proc files of network namespace ns are: procRoot
// for tare's own, procRoot/<pid> of one of its processes for another.
func (g *graph) nsRoot(ns string) string {
	if ns == g.hostNS {
		return g.procRoot
	}
	return filepath.Join(g.procRoot, strconv.Itoa(g.nsByPID[ns]))
}

// table is the TCP sockets of network namespace ns, read once a look.
func (g *graph) table(ns string) *tcpTable {
	t, ok := g.tables[ns]
	if !ok {
		t = indexTCP(g.readTCP(g.nsRoot(ns)))
		g.tables[ns] = t
	}
	return t
}

// local is the addresses of network namespace ns, read once a look.
func (g *graph) local(ns string) localAddrs {
	l, ok := g.locals[ns]
	if !ok {
		l = readLocalAddrs(g.nsRoot(ns))
		g.locals[ns] = l
	}
	return l
}

// nsOf is the network namespace of process pid: tare's own when it
// cannot be read.
func (g *graph) nsOf(pid int, procs map[int]procStat) string {
	p, ok := procs[pid]
	if !ok {
		return g.hostNS
	}
	seen, cached := g.netns[pid]
	if !cached || seen.start != p.Start {
		link, err := os.Readlink(filepath.Join(g.procRoot, strconv.Itoa(pid), "ns", "net"))
		if err != nil {
			return g.hostNS
		}
		seen = nsSeen{start: p.Start, ns: link}
		g.netns[pid] = seen
	}
	if _, ok := g.nsByPID[seen.ns]; !ok {
		g.nsByPID[seen.ns] = pid
	}
	return seen.ns
}

// nsPIDs names one process (the lowest pid) of each network namespace of
// the host's user processes.
func (g *graph) nsPIDs(procs map[int]procStat) map[string]int {
	out := map[string]int{}
	for pid, p := range procs {
		if p.KThread {
			continue
		}
		seen, ok := g.netns[pid]
		if !ok || seen.start != p.Start {
			link, err := os.Readlink(filepath.Join(g.procRoot, strconv.Itoa(pid), "ns", "net"))
			if err != nil {
				continue
			}
			seen = nsSeen{start: p.Start, ns: link}
			g.netns[pid] = seen
		}
		if first, ok := out[seen.ns]; !ok || pid < first {
			out[seen.ns] = pid
		}
	}
	for pid := range g.netns {
		if _, ok := procs[pid]; !ok {
			delete(g.netns, pid)
		}
	}
	return out
}

// unixSocket is what the graph needs of one Unix-domain socket of the
// host: its inode, type, state, bound name and the inode of its peer.
type unixSocket struct {
	Inode uint64
	Type  uint8  // SOCK_STREAM 1, SOCK_DGRAM 2, SOCK_SEQPACKET 5
	State uint8  // TCP_LISTEN (10) for a listening socket
	Name  string // the path it is bound to ("@name" for the abstract namespace); "" for none
	Peer  uint64 // the socket at the other end of a connected one; 0 for none
	// FileIno and FileDev are the file a socket is bound to (its inode,
	// and its device as the kernel's dev_t); 0 unless asked for.
	FileIno uint64
	FileDev uint32
}

// unixCallees finds where the system under test's new Unix-domain stream
// connections lead. A connection it opened is unnamed at its end and
// named at the far end, where the accepted socket carries the path of the
// listening one (unix(7)); a socket bound at its own end is one it listens
// on or accepted, and a pair with no name on either end (socketpair) is
// the service talking to itself or its parent.
func (g *graph) unixCallees(socks map[uint64]int, procs map[int]procStat, m *members) []callee {
	all, err := g.unixAll()
	if err != nil || len(all) == 0 {
		return nil
	}
	byInode := make(map[uint64]*unixSocket, len(all))
	listening := map[string][]uint64{}
	for i := range all {
		u := &all[i]
		byInode[u.Inode] = u
		if u.State == tcpListen && u.Name != "" {
			listening[u.Name] = append(listening[u.Name], u.Inode)
		}
	}
	var out []callee
	done := map[string]bool{}
	resolve := func(c callee, name string) {
		if _, known := g.keys[c.key]; known || done[c.key] || !g.due(c.key) {
			return
		}
		done[c.key] = true
		inodes := map[uint64]bool{}
		for _, l := range listening[name] {
			inodes[l] = true
		}
		if len(inodes) > 0 {
			c.owners = socketOwners(g.procRoot, inodes)
		}
		out = append(out, c)
	}
	for _, t := range g.traced {
		if t.Unix != "" && len(listening[t.Unix]) > 0 {
			resolve(callee{key: "unix " + t.Unix, via: "unix " + t.Unix, caller: t.PID}, t.Unix)
		}
	}
	for ino, pid := range socks {
		u := byInode[ino]
		if u == nil || u.Name != "" || (u.Type != unixStream && u.Type != unixSeqPacket) {
			continue
		}
		peer := byInode[u.Peer]
		if peer == nil || peer.Name == "" {
			continue
		}
		resolve(callee{key: "unix " + peer.Name, via: "unix " + peer.Name, caller: pid, socket: ino}, peer.Name)
	}
	slices.SortFunc(out, func(a, b callee) int { return strings.Compare(a.key, b.key) })
	return out
}

// Unix socket types (socket(2)).
const (
	unixStream    = 1
	unixSeqPacket = 5
)

// excluder returns whether a process is one of those named (a pid, or a
// command name), nil when none is. A name the kernel cut at commLen bytes
// (as ps -o comm shows it) names the process as well as its whole name.
func excluder(named []string) func(pid int, comm string) bool {
	if len(named) == 0 {
		return nil
	}
	pids, comms := map[int]bool{}, map[string]bool{}
	for _, n := range named {
		if pid, err := strconv.Atoi(n); err == nil {
			pids[pid] = true
		} else {
			comms[n] = true
		}
	}
	return func(pid int, comm string) bool {
		return pids[pid] || comms[comm] || len(comm) > commLen && comms[comm[:commLen]]
	}
}

// readTCP reads the TCP sockets of the network namespace whose proc files
// are under root (procRoot, or procRoot/<pid> for another namespace).
func (g *graph) readTCP(root string) []tcpSocket {
	g.socks = g.socks[:0]
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(root, "net", name))
		if err != nil {
			continue
		}
		if socks, err := parseNetTCP(b, g.socks); err == nil {
			g.socks = socks
		}
	}
	return slices.Clone(g.socks)
}
