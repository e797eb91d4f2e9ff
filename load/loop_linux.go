package load

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/rawio"
)

// engine is one event loop: a goroutine locked to its OS thread, waiting
// in an epoll of its own with raw system calls, owning its connections.
// Per request it arms the timer for the next arrival, writes, waits, reads
// and parses, and records, with no goroutine handed anything and no wake
// of Go's poller: the runtime's scheduler never sees the wait.
//
//	epoll_wait ─┬─ timerfd: an arrival is due ─▶ a connection (the idle one
//	            │                                 used last, or a new one, or a
//	            │                                 wait for one at the limit) ─▶ write
//	            ├─ socket readable ─▶ read ─▶ Codec.Parse ─▶ result, connection idle
//	            └─ eventfd: the run stopped (arrivals) or was cut short (requests)
type engine struct {
	r    *Runner
	wire tare.Wire
	feed *feed
	out  chan<- *Batch
	cap  int // requests in flight at most: this engine's share of MaxInFlight

	epfd, tfd, efd int
	events         []unix.EpollEvent
	eps            []*endpoint
	conns          []*conn // by descriptor
	counter        *tare.ConnCounter
	// reused and waited are counted here and added to counter at each
	// flush: an atomic add per request, shared by the engines' threads,
	// would move its cache line between their cores at every request.
	reused, waited int64
	rbuf, wbuf     []byte
	spare          []*request // finished requests, reused

	first, last *request // in flight, in the order sent: their deadlines' order too
	inFlight    int

	next      arrival // the next arrival claimed from the feed
	hasNext   bool
	armedFor  time.Time // the arrival the timer was last armed for (it may have fired)
	saturated bool      // an arrival found every slot taken
	freedAt   time.Time // when a slot came free after saturated: arrivals before it were dropped

	results *Batch // recorded, not yet sent to out; nil when none
	flushBy time.Time

	stop, abort atomic.Bool // the arrivals end; the requests in flight are canceled
	stopped     bool
	wakeMu      sync.Mutex // guards efd against wake after close

	h2 h2engine // HTTP/2's connections (h2_linux.go)
}

// endpoint is one Endpoint in one engine: its codecs, and the pool of
// connections to its server.
type endpoint struct {
	tare.Endpoint
	index  int
	pool   *pool
	codecs []tare.Codec
	h2     *h2endpoint // HTTP/2's request; nil for HTTP/1.1
}

// pool is the connections to one server (an address, or a Unix socket) in
// one engine, shared by the endpoints that name it: a targets file's
// requests to one server take each other's idle connections, and the
// limit is on the server's connections, not each request's.
type pool struct {
	addrs   []unix.Sockaddr // resolved when the run starts
	addr    int             // the address connections go to
	dnsErr  error           // the address did not resolve: every request fails with it
	idle    []*conn         // a stack: the connection idle last is taken first
	open    int             // connections open or connecting
	max     int             // this engine's share of the limit; 0: none
	waiting []*request      // at max: requests waiting for a connection, first come first served
	h2      []*conn         // HTTP/2: open or opening, the one a stream last ended on last
}

type conn struct {
	fd         int
	id         uint64 // the counter's number for it, once established; 0 before
	pool       *pool
	req        *request // nil while idle
	served     int      // requests this connection completed
	out        []byte   // what a write left for the descriptor to take
	connecting bool
	tries      int // addresses tried by this connection's connect
	idleAt     int // index in pool.idle while idle, else -1

	h2 *h2conn // HTTP/2's state; nil for HTTP/1.1
}

type request struct {
	res        tare.Result
	codec      tare.Codec
	ep         *endpoint
	conn       *conn
	deadline   time.Time
	prev, next *request

	h2stream // HTTP/2's stream, when the endpoint's request is HTTP/2
}

const (
	burstMax   = 64                    // arrivals fired in one pass before the sockets get their turn
	flushEvery = 50 * time.Millisecond // results wait this long at most before they go to out (each flush wakes the consumer)
	flushMax   = 1024                  // or this many
	waitMax    = 100 * time.Millisecond
	readBuffer = 64 << 10
)

