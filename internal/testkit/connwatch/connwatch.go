// Package connwatch counts a test server's connections from its side, to
// check the client's own counts against.
package connwatch

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Watch counts a server's connections: accepted, and open at once at
// most. Its State is an http.Server's ConnState.
type Watch struct {
	mu                   sync.Mutex // guards the fields
	accepted, open, peak int
}

// State counts one connection's change of state.
func (w *Watch) State(_ net.Conn, s http.ConnState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch s {
	case http.StateNew:
		w.accepted++
		w.open++
		w.peak = max(w.peak, w.open)
	case http.StateClosed, http.StateHijacked:
		w.open--
	}
}

// Counts returns the connections accepted, and open at once at most.
func (w *Watch) Counts() (accepted, peak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.accepted, w.peak
}

// Settled is Counts once the server has accepted as many connections as
// opened returns (the client's count), or after 5 s: a client counts a
// connection when its connect returns, which the kernel completes before
// the server's Accept takes it off the backlog, and net/http may still be
// dialing one for a request another connection served.
func (w *Watch) Settled(opened func() int) (accepted, peak int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if a, _ := w.Counts(); a == opened() {
			break
		}
	}
	return w.Counts()
}
