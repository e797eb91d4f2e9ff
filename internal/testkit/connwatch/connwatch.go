// Package connwatch counts a test server's connections from its side, to
// check the client's own counts against.
package connwatch

import (
	"net"
	"net/http"
	"sync"
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
