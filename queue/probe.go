package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Probe waits up to wait for a worker of src, the queue rawURL names, for
// a pre-flight check: it returns a line naming the queue and its workers,
// or an error saying what is wrong (a task the workers said they do not
// know: EINVALID; a server that does not answer: EUNAVAILABLE) or how to
// start a worker when none showed (EUNAVAILABLE). locate (when not nil)
// fills in the pid and host of the workers it finds on this host by their
// connections, for those that register none (BullMQ's: see
// WorkerInfo.ClientAddr).
func Probe(ctx context.Context, src Source, rawURL string, wait time.Duration, locate func([]WorkerInfo)) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		ws, err := src.Workers(ctx)
		if err != nil {
			return "", tare.Errorf(tare.EUNAVAILABLE, "list the workers of queue %q at %s: %w", src.Queue(), RedactURL(rawURL), err)
		}
		if len(ws) > 0 {
			if locate != nil {
				locate(ws)
			}
			if c, ok := src.(taskChecker); ok {
				if err := c.CheckTask(ctx); err != nil {
					return "", err
				}
			}
			names := make([]string, len(ws))
			for i, w := range ws {
				names[i] = fmt.Sprintf("%s (pid %d on %s)", w.Name, w.PID, w.Host)
				if w.PID == 0 && w.ClientAddr != "" {
					names[i] = fmt.Sprintf("%s (connected from %s, not found on this host)", w.Name, w.ClientAddr)
				}
			}
			what := "queue " + src.Queue()
			if s, ok := src.(fmt.Stringer); ok {
				what = s.String()
			}
			return fmt.Sprintf("%s at %s: %d %s: %s", what, RedactURL(rawURL), len(ws), map[bool]string{true: "worker", false: "workers"}[len(ws) == 1], strings.Join(names, ", ")), nil
		}
		if time.Now().After(deadline) {
			hint := "start one with `tare worker --queue URL --queue-name NAME --model URL`"
			if h, ok := src.(hinter); ok {
				hint = h.WorkerHint()
			}
			return "", tare.Errorf(tare.EUNAVAILABLE, "no worker serves queue %q at %s within %s: %s", src.Queue(), RedactURL(rawURL), wait, hint)
		}
		if tare.Sleep(ctx, 200*time.Millisecond) != nil {
			return "", ctx.Err()
		}
	}
}
