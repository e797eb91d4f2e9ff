package demo

import (
	"context"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// HogName is the command name (comm) of the CPU hogs of tare demo
// --neighbour, what the ledger and the verdict call them: the reader of
// a verdict that names them knows they were the demo's own neighbour. A
// comm is at most 15 bytes.
const HogName = "demo-neighbour"

// HogCommand is tare's hidden command of the hog, which names itself
// HogName and spins one core for --for.
const HogCommand = "hog"

// StartNeighbour starts one CPU hog per core after the delay, as a noisy
// neighbour would, tells moved how many once they are started (when not
// nil), and returns the function that stops them. The hogs are tare
// processes run by self as HogCommand, bounded by a deadline of their own
// in case tare is killed before it stops them.
func StartNeighbour(ctx context.Context, self func(ctx context.Context, args ...string) (*exec.Cmd, error), after time.Duration, moved func(hogs int)) (stop func()) {
	hogCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), after+10*time.Minute)
	var hogs []*exec.Cmd
	var mu sync.Mutex // guards hogs, filled by the timer's goroutine
	timer := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		for range runtime.NumCPU() {
			h, err := self(hogCtx, HogCommand, "--for", (after + 10*time.Minute).String())
			if err == nil && h.Start() == nil {
				hogs = append(hogs, h)
			}
		}
		if moved != nil {
			moved(len(hogs))
		}
	})
	return func() {
		timer.Stop()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hogs {
			h.Wait()
		}
	}
}