// newEngine makes the engine's epoll, timerfd and eventfd, and resolves
// the addresses of the endpoints' servers, each with its share of their
// connection limit (limits: the server's key → its share).
func newEngine(ctx context.Context, r *Runner, wire tare.Wire, eps []tare.Endpoint, limits map[string]int, f *feed, out chan<- *Batch, cap int) (*engine, error) {
	e := &engine{r: r, wire: wire, feed: f, out: out, cap: max(cap, 1), epfd: -1, tfd: -1, efd: -1,
		events: make([]unix.EpollEvent, 128), rbuf: make([]byte, readBuffer), counter: r.counter}
	var err error
	if e.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if e.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		e.close()
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	if e.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		e.close()
		return nil, os.NewSyscallError("eventfd", err)
	}
	// The timerfd edge-triggered: each expiry wakes the loop once, and
	// none needs reading or disarming (armTimer).
	for fd, events := range map[int]uint32{e.tfd: unix.EPOLLIN | unix.EPOLLET, e.efd: unix.EPOLLIN} {
		if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)}); err != nil {
			e.close()
			return nil, os.NewSyscallError("epoll_ctl", err)
		}
	}
	pools := map[string]*pool{}
	for i, ep := range eps {
		key := poolKey(ep)
		p := pools[key]
		if p == nil {
			p = &pool{max: limits[key]}
			if ep.Unix != "" {
				p.addrs = []unix.Sockaddr{&unix.SockaddrUnix{Name: ep.Unix}}
			} else {
				p.addrs, p.dnsErr = resolve(ctx, ep.Addr)
			}
			pools[key] = p
		}
		e.eps = append(e.eps, &endpoint{Endpoint: ep, index: i, pool: p, h2: newH2Endpoint(ep.H2)})
	}
	return e, nil
}

// poolKey names the server an endpoint's connections go to.
func poolKey(ep tare.Endpoint) string {
	if ep.Unix != "" {
		return "unix " + ep.Unix
	}
	return ep.Addr
}

