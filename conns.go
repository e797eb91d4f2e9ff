package tare

import "sync/atomic"

// ConnCounter counts a target's connections over a run: those opened, the
// requests that reused one, those closed before the run ended, the
// requests that waited for one at the connection limit, and how many are
// open. The load engine's event loops and the target's own net/http pool
// count into the same ConnCounter, so a run that uses both (the loop hands
// a redirect to another server to net/http) has one set of figures. Its
// methods are safe for concurrent use; the zero value is ready.
type ConnCounter struct {
	opened, reused, closed, waited atomic.Int64
	open, peak                     atomic.Int64
}

// ConnStats are a ConnCounter's counts at one moment; those of a run are
// the difference of two (Sub).
type ConnStats struct {
	Opened int64 // connections established (a connect that failed is a request's error, not a connection)
	Reused int64 // requests sent on a connection that had carried one before
	Closed int64 // connections closed while the run went on: by the server, an error, a timeout
	Waited int64 // requests that waited for a connection at the limit
	Open   int64 // connections open now
	Peak   int64 // connections open at once at most, since the last ResetPeak
}

// Sub is s since before: the counts' differences; Open and Peak are s's.
func (s ConnStats) Sub(before ConnStats) ConnStats {
	return ConnStats{Opened: s.Opened - before.Opened, Reused: s.Reused - before.Reused,
		Closed: s.Closed - before.Closed, Waited: s.Waited - before.Waited, Open: s.Open, Peak: s.Peak}
}

// Open counts a connection established and returns its number, from 1,
// unique for the counter's life: what Result.Conn records.
func (c *ConnCounter) Open() uint64 {
	n := c.open.Add(1)
	for {
		peak := c.peak.Load()
		if n <= peak || c.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	return uint64(c.opened.Add(1))
}

// Close counts a connection Open counted going away. atEnd says tare
// closed it because the run was over: it is no longer open, but it was
// not closed while the run went on.
func (c *ConnCounter) Close(atEnd bool) {
	c.open.Add(-1)
	if !atEnd {
		c.closed.Add(1)
	}
}

// Reuse counts n requests sent on a connection that had carried one
// (an event loop adds its own count now and then, not one at a time).
func (c *ConnCounter) Reuse(n int64) { c.reused.Add(n) }

// Wait counts n requests that waited for a connection at the limit.
func (c *ConnCounter) Wait(n int64) { c.waited.Add(n) }

// ResetPeak starts the high-water mark again from the connections open
// now: at the start of a run.
func (c *ConnCounter) ResetPeak() { c.peak.Store(c.open.Load()) }

// Stats returns the counts now.
func (c *ConnCounter) Stats() ConnStats {
	return ConnStats{Opened: c.opened.Load(), Reused: c.reused.Load(), Closed: c.closed.Load(),
		Waited: c.waited.Load(), Open: c.open.Load(), Peak: c.peak.Load()}
}

// ConnCounted is a Target that counts its connections: the HTTP targets
// and the model client. Conns is the same counter for the target's life.
type ConnCounted interface {
	Conns() *ConnCounter
}

// ProtocolCounted is a Target that counts what its connections spoke
// (HTTP/1.1, h2): the HTTP targets. ResetProtocols starts the count again
// for the next window over the same target (a sweep's steps share it).
type ProtocolCounted interface {
	Protocols() map[string]int
	ResetProtocols()
}
