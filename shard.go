package tare

// ShardSummary is one generator's part of a run whose load was split over
// several generators (tare run --shard i/N): who it was and what its own
// host did. A merged summary pools the shards' raw records for every
// latency figure, but host interference belongs to one host, so it is kept
// here, per shard, and the verdict names the shard whose host fired.
type ShardSummary struct {
	Shard        string   `json:"shard"`  // "i/N"
	RunID        string   `json:"run_id"` // the stored row of this shard
	Hostname     string   `json:"hostname"`
	Requests     int      `json:"requests"`
	LatencyP99   *float64 `json:"latency_p99_ms"`
	SendLagP99   *float64 `json:"send_lag_p99_ms"`
	StealMeanPct *float64 `json:"steal_mean_pct"`
	ThrottledPct *float64 `json:"throttled_pct"`
	Level        Level    `json:"level"`           // this shard's own verdict
	Fired        []string `json:"fired,omitempty"` // the signals that fired on this shard
}
