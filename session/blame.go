package session

import "github.com/tare-dev/tare"

// explainBlame says why the run's blame was estimated, when it was and
// the summary does not say already: why the scheduler probe did not run.
func explainBlame(s *tare.Summary, why string) {
	if b := s.Blame; b != nil && b.Source == tare.BlameEstimated && b.Why == "" {
		b.Why = why
	}
}
