package session

import (
	"context"
	"errors"
	"os/exec"
	"syscall"

	"github.com/tare-dev/tare/host"
)

// Child is another tool's process that a window is observed around (tare
// watch): started once the sampler has its first reading, counted as
// tare's side of the test with everything it starts, sent SIGTERM when the
// context ends, and waited for.
type Child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's (or Start's) error, once exited is closed
}

// NewChild is cmd, not started yet.
func NewChild(cmd *exec.Cmd) *Child {
	return &Child{cmd: cmd, exited: make(chan struct{})}
}

// OnStart returns the Config.OnStart hook that starts the child.
func (c *Child) OnStart(ctx context.Context) func(*host.Sampler) {
	return func(sampler *host.Sampler) {
		if err := c.cmd.Start(); err != nil {
			c.err = err
			close(c.exited)
			return
		}
		sampler.AddTareTree(c.cmd.Process.Pid)
		go func() {
			c.err = c.cmd.Wait()
			close(c.exited)
		}()
		go func() {
			// Ctrl-C reaches the command from the terminal too; a SIGTERM
			// to tare is passed on. Either way the child is waited for.
			select {
			case <-ctx.Done():
				c.cmd.Process.Signal(syscall.SIGTERM)
			case <-c.exited:
			}
		}()
	}
}

// Exited is closed once the child has exited (or failed to start).
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Status waits for the child and returns its exit status, 128+N for a
// signal N as a shell gives it; an error when it could not run at all.
func (c *Child) Status() (int, error) {
	<-c.exited
	var exitErr *exec.ExitError
	switch {
	case errors.As(c.err, &exitErr):
		status := exitErr.ExitCode()
		if status < 0 {
			status = 128 + int(exitErr.Sys().(syscall.WaitStatus).Signal())
		}
		return status, nil
	case c.err != nil:
		return 0, c.err
	}
	return 0, nil
}