// resolve looks host:port up once, for every connection of the run.
func resolve(ctx context.Context, hostport string) ([]unix.Sockaddr, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: hostport}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		p, perr := net.DefaultResolver.LookupPort(ctx, "tcp", portStr)
		if perr != nil {
			return nil, perr
		}
		port = p
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	var addrs []unix.Sockaddr
	for _, ip := range ips {
		ip = ip.Unmap()
		if ip.Is4() {
			addrs = append(addrs, &unix.SockaddrInet4{Port: port, Addr: ip.As4()})
		} else {
			addrs = append(addrs, &unix.SockaddrInet6{Port: port, Addr: ip.As16()})
		}
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// wake interrupts the engine's wait: it looks at stop and abort. It may be
// called from any goroutine, until close.
func (e *engine) wake() {
	e.wakeMu.Lock()
	defer e.wakeMu.Unlock()
	if e.efd >= 0 {
		one := [8]byte{1}
		rawio.Write(e.efd, one[:])
	}
}

// close closes the engine's descriptors, once its loop is over.
func (e *engine) close() {
	e.h2.shut()
	e.wakeMu.Lock()
	defer e.wakeMu.Unlock()
	for _, c := range e.conns {
		if c != nil {
			closeFD(c.fd)
			if c.id != 0 {
				e.counter.Close(true)
			}
		}
	}
	for _, fd := range []int{e.tfd, e.efd, e.epfd} {
		if fd >= 0 {
			closeFD(fd)
		}
	}
	e.conns, e.tfd, e.efd, e.epfd = nil, -1, -1, -1
}

func closeFD(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

// run is the loop, until the arrivals are over (or stopped) and nothing is
// in flight. It runs on a locked thread.
func (e *engine) run() {
	e.hasNext = e.claim()
	for {
		now := time.Now()
		if e.abort.Load() {
			e.cancelAll(now)
		}
		if !e.stopped && e.stop.Load() {
			e.stopped, e.hasNext = true, false
		}
		e.arrivals(now)
		if !e.hasNext && e.inFlight == 0 {
			break
		}
		if len(e.h2.dirty) > 0 {
			e.h2Flush()
		}
		e.armTimer(now)
		n, err := rawio.EpollWait(e.epfd, e.events, e.waitFor(now))
		if err != nil {
			// Nothing in this loop's control fails epoll_wait; wait less
			// rather than spin if something does.
			time.Sleep(time.Millisecond)
			continue
		}
		for _, ev := range e.events[:n] {
			switch fd := int(ev.Fd); fd {
			case e.tfd: // an arrival's time: arrivals fires it
			case e.efd:
				var b [8]byte
				rawio.Read(e.efd, b[:])
				e.h2take()
			default:
				if fd < len(e.conns) && e.conns[fd] != nil {
					e.ready(e.conns[fd], ev.Events)
				}
			}
		}
		now = time.Now()
		e.expire(now)
		if e.results != nil && (len(e.results.Results) >= flushMax || !now.Before(e.flushBy)) {
			e.flush()
		}
	}
	if e.armedFor.After(time.Now()) {
		rawio.SetTimerAt(e.tfd, time.Time{})
	}
	e.flush()
}

// claim takes the next arrival from the feed.
func (e *engine) claim() bool {
	if e.stopped {
		return false
	}
	a, ok := e.feed.claim()
	e.next = a
	return ok
}

// arrivals fires every arrival due by now, or drops it when every slot is
// taken; arrivals scheduled while every slot was taken, before one came
// free, are dropped at once, as the goroutine engine does.
func (e *engine) arrivals(now time.Time) {
	for burst := 0; e.hasNext && !e.next.scheduled.After(now) && burst < burstMax; burst++ {
		switch {
		case e.inFlight >= e.cap:
			e.saturated = true
			e.drop(e.next)
		case e.next.scheduled.Before(e.freedAt):
			e.drop(e.next)
		default:
			e.dispatch(e.next, now)
		}
		e.hasNext = e.claim()
	}
}

// armTimer sets the timerfd for the next arrival's instant when it is
// still to come (an absolute instant: the write just made for the arrival
// before would have made a relative timer late by as long). One already
// due needs none: the loop does not wait then (waitFor is 0). While
// every slot is taken, or no arrival is left, a timer armed
// before is left to fire once for nothing rather than disarmed: at the
// highest rates disarming cost a system call a request, and on a
// paravirtualised guest each one pays for enabling interrupts again. The
// timerfd is edge-triggered, so an expiry never needs clearing either.
func (e *engine) armTimer(now time.Time) {
	if !e.hasNext || e.inFlight >= e.cap {
		return
	}
	want := e.next.scheduled
	if !want.After(now) || want == e.armedFor {
		return
	}
	rawio.SetTimerAt(e.tfd, want)
	e.armedFor = want
}

// waitFor is how long epoll_wait may wait, in milliseconds: until the
// first request's deadline, the results' flush, the saturated poll, or no
// wait at all when arrivals are already due (a burst left some).
func (e *engine) waitFor(now time.Time) int {
	if e.hasNext && !e.next.scheduled.After(now) && e.inFlight < e.cap {
		return 0
	}
	wait := waitMax
	if e.hasNext && e.inFlight >= e.cap {
		wait = saturatedPoll
	}
	if e.first != nil {
		wait = min(wait, e.first.deadline.Sub(now))
	}
	if e.results != nil {
		wait = min(wait, e.flushBy.Sub(now))
	}
	if wait <= 0 {
		return 0
	}
	return int((wait + time.Millisecond - 1) / time.Millisecond)
}

func (e *engine) drop(a arrival) {
	e.r.dropped.Add(1)
	drop(e.batch(), a)
}

func (e *engine) record(res tare.Result) {
	b := e.batch()
	b.Results = append(b.Results, res)
}

// batch is the batch the results go to until the next flush.
func (e *engine) batch() *Batch {
	if e.results == nil {
		e.results = NewBatch()
		e.flushBy = time.Now().Add(flushEvery)
	}
	return e.results
}

// flush hands the results recorded to out: in one batch, so the consumer
// wakes once for many results, not once per request.
func (e *engine) flush() {
	if e.reused > 0 || e.waited > 0 {
		e.counter.Reuse(e.reused)
		e.counter.Wait(e.waited)
		e.reused, e.waited = 0, 0
	}
	if e.results != nil {
		e.out <- e.results
		e.results = nil
	}
}

// dispatch starts arrival a's request.
func (e *engine) dispatch(a arrival, now time.Time) {
	i := e.wire.Route(a.seq)
	ep := e.eps[i]
	req := e.newRequest()
	req.ep = ep
	req.res = tare.Result{Seq: a.seq, Scheduled: a.scheduled, Sent: now, TargetIndex: i}
	req.deadline = now.Add(ep.Timeout)
	if ep.h2 == nil {
		if n := len(ep.codecs); n > 0 {
			req.codec = ep.codecs[n-1]
			ep.codecs = ep.codecs[:n-1]
		} else {
			req.codec = ep.NewCodec()
		}
		req.codec.Begin(&req.res)
	}
	// In flight in the order sent: with one timeout per endpoint, nearly
	// the order of the deadlines, which expire checks from the first.
	req.prev = e.last
	if e.last != nil {
		e.last.next = req
	} else {
		e.first = req
	}
	e.last = req
	e.inFlight++
	e.r.sent.Add(1)
	if err := ep.pool.dnsErr; err != nil {
		req.res.Err = tare.ErrorKind(err)
		e.finish(req, now)
		return
	}
	if ep.h2 != nil {
		e.h2assign(req)
		return
	}
	e.assign(req)
}

func (e *engine) newRequest() *request {
	if n := len(e.spare); n > 0 {
		req := e.spare[n-1]
		e.spare = e.spare[:n-1]
		return req
	}
	return &request{}
}

// assign gives req a connection: the one idle last, a new one while the
// server has fewer than its limit open, or else a place in its queue.
func (e *engine) assign(req *request) {
	p := req.ep.pool
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		c.idleAt = -1
		e.send(c, req)
		return
	}
	if p.open < p.max || p.max <= 0 {
		e.connect(p, req)
		return
	}
	e.waited++
	p.waiting = append(p.waiting, req)
}

// connect opens a non-blocking connection for req; the request is written
// when it is established.
func (e *engine) connect(p *pool, req *request) {
	c := &conn{fd: -1, pool: p, req: req, idleAt: -1, connecting: true}
	req.conn = c
	p.open++
	if err := e.dial(c); err != nil {
		e.connectFailed(c, err)
	}
}

// dial starts c's connect to its server's current address.
func (e *engine) dial(c *conn) error {
	sa := c.pool.addrs[c.pool.addr]
	family := unix.AF_INET
	switch sa.(type) {
	case *unix.SockaddrInet6:
		family = unix.AF_INET6
	case *unix.SockaddrUnix:
		family = unix.AF_UNIX
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	if family != unix.AF_UNIX {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	c.fd = fd
	for fd >= len(e.conns) {
		e.conns = append(e.conns, nil)
	}
	e.conns[fd] = c
	// A Unix socket's connect completes at once or fails (EAGAIN: the
	// listener's backlog is full, which Go's net fails on too); TCP's
	// completes later, when the socket turns writable.
	err = unix.Connect(fd, sa)
	switch err {
	case nil:
		c.connecting = false
		if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
		c.id = e.counter.Open()
		e.send(c, c.req)
		return nil
	case unix.EINPROGRESS:
		if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(fd)}); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
		return nil
	}
	return os.NewSyscallError("connect", err)
}

// connectFailed is a connect that failed with err: tried at the endpoint's
// next address, if it has one this connection has not tried, else the
// request fails, as a dial error.
func (e *engine) connectFailed(c *conn, err error) {
	p := c.pool
	e.forget(c)
	c.tries++
	if c.tries < len(p.addrs) {
		p.addr = (p.addr + 1) % len(p.addrs)
		if err = e.dial(c); err == nil {
			return
		}
		e.forget(c)
	}
	p.open--
	req := c.req
	c.req, req.conn = nil, nil
	network := "tcp"
	if req.ep.Unix != "" {
		network = "unix"
	}
	req.res.Err = tare.ErrorKind(&net.OpError{Op: "dial", Net: network, Err: err})
	e.finish(req, time.Now())
	e.serveWaiting(p)
}

// forget closes c's descriptor, keeping c itself.
func (e *engine) forget(c *conn) {
	if c.fd >= 0 && c.fd < len(e.conns) && e.conns[c.fd] == c {
		e.conns[c.fd] = nil
		closeFD(c.fd)
	}
	c.fd = -1
}

// send writes req's request on c.
func (e *engine) send(c *conn, req *request) {
	c.req, req.conn = req, c
	req.res.Conn = c.id
	if c.served > 0 {
		e.reused++
	}
	e.wbuf = req.codec.Request(e.wbuf[:0])
	n, err := rawio.Write(c.fd, e.wbuf)
	switch err {
	case nil:
	case unix.EAGAIN:
		// The rest goes as the socket takes it.
		c.out = append(c.out[:0], e.wbuf[n:]...)
		e.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLOUT)
	default:
		e.ended(c, err)
	}
}

