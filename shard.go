package tare

import (
	"strconv"
	"time"
)

// ShardSep separates a run id from its shard in the id of a shard's row:
// "<run id>.shard-2-of-4". A store keeps one row per shard; readers merge
// the rows of one run id.
const ShardSep = ".shard-"

// The keys a coordinated shard records in its run's configuration: its
// clock offset against the coordinating Redis (Redis − local, in
// milliseconds) at the start and the end of the run, and the round trip
// that bounds their error.
const (
	ConfigClockStart = "clock.offset_start_ms"
	ConfigClockEnd   = "clock.offset_end_ms"
	ConfigClockRTT   = "clock.rtt_ms"
)

// ConfigShardArrival is the key under which a shard records the whole
// run's schedule ("poisson 200/s for 10m"), which its own arrivals are a
// part of: a merged run describes itself by it.
const ConfigShardArrival = "shard.arrival"

// ConfigShardPeers is the key under which a coordinated shard records the
// pids of the other shards of its run on its host ("4121,4188"), which its
// ledger counted as tare.
const ConfigShardPeers = "shard.peers"

// ClockOffset is a stored shard's clock offset against the coordinating
// Redis: the mean of its start and end readings, and the largest of them
// in size; ok is false when the shard was not coordinated.
func (r Run) ClockOffset() (mean, worst time.Duration, ok bool) {
	var sum time.Duration
	var n int
	for _, k := range []string{ConfigClockStart, ConfigClockEnd} {
		v, err := strconv.ParseFloat(r.Config[k], 64)
		if err != nil {
			continue
		}
		d := time.Duration(v * float64(time.Millisecond))
		sum, n = sum+d, n+1
		worst = max(worst, d.Abs())
	}
	if n == 0 {
		return 0, 0, false
	}
	return sum / time.Duration(n), worst, true
}

// ShardSummary is one generator's part of a run whose load was split over
// several generators (tare run --shard i/N): who it was and what its own
// host did. A merged summary pools the shards' raw records for every
// latency figure, but host interference belongs to one host, so it is kept
// here, per shard, and the verdict names the shard whose host fired.
type ShardSummary struct {
	Shard        string   `json:"shard"`  // "i/N"
	RunID        string   `json:"run_id"` // the stored row of this shard
	Hostname     string   `json:"hostname"`
	Pod          string   `json:"pod,omitempty"` // namespace/name, when the shard ran in a Kubernetes pod
	Requests     int      `json:"requests"`
	LatencyP99   *float64 `json:"latency_p99_ms"`
	SendLagP99   *float64 `json:"send_lag_p99_ms"`
	StealMeanPct *float64 `json:"steal_mean_pct"`
	ThrottledPct *float64 `json:"throttled_pct"`
	Level        Level    `json:"level"`           // this shard's own verdict
	Fired        []string `json:"fired,omitempty"` // the signals that fired on this shard
	// What the shard's own host did during its run, as its own summary
	// has it: the arrivals it offered (its part of the schedule), the
	// host's vCPUs, its generator, the host's interference and whose CPU
	// it was, and the system under test it found there (nil when none).
	Arrival   string      `json:"arrival"`
	VCPUs     int         `json:"vcpus"`
	Generator Generator   `json:"generator"`
	Host      HostSummary `json:"host"`
	SUT       *SUTSummary `json:"system_under_test"`
}
