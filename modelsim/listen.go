package modelsim

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// CheckListen checks a listen address of the form host:port and refuses one
// that would expose the simulator beyond this machine unless allowRemote is
// set (the CLI sets it only when --listen was given explicitly). Loopback
// means an IP literal in 127.0.0.0/8 or ::1, or the name "localhost"; an
// empty host (all interfaces) or any other name is remote, since names are
// not resolved here. Port 0 (any free port) is accepted. A bad address is a
// *tare.Error with code EINVALID.
func CheckListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return tare.Errorf(tare.EINVALID, "listen address %q: want host:port, like %s", addr, DefaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return tare.Errorf(tare.EINVALID, "listen address %q: port %q: want a number from 0 to 65535", addr, port)
	}
	if allowRemote || isLoopback(host) {
		return nil
	}
	return tare.Errorf(tare.EINVALID,
		"listen address %q is not loopback: the simulated model would be reachable from other machines; "+
			"use 127.0.0.1 or ::1, or pass --listen explicitly to allow it", addr)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
