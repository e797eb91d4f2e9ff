package tare

// WorkerHost is the interference of one host whose workers served a queue
// run, judged on that host's own samples during the run: with workers on
// many hosts, the run's verdict can say which worker host was noisy.
type WorkerHost struct {
	Hostname     string   `json:"hostname"`
	Ticks        int      `json:"ticks"` // host samples during the run
	StealMeanPct *float64 `json:"steal_mean_pct"`
	ThrottledPct *float64 `json:"throttled_pct"`
	RunDelayPct  *float64 `json:"run_delay_pct"` // of the worker processes
	Level        Level    `json:"level"`
	Fired        []string `json:"fired,omitempty"`
}