func (e *engine) watch(c *conn, events uint32) {
	unix.EpollCtl(e.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.fd)})
}

// ready handles the events of c.
func (e *engine) ready(c *conn, events uint32) {
	if c.h2 != nil {
		e.h2events(c, events)
		return
	}
	if c.connecting {
		c.connecting = false
		if soErr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soErr != 0 {
			if err == nil {
				err = os.NewSyscallError("connect", unix.Errno(soErr))
			}
			c.connecting = true
			e.connectFailed(c, err)
			return
		}
		e.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP)
		c.id = e.counter.Open()
		e.send(c, c.req)
		return
	}
	if c.req == nil {
		// An idle connection has nothing to say: the server closed it
		// (or broke the protocol). It is closed before a request finds it.
		e.closeConn(c)
		return
	}
	if events&unix.EPOLLOUT != 0 && len(c.out) > 0 {
		n, err := rawio.Write(c.fd, c.out)
		c.out = c.out[:copy(c.out, c.out[n:])]
		switch {
		case err != nil && err != unix.EAGAIN:
			e.ended(c, err)
			return
		case len(c.out) == 0:
			e.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP)
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.read(c)
	}
}

// read reads what c has and parses it, while the buffer comes back full.
func (e *engine) read(c *conn) {
	for c.req != nil {
		n, err := rawio.Read(c.fd, e.rbuf)
		switch {
		case err == unix.EAGAIN:
			return
		case err != nil:
			e.ended(c, err)
			return
		case n == 0:
			e.ended(c, nil)
			return
		}
		if !e.parse(c, e.rbuf[:n]) || n < len(e.rbuf) {
			return
		}
	}
}

