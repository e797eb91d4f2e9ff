package tare

import "time"

// Tick is one interval of the run's timeline: the load it carried and the
// host interference during the very same seconds.
type Tick struct {
	Start time.Time
	End   time.Time

	Arrivals    int // arrivals scheduled in the tick
	Completions int // requests that finished in the tick
	Errors      int // of which failed
	Dropped     int // arrivals dropped at the in-flight cap
	InFlight    int // requests outstanding at the end of the tick

	// Latency percentiles of the requests that completed in the tick; zero
	// when Completions is 0.
	P50, P95, P99 time.Duration

	// InSystem is the mean number of requests in the system over the
	// tick, from Scheduled to Done (queued and in service, for a queue):
	// the work the latency signal weighs latency against. Unlike
	// InFlight, it sees a tick whole, not its last instant.
	InSystem float64
	// Sample is a uniform random sample of the requests that succeeded
	// in the tick, one value each: latency (per output token for a model
	// call) divided by how many requests shared the system with it, itself
	// included (the harmonic mean of their number over its life, the
	// slowdown a CPU shared equally gives): what the request cost once
	// the work it shared the system with is taken out. Kept in memory for
	// the verdict (a bounded number over the run), never stored.
	Sample []time.Duration `json:"-"`
	// SendLagMax is the largest send lag (actual send − scheduled) of the
	// arrivals scheduled in the tick; 0 when none was sent. It is not
	// stored: a tick read back from a store has 0.
	SendLagMax time.Duration

	QueueDepth *float64    // mean queue depth over the tick; nil for non-queue targets
	Host       *HostSample // nil when the host was not sampled
}

// RunStatus says how a run ended.
type RunStatus string

// The ways a run ends.
const (
	StatusRunning     RunStatus = "running"
	StatusComplete    RunStatus = "complete"
	StatusInterrupted RunStatus = "interrupted"
	StatusFailed      RunStatus = "failed"
)

// Run identifies one load window and how it went.
type Run struct {
	ID string `json:"id"`
	// Kind is "" for a measured run, KindAB for an A/B run listed among
	// them (its trials are runs).
	Kind      string    `json:"kind,omitempty"`
	Label     string    `json:"label"`
	Window    string    `json:"window"`  // "peak", "offpeak", "mid", or "" outside the protocol
	Target    string    `json:"target"`  // what was loaded, secrets redacted
	Arrival   string    `json:"arrival"` // the arrival process, e.g. "poisson 200/s"
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Status    RunStatus `json:"status"`

	Protocol string            `json:"protocol,omitempty"` // protocol id, when the run is one window of one
	Version  string            `json:"version,omitempty"`  // tare version that measured it
	Config   map[string]string `json:"config,omitempty"`   // the full configuration, secrets redacted
}

// KindAB is the Kind of an A/B run (tare ab) listed among runs.
const KindAB = "ab"

// The windows of the three-window protocol, by the names runs store.
const (
	WindowPeak    = "peak"    // 14:00–16:00: worst-case latency, what users see by day
	WindowOffpeak = "offpeak" // 02:00–04:00: best-case latency, the code on a quiet host
	WindowMid     = "mid"     // 08:00–10:00: typical latency, the baseline for capacity math
)

// IsWindow reports whether name is one of the protocol's windows.
func IsWindow(name string) bool {
	return name == WindowPeak || name == WindowOffpeak || name == WindowMid
}

// Window is a daily time-of-day window of the three-window protocol.
type Window struct {
	Name    string        // "peak", "offpeak", "mid"
	From    time.Duration // offset from local midnight
	To      time.Duration
	Purpose string
}
