package tare

// The optional interfaces a Target implements to add its part to a run,
// beside ConnCounted and ProtocolCounted.

// RunNamed is a Target whose work carries the run's id (a queue's jobs),
// so that a worker's log, the results stream and the store agree. SetRunID
// is called before each window.
type RunNamed interface {
	SetRunID(id string)
}

// Noted is a Target with what the verdict must not leave out about it, in
// words a user can act on (a server that would not speak h2, a framework
// that does not tell when a job started).
type Noted interface {
	Notes() []string
}

// SummaryAdder is a Target that adds its own figures and warnings to a
// window's summary, once it is judged (a queue: its redeliveries, pending
// jobs and workers).
type SummaryAdder interface {
	AddSummary(s *Summary)
}
