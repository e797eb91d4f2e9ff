package session

import (
	"fmt"
	"math"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// nameJobs makes a queue target's jobs carry the run's id, so the jobs'
// run field is the printed run id and a worker's log, the results stream
// and `tare runs show` agree; a run without an id (unstored) keeps the
// target's own.
func nameJobs(t tare.Target, runID string) {
	if q, ok := t.(*queue.Target); ok {
		q.SetRunID(runID)
	}
}

// finishTarget adds to s what a target saw besides its results: for
// HTTP/2, the protocol of its connections; for a queue, its figures (redeliveries, results that match no job, the oldest
// pending job, the workers) and the warnings the verdict should say.
func finishTarget(s *tare.Summary, t tare.Target) {
	if h, ok := t.(interface {
		Protocols() map[string]int
		Notes() []string
	}); ok {
		// An HTTP target: what its connections spoke, and what the
		// summary must not leave out about it (a server that would not
		// speak h2).
		s.Generator.Protocols = h.Protocols()
		s.Verdict.Warnings = append(s.Verdict.Warnings, h.Notes()...)
	}
	q, ok := t.(*queue.Target)
	if !ok {
		return
	}
	st := q.Stats()
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
	s.Verdict.Warnings = append(s.Verdict.Warnings, queueWarnings(st)...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, queueRunWarnings(st, q.Queue(), s.Run)...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, q.Notes()...) // what a job framework's worker did not tell
}

// msOf is d in milliseconds, to the microsecond.
func msOf(d time.Duration) *float64 {
	return tare.Float(math.Round(float64(d)/1e3) / 1e3)
}

// queueRunWarnings words what a queue run's figures do not say by
// themselves: the workers all gone, and jobs the end of the run cut short.
func queueRunWarnings(st queue.TargetStats, name string, run tare.Run) []string {
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
		out = append(out, fmt.Sprintf("%d %s no result %s: counted as errors (%s)", st.Unfinished, plural(int(st.Unfinished), "job had", "jobs had"), why, queue.KindUnfinished))
	}
	return out
}

// queueWarnings words a queue target's counters as warnings.
func queueWarnings(st queue.TargetStats) []string {
	var out []string
	if st.Unconfirmed > 0 {
		out = append(out, fmt.Sprintf("the broker did not confirm the message of %d %s (%s: refused, or its connection closed first): counted as errors; %s may still have run, and a late result is not counted",
			st.Unconfirmed, plural(int(st.Unconfirmed), "job", "jobs"), queue.KindUnconfirmed, plural(int(st.Unconfirmed), "it", "they")))
	}
	if st.Unavailable == 0 && st.ReadErrors == 0 && st.Lost == 0 {
		return out
	}
	w := fmt.Sprintf("%d %s touched by a queue outage (%s): counted as errors", st.Unavailable, plural(int(st.Unavailable), "job was", "jobs were"), queue.KindUnavailable)
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
