package tare

// Level is how far a run's figures can be trusted to describe the code under
// test rather than the host.
type Level string

// The verdict levels, from trustworthy to not.
const (
	Clean    Level = "clean"    // no signal fired: the figures describe the system under test
	Suspect  Level = "suspect"  // contention inside the guest, or latency moving alone
	Polluted Level = "polluted" // the host (or tare itself) was starved: the figures describe the neighbours
)

// Signal is one test of the run against a threshold.
type Signal struct {
	Name      string   `json:"name"`
	Fired     bool     `json:"fired"`
	Value     *float64 `json:"value"` // nil when the source was unavailable
	Threshold float64  `json:"threshold"`
	Detail    string   `json:"detail"` // a sentence a person can act on
	// Finding marks a signal about the system under test, not about the
	// measurement (saturation): fired, it never changes the level.
	Finding bool `json:"finding,omitempty"`
}

// Verdict is the judgement of one run.
type Verdict struct {
	Level    Level      `json:"level"`
	Signals  []Signal   `json:"signals"`
	Advice   []string   `json:"advice"`
	Warnings []string   `json:"warnings,omitempty"` // non-fatal findings, shown next to the numbers
	SLO      []SLOCheck `json:"slo,omitempty"`
	// Attribution says, in words, how much of the per-tick p95's variation
	// each host signal and the load explain.
	Attribution string `json:"attribution,omitempty"`
}

// SLOCheck is one objective of a service-level objective checked against a run.
type SLOCheck struct {
	Objective string   `json:"objective"` // as the user wrote it, e.g. "p95<=2s"
	Met       bool     `json:"met"`
	Value     *float64 `json:"value_ms"` // the run's figure; nil when it could not be measured
	LimitMS   float64  `json:"limit_ms"`
}