// parse feeds p to c's request; false when the request left c.
func (e *engine) parse(c *conn, p []byte) bool {
	req := c.req
	for len(p) > 0 {
		k, step := req.codec.Parse(p, &req.res)
		p = p[k:]
		if step == tare.StepMore {
			if k == 0 {
				return true // the codec wants more than p to go on
			}
			continue
		}
		e.stepped(c, req, step)
		return false
	}
	return true
}

// stepped carries out what the codec asked once an answer was complete.
func (e *engine) stepped(c *conn, req *request, step tare.Step) {
	keep := req.codec.KeepAlive() && len(c.out) == 0
	c.req, req.conn = nil, nil
	c.served++
	now := time.Now()
	switch step {
	case tare.StepResend:
		if keep {
			e.send(c, req)
			return
		}
		e.closeConn(c)
		e.assign(req)
		return
	case tare.StepElsewhere:
		e.handoff(req)
	default:
		e.finish(req, now)
	}
	if keep {
		e.release(c)
	} else {
		e.closeConn(c)
	}
}

// ended is c ending (err nil: an end of file) while it carried a request.
func (e *engine) ended(c *conn, err error) {
	req := c.req
	reused := c.served > 0
	c.req, req.conn = nil, nil
	e.closeConn(c)
	if req.codec.End(err, reused, &req.res) == tare.StepResend {
		e.assign(req)
		return
	}
	e.finish(req, time.Now())
}

// release makes c idle, or gives it to a request waiting for one.
func (e *engine) release(c *conn) {
	p := c.pool
	if len(p.waiting) > 0 {
		req := p.waiting[0]
		p.waiting = p.waiting[:copy(p.waiting, p.waiting[1:])]
		e.send(c, req)
		return
	}
	c.idleAt = len(p.idle)
	p.idle = append(p.idle, c)
}

