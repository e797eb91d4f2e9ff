//go:build !linux

package httptarget

import "net"

// rawIO is Linux only; elsewhere connections use net.Conn's own calls.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) read([]byte) (int, error)  { panic("rawIO is Linux only") }
func (*rawIO) write([]byte) (int, error) { panic("rawIO is Linux only") }
