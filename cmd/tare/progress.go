package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/load"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/stats"
)

// progress is the live line on stderr: on a terminal one line rewritten in
// place, elsewhere a plain line every few seconds.
type progress struct {
	w        io.Writer
	tty      bool
	every    time.Duration
	duration time.Duration // the run's planned length, 0 when bounded by jobs
	jobs     int           // the run's planned arrivals, 0 when bounded by time
}

// newProgress returns a progress line for w, or nil when quiet.
func newProgress(w io.Writer, quiet bool, duration time.Duration, jobs int) *progress {
	if quiet {
		return nil
	}
	p := &progress{w: w, every: 5 * time.Second, duration: duration, jobs: jobs}
	if isTerminal(w) {
		p.tty, p.every = true, 250*time.Millisecond
	}
	return p
}

// show prints the live line of a window with load; for a queue target it
// adds what the results do not show yet (see queueProgress).
func (p *progress) show(s stats.Progress, e load.Progress, target tare.Target) {
	of := ""
	if p.duration == 0 && p.jobs > 0 {
		of = fmt.Sprintf("  %d/%d sent", e.Sent+e.Dropped, p.jobs)
	}
	rate := 0.0
	if secs := s.Elapsed.Seconds(); secs > 0 {
		rate = float64(s.OK+s.Errors) / secs
	}
	p95 := "n/a"
	if s.P95 > 0 {
		p95 = s.P95.Round(10 * time.Microsecond).String()
	}
	middle := fmt.Sprintf("%s  achieved %.1f/s  in flight %d  errors %d  dropped %d  p95 %s", of, rate, e.InFlight, s.Errors, s.Dropped, p95)
	if q, ok := target.(*queue.Target); ok {
		middle += queueProgress(q.Stats())
	}
	p.write(s, middle)
}

// queueProgress is the queue's part of the live line: the jobs a worker
// holds and for how long the oldest, the redeliveries, the results that
// match no job, and the registered workers, so a worker that died holding
// a job shows long before the job's timeout.
func queueProgress(st queue.TargetStats) string {
	d := st.Depth
	line := fmt.Sprintf("  pending %d", d.Pending)
	if d.Pending > 0 {
		line += fmt.Sprintf(" (oldest %s)", d.OldestPending.Round(100*time.Millisecond))
	}
	line += fmt.Sprintf("  redelivered %d", st.Redelivered)
	if st.Duplicates > 0 {
		line += fmt.Sprintf("  duplicate results %d", st.Duplicates)
	}
	if st.Unknown > 0 {
		line += fmt.Sprintf("  unknown results %d", st.Unknown)
	}
	switch {
	case st.Workers < 0:
	case st.Workers == 0 && st.WorkersLost > 0:
		line += "  workers 0: ALL GONE"
	default:
		line += fmt.Sprintf("  workers %d", st.Workers)
	}
	return line
}

// hook makes cfg's progress hooks print p's live line: of a window with
// load of target's, or with no load of tare's own when target is nil.
// A nil p (quiet) sets none.
func (p *progress) hook(cfg *session.Config, target tare.Target) {
	if p == nil {
		return
	}
	cfg.ProgressEvery, cfg.OnDone = p.every, p.done
	cfg.OnProgress = func(s stats.Progress, e load.Progress) { p.show(s, e, target) }
	if target == nil {
		cfg.OnProgress = func(s stats.Progress, _ load.Progress) { p.showHost(s) }
	}
}

// showHost is the live line of a window with no load of tare's own.
func (p *progress) showHost(s stats.Progress) { p.write(s, "") }

// write prints the elapsed time (of the planned duration), middle, and the
// latest steal: on a terminal in place, elsewhere as a line.
func (p *progress) write(s stats.Progress, middle string) {
	line := s.Elapsed.Truncate(100 * time.Millisecond).String()
	if p.duration > 0 {
		line += "/" + p.duration.String()
	}
	steal := "n/a"
	if s.Steal != nil {
		steal = fmt.Sprintf("%.1f%%", *s.Steal)
	}
	line += middle + "  steal " + steal
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends the live line so the summary starts on a fresh one.
func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// isTerminal says whether w is a terminal, where lines are rewritten in
// place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