// closeConn closes c, which carries no request.
func (e *engine) closeConn(c *conn) {
	p := c.pool
	if c.idleAt >= 0 {
		// Out of the stack, the others kept in their order: the bottom
		// ones are the least recently used, the first a server closes.
		p.idle = append(p.idle[:c.idleAt], p.idle[c.idleAt+1:]...)
		for _, o := range p.idle[c.idleAt:] {
			o.idleAt--
		}
		c.idleAt = -1
	}
	e.forget(c)
	if c.id != 0 {
		e.counter.Close(false)
		c.id = 0
	}
	p.open--
	e.serveWaiting(p)
}

// serveWaiting opens a connection for the first request waiting, now that
// the server has room for one.
func (e *engine) serveWaiting(p *pool) {
	if len(p.waiting) == 0 || p.max > 0 && p.open >= p.max {
		return
	}
	req := p.waiting[0]
	p.waiting = p.waiting[:copy(p.waiting, p.waiting[1:])]
	e.connect(p, req)
}

// finish records req's result and frees its slot.
func (e *engine) finish(req *request, now time.Time) {
	if req.res.Done.IsZero() {
		req.res.Done = now
	}
	e.unlink(req)
	e.r.done.Add(1)
	e.record(req.res)
	e.recycle(req)
}

func (e *engine) unlink(req *request) {
	if req.prev != nil {
		req.prev.next = req.next
	} else {
		e.first = req.next
	}
	if req.next != nil {
		req.next.prev = req.prev
	} else {
		e.last = req.prev
	}
	req.prev, req.next = nil, nil
	e.inFlight--
	if e.saturated {
		e.saturated, e.freedAt = false, time.Now()
	}
}

func (e *engine) recycle(req *request) {
	if req.codec != nil {
		req.ep.codecs = append(req.ep.codecs, req.codec)
	}
	*req = request{}
	e.spare = append(e.spare, req)
}

// handoff sends the rest of req to a goroutine of the Runner's: a redirect
// the loop cannot follow.
func (e *engine) handoff(req *request) {
	rest := req.codec.Handoff()
	res := req.res
	e.unlink(req)
	e.recycle(req)
	e.r.handoff(rest, res)
}

// expire fails the requests whose deadline has passed.
func (e *engine) expire(now time.Time) {
	for req := e.first; req != nil; {
		next := req.next
		if now.Before(req.deadline) {
			// Sent in order with one timeout, the rest are later; with
			// several endpoints' timeouts, a later one may be earlier,
			// and is found on a later pass.
			if len(e.eps) == 1 {
				return
			}
		} else {
			e.cut(req, tare.KindTimeout, now)
		}
		req = next
	}
}

// cancelAll fails every request in flight as canceled: the run stopped
// waiting for them.
func (e *engine) cancelAll(now time.Time) {
	for e.first != nil {
		e.cut(e.first, tare.KindCanceled, now)
	}
}

// cut ends req with kind, closing its connection (the answer may still
// come) or taking it out of its endpoint's queue.
func (e *engine) cut(req *request, kind string, now time.Time) {
	req.res.Err = kind
	if c := req.conn; c != nil && c.h2 != nil {
		e.h2cancel(c, req)
	} else if c != nil {
		c.req, req.conn = nil, nil
		e.closeConn(c)
	} else {
		p := req.ep.pool
		for i, w := range p.waiting {
			if w == req {
				p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
				break
			}
		}
	}
	e.finish(req, now)
}

// A compile-time check that EpollEvent's Fd is where the kernel puts the
// data word's first four bytes, as the loop relies on.
var _ = [1]struct{}{}[unsafe.Offsetof(unix.EpollEvent{}.Fd)-4]

