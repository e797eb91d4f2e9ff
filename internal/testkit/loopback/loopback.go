// Package loopback gives tests loopback addresses nothing listens on.
package loopback

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") nothing listens
// on: one the kernel just handed out and that was closed again, so a
// connection to it is refused, and a server may listen on it.
func FreeAddr(t testing.TB) string { return free(t).String() }

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int { return free(t).Port }

func free(t testing.TB) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr)
}
