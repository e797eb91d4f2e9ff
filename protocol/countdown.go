package protocol

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tare-dev/tare"
)

// Countdown is a Scheduler's Wait: it waits on the real clock for the
// next slot, showing on a terminal (tty) the time left, rewritten every
// second; elsewhere one line, and nothing when quiet.
func Countdown(w io.Writer, tty, quiet bool, loc *time.Location) func(ctx context.Context, until time.Time, next Slot) error {
	return func(ctx context.Context, until time.Time, next Slot) error {
		what := fmt.Sprintf("the %s window (day %d) starts its run at %s", next.Window.Name, next.Day, until.In(loc).Format("Mon 2006-01-02 15:04:05 MST"))
		if next.State == SlotRunning {
			what = fmt.Sprintf("another tare is running the %s window; looking again at %s", next.Window.Name, until.In(loc).Format("15:04:05"))
		}
		if !quiet && !tty {
			fmt.Fprintf(w, "tare protocol: waiting: %s (in %s)\n", what, time.Until(until).Round(time.Second))
		}
		// Wake at least every second on a terminal, every minute
		// elsewhere, and read the wall clock again: a suspended
		// machine's timers do not count the time it slept.
		step := time.Minute
		if tty && !quiet {
			step = time.Second
		}
		defer func() {
			if tty && !quiet {
				fmt.Fprint(w, "\r\033[K")
			}
		}()
		for {
			left := time.Until(until)
			if left <= 0 {
				return nil
			}
			if tty && !quiet {
				fmt.Fprintf(w, "\r\033[Kwaiting: %s, in %s (Ctrl-C stops; run again to carry on)", what, left.Round(time.Second))
			}
			if err := tare.Sleep(ctx, min(left, step)); err != nil {
				return err
			}
		}
	}
}
