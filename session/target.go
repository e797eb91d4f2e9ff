package session

import "github.com/tare-dev/tare"

// nameJobs makes a target's work carry the run's id (a queue's jobs), so
// the jobs' run field is the printed run id and a worker's log, the
// results stream and `tare runs show` agree; a run without an id
// (unstored) keeps the target's own.
func nameJobs(t tare.Target, runID string) {
	if q, ok := t.(tare.RunNamed); ok {
		q.SetRunID(runID)
	}
}

// finishTarget adds to s what a target saw besides its results: for
// HTTP, the protocol of its connections; for a queue, its figures and
// warnings; and what the verdict must not leave out about it (a server
// that would not speak h2, what a job framework's worker did not tell).
func finishTarget(s *tare.Summary, t tare.Target) {
	if p, ok := t.(tare.ProtocolCounted); ok {
		s.Generator.Protocols = p.Protocols()
	}
	if a, ok := t.(tare.SummaryAdder); ok {
		a.AddSummary(s)
	}
	if n, ok := t.(tare.Noted); ok {
		s.Verdict.Warnings = append(s.Verdict.Warnings, n.Notes()...)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
