package modelsim

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is a tare model command running as a process of its own, the
// way a user runs a model server beside tare: its CPU is its own, so tare
// can tell it from the load generator.
type Process struct {
	PID int
	URL string // its /v1 base URL

	cmd      *exec.Cmd
	stopping atomic.Bool // once set, its goodbye on stderr is not passed on
}

// serving matches the line tare model prints once it listens.
var serving = regexp.MustCompile(`at (http://\S+/v1) `)

// Start starts c, a `tare model` command (made with exec.CommandContext),
// and waits up to timeout for it to say where it serves. What it prints
// on stderr otherwise goes to stderr. It dies with the process that
// started it (SIGKILL on the parent's death); Stop ends it with SIGTERM.
func Start(c *exec.Cmd, timeout time.Duration, stderr io.Writer) (*Process, error) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 5 * time.Second
	out, err := c.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start the simulated model: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start the simulated model: %w", err)
	}
	p := &Process{PID: c.Process.Pid, cmd: c}
	lines := bufio.NewScanner(out)
	found := make(chan string, 1)
	go func() {
		defer close(found)
		for lines.Scan() {
			if m := serving.FindStringSubmatch(lines.Text()); m != nil && p.URL == "" {
				found <- m[1]
				continue
			}
			if !p.stopping.Load() {
				fmt.Fprintln(stderr, lines.Text())
			}
		}
	}()
	select {
	case url, ok := <-found:
		if ok {
			p.URL = url
			return p, nil
		}
	case <-time.After(timeout):
	}
	p.Stop()
	return nil, fmt.Errorf("the simulated model (pid %d) did not say where it serves within %s", p.PID, timeout)
}

// Stop ends the model with SIGTERM (SIGKILL after 5 s) and waits for it.
// The context the command was made with must be cancelled by the caller,
// or Stop signals it itself.
func (p *Process) Stop() {
	p.stopping.Store(true)
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	p.cmd.Wait()
}