// runLoops is Run on event loops, for a Wire target; false when the loops
// could not be made (the caller then runs the goroutine engine).
func (r *Runner) runLoops(ctx context.Context, start time.Time, sched Schedule, out chan<- *Batch, wire tare.Wire, eps []tare.Endpoint) (Usage, bool) {
	cpu0 := processCPU()
	// Each server's connection limit, the least its endpoints give; no
	// more engines than the smallest, so that each has one connection
	// at least and the shares add up to the limit exactly.
	limits := map[string]int{}
	n := r.cfg.Engines
	for _, ep := range eps {
		if ep.MaxConns <= 0 {
			continue
		}
		key := poolKey(ep)
		if l, ok := limits[key]; !ok || ep.MaxConns < l {
			limits[key] = ep.MaxConns
		}
		n = min(n, ep.MaxConns)
	}
	f := &feed{ahead: lookahead{Schedule: sched}, start: start}
	var engines []*engine
	for i := range n {
		// Each engine takes its share of the in-flight cap and of each
		// server's connections; the feed is one schedule for them all.
		shares := make(map[string]int, len(limits))
		for key, l := range limits {
			shares[key] = l/n + boolInt(i < l%n)
		}
		e, err := newEngine(ctx, r, wire, eps, shares, f, out, r.cfg.MaxInFlight/n+boolInt(i < r.cfg.MaxInFlight%n))
		if err != nil {
			break
		}
		engines = append(engines, e)
	}
	if len(engines) == 0 {
		return Usage{}, false
	}
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	r.reqCtx, r.out = reqCtx, out
	defer raiseProcs(len(engines))()

	var wg sync.WaitGroup
	for _, e := range engines {
		// A run whose context has ended sends nothing, as on goroutines.
		e.stop.Store(ctx.Err() != nil)
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			restore := shortSlice()
			defer restore()
			e.run()
		})
	}
	stopWatch := context.AfterFunc(ctx, func() {
		for _, e := range engines {
			e.stop.Store(true)
			e.wake()
		}
	})
	abortWatch := context.AfterFunc(reqCtx, func() {
		for _, e := range engines {
			e.abort.Store(true)
			e.wake()
		}
	})
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		r.handoffs.Wait()
		close(finished)
	}()
	r.drain(ctx, finished, cancelRequests)
	stopWatch()
	abortWatch()
	for _, e := range engines {
		e.close()
	}
	close(out)
	return Usage{Wall: time.Since(start), CPU: processCPU() - cpu0, Workers: int(r.counter.Stats().Peak),
		Engine: EngineLoop, Engines: len(engines)}, true
}

// loopSlice is the time slice a loop's thread asks the scheduler for.
const loopSlice = 100 * time.Microsecond

// shortSlice asks the scheduler for a short slice for this thread (EEVDF's
// custom slice, Linux 6.12 and later; older kernels ignore it): a loop
// woken by its timer then has an earlier deadline than the thread of
// tare's own that is running (the results' consumer, the sampler), and
// takes the CPU from it rather than waiting out that thread's slice,
// which is what a send's lag was when tare shares one CPU. It returns the
// function that puts the thread's slice back, as the thread is reused.
func shortSlice() func() {
	old, err := unix.SchedGetAttr(0, 0)
	if err != nil || old.Policy != unix.SCHED_NORMAL {
		return func() {}
	}
	attr := *old
	attr.Runtime = uint64(loopSlice)
	if unix.SchedSetAttr(0, &attr, 0) != nil {
		return func() {}
	}
	return func() { unix.SchedSetAttr(0, old, 0) }
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// procs counts the engines running in this process. Each holds its P
// while it waits in epoll_wait (a raw call: the scheduler never sees it
// block), so GOMAXPROCS is raised by one per engine for the rest of the
// process (the results' consumer, the store, the sampler), which would
// otherwise, with tare on one CPU, wait for the engine's preemption.
var procs struct {
	sync.Mutex // guards the fields
	engines    int
	base       int
}

// raiseProcs adds n engines' Ps and returns the function that takes them
// back.
func raiseProcs(n int) func() {
	procs.Lock()
	defer procs.Unlock()
	if procs.engines == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.engines += n
	runtime.GOMAXPROCS(procs.base + procs.engines)
	return func() {
		procs.Lock()
		defer procs.Unlock()
		procs.engines -= n
		runtime.GOMAXPROCS(procs.base + procs.engines)
	}
}
