//go:build !linux

package rawio

import "syscall"

// Conn is Linux only; elsewhere New returns nil and callers use the
// descriptor's own calls.
type Conn struct{}

// New returns nil: raw calls are Linux only.
func New(syscall.Conn) *Conn { return nil }

func (*Conn) Read([]byte) (int, error)  { panic("rawio is Linux only") }
func (*Conn) Write([]byte) (int, error) { panic("rawio is Linux only") }
func (*Conn) Hold([]byte)               { panic("rawio is Linux only") }
func (*Conn) Held() int                 { panic("rawio is Linux only") }
