//go:build !linux

package load

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
)

// The event loop is Linux only: elsewhere every target runs on goroutines.
func (r *Runner) runLoops(context.Context, time.Time, Schedule, chan<- *Batch, tare.Wire, []tare.Endpoint) (Usage, bool) {
	return Usage{}, false
}
