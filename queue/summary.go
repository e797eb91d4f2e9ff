package queue

import (
	"fmt"
	"math"
	"time"

	"github.com/tare-dev/tare"
)

// AddSummary adds to s the queue's figures (redeliveries, results that
// match no job, the oldest pending job, the workers) and the warnings the
// verdict should say (tare.SummaryAdder).
func (t *Target) AddSummary(s *tare.Summary) {
	st := t.Stats()
	qs := s.Queue
	if qs == nil {
		qs = &tare.QueueSummary{}
		s.Queue = qs
	}
	qs.Redelivered = tare.Int(int(st.Redelivered))
	qs.DuplicateResults = tare.Int(int(st.Duplicates))
	qs.UnknownResults = tare.Int(int(st.Unknown))
	qs.LateResults = tare.Int(int(st.Late))
	if st.Depths > 0 {
		qs.OldestPending = &tare.PendingMS{Max: msOf(st.OldestPendingMax), End: msOf(st.Depth.OldestPending)}
	}
	if st.Workers >= 0 {
		qs.Workers = &tare.QueueWorkers{Max: st.WorkersMax, End: st.Workers, Lost: st.WorkersLost}
	}
	s.Verdict.Warnings = append(s.Verdict.Warnings, targetWarnings(st)...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, runWarnings(st, t.Queue(), s.Run)...)
}

// msOf is d in milliseconds, to the microsecond.
func msOf(d time.Duration) *float64 {
	return tare.Float(math.Round(float64(d)/1e3) / 1e3)
}

// runWarnings words what a queue run's figures do not say by
// themselves: the workers all gone, and jobs the end of the run cut short.
func runWarnings(st TargetStats, name string, run tare.Run) []string {
	var out []string
	switch {
	case st.WorkersLost > 0 && st.Workers == 0:
		at := ""
		if !st.WorkersGone.IsZero() && !run.StartedAt.IsZero() {
			at = " " + max(st.WorkersGone.Sub(run.StartedAt), 0).Round(100*time.Millisecond).String() + " into the run"
		}
		out = append(out, fmt.Sprintf("every worker of queue %q left%s and none came back: the jobs after that waited for no one (in all %d timed out, %d had no result); start a worker (tare worker) and measure again",
			name, at, st.Timeouts, st.Unfinished))
	case st.WorkersLost > 0:
		out = append(out, fmt.Sprintf("every worker of queue %q was gone %d %s during the run (registrations lapsed: workers killed or restarted, or Redis lost them); jobs waited meanwhile",
			name, st.WorkersLost, plural(st.WorkersLost, "time", "times")))
	}
	if st.Unfinished > 0 {
		why := "when the run ended"
		if run.Status == tare.StatusInterrupted {
			why = "when the interrupted run's --drain was over"
		}
		out = append(out, fmt.Sprintf("%d %s no result %s: counted as errors (%s)", st.Unfinished, plural(int(st.Unfinished), "job had", "jobs had"), why, KindUnfinished))
	}
	return out
}

// targetWarnings words a queue target's counters as warnings.
func targetWarnings(st TargetStats) []string {
	var out []string
	if st.Unconfirmed > 0 {
		out = append(out, fmt.Sprintf("the broker did not confirm the message of %d %s (%s: refused, or its connection closed first): counted as errors; %s may still have run, and a late result is not counted",
			st.Unconfirmed, plural(int(st.Unconfirmed), "job", "jobs"), KindUnconfirmed, plural(int(st.Unconfirmed), "it", "they")))
	}
	if st.Unavailable == 0 && st.ReadErrors == 0 && st.Lost == 0 {
		return out
	}
	w := fmt.Sprintf("%d %s touched by a queue outage (%s): counted as errors", st.Unavailable, plural(int(st.Unavailable), "job was", "jobs were"), KindUnavailable)
	var details []string
	if st.Lost > 0 {
		details = append(details, fmt.Sprintf("the queue's state was lost %d %s (a restart without persistence), failing the jobs it held", st.Lost, plural(int(st.Lost), "time", "times")))
	}
	if st.ReadErrors > 0 {
		details = append(details, fmt.Sprintf("%d failed %s of results, retried with backoff", st.ReadErrors, plural(int(st.ReadErrors), "read", "reads")))
	}
	for i, d := range details {
		if i == 0 {
			w += "; "
		} else {
			w += ", "
		}
		w += d
	}
	return append(out, w)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

var (
	_ tare.SummaryAdder = (*Target)(nil)
	_ tare.RunNamed     = (*Target)(nil)
	_ tare.Noted        = (*Target)(nil)
)
