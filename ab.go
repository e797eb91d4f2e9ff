package tare

import (
	"context"
	"time"
)

// ABSchema names the version of the A/B JSON contract.
const ABSchema = "tare.ab/v1"

// ABResult is what an A/B run found of B against A, on its deciding
// metric (p95 unless told otherwise).
type ABResult string

// The A/B results.
const (
	// ABSame: the interval of B/A lies within the tolerance around 1: no
	// difference larger than it at this noise.
	ABSame ABResult = "same"
	// ABSlower and ABFaster: the interval of B/A lies above 1, or below:
	// B is slower, or faster, beyond the noise.
	ABSlower ABResult = "b_slower"
	ABFaster ABResult = "b_faster"
	// ABInconclusive: the interval holds 1 but reaches past the
	// tolerance: more trials would tell.
	ABInconclusive ABResult = "inconclusive"
)

// The A/B modes.
const (
	// ABInterleaved runs A and B in turn, in short trials, each pair of
	// trials in a random order.
	ABInterleaved = "interleaved"
	// ABDuet runs A and B at once, each at half the rate, so that they
	// share every second of the host's noise.
	ABDuet = "duet"
)

// AB is an A/B run (`tare ab --json`): two variants of one load measured
// in paired trials, B against A with an interval from the pairs, and the
// result. Like Summary, keys may be added, never renamed; a figure that
// could not be computed is nil (JSON null), never 0.
type AB struct {
	Schema string `json:"schema"`
	// ID is the A/B run's id in the store, "" when not stored; its trials
	// are runs of their own (Pairs[].A.RunID, …).
	ID    string    `json:"id"`
	Mode  string    `json:"mode"` // ABInterleaved or ABDuet
	Label string    `json:"label"`
	A     ABVariant `json:"a"`
	B     ABVariant `json:"b"`
	// Seed orders the trials of each pair and seeds the randomisation
	// test's draws.
	Seed     uint64  `json:"seed"`
	TrialS   float64 `json:"trial_s"`    // each trial's arrival window
	RatePerS float64 `json:"rate_per_s"` // each variant's rate in a trial
	// On is the metric the result is decided on; TolerancePct the
	// difference, in %, below which B counts as the same as A.
	On           string  `json:"on"`
	TolerancePct float64 `json:"tolerance_pct"`
	// PrecisionPct, when above 0, stopped the trials once the interval's
	// half-width on On was within it.
	PrecisionPct  float64   `json:"precision_pct"`
	ConfidencePct float64   `json:"confidence_pct"`
	Pairs         []ABPair  `json:"pairs"`
	Ratios        []ABRatio `json:"ratios"`
	Interference  ABNoise   `json:"interference"`
	Result        ABResult  `json:"result"`
	Verdict       string    `json:"verdict"`    // the result in words
	MorePairs     *int      `json:"more_pairs"` // pairs about enough to resolve the tolerance, when inconclusive
	StartedAt     time.Time `json:"started_at"`
	EndedAt       time.Time `json:"ended_at"`
	Status        string    `json:"status"` // "complete", or "interrupted" when stopped early
	Warnings      []string  `json:"warnings,omitempty"`
}

// ABStore keeps A/B runs: each the tare.ab/v1 result as it was printed,
// beside its trials, which are runs of their own.
type ABStore interface {
	// SaveAB stores a finished A/B run under its ID, which must be set and
	// unique (an *Error with code EINVALID otherwise); the variants'
	// targets are redacted again.
	SaveAB(ctx context.Context, ab AB) error
	// FindAB returns a stored A/B run; an unknown id is an *Error with
	// code ENOTFOUND.
	FindAB(ctx context.Context, id string) (AB, error)
	// FindABs lists the A/B runs matching the filter's ID, Label, Target
	// (of either variant), Since and Limit, newest first; a filter by
	// Window or Protocol matches none.
	FindABs(ctx context.Context, filter RunFilter) ([]AB, error)
	// DeleteAB removes a stored A/B run, not its trials' runs. An unknown
	// id is an *Error with code ENOTFOUND.
	DeleteAB(ctx context.Context, id string) error
}

// ABVariant is what one variant loads.
type ABVariant struct {
	Target string `json:"target"` // what is loaded, secrets redacted
}

// ABPair is one pair of trials, one of A and one of B.
type ABPair struct {
	N     int     `json:"n"`     // from 1
	First string  `json:"first"` // "a" or "b": which ran first (in duet mode both ran at once: "")
	A     ABTrial `json:"a"`
	B     ABTrial `json:"b"`
	// Ratios are B/A of this pair, per metric; nil where a side lacks it.
	Ratios map[string]*float64 `json:"ratios"`
}

// ABTrial is one trial: a short run of one variant, stored like any run
// when a store was given.
type ABTrial struct {
	RunID     string    `json:"run_id"` // "" when not stored
	StartedAt time.Time `json:"started_at"`
	Requests  int       `json:"requests"`
	Errors    int       `json:"errors"`
	Latency   LatencyMS `json:"latency_ms"`
	// TTFTP95MS and TPOTP95MS are a model target's, nil for the others.
	TTFTP95MS *float64 `json:"ttft_p95_ms"`
	TPOTP95MS *float64 `json:"tpot_p95_ms"`
	Verdict   Level    `json:"verdict"` // the trial's own verdict
	// Hit: the trial's verdict was polluted: interference from outside
	// the test shaped its figures.
	Hit              bool     `json:"hit"`
	PollutedTicksPct *float64 `json:"polluted_ticks_pct"`
	NeighbourWaitPct *float64 `json:"neighbour_wait_pct"`
	StealPct         *float64 `json:"steal_pct"` // mean
	CPUBy            *CPUBy   `json:"cpu_by"`    // the trial's whose-CPU ledger; nil when not measured
	// Overlapped of the Probed requests (those whose every tick the
	// scheduler probe measured) overlapped an outside wait (Tail); nil
	// where the probe did not run.
	Overlapped *int `json:"overlapped"`
	Probed     *int `json:"probed"`
	// Unwaited are the latency percentiles of the Probed requests, each
	// less the outside wait it overlapped (Tail.Unwaited): the trial as
	// it would have been without the neighbours' share; nil where the
	// probe did not run.
	Unwaited *PercentilesMS `json:"unwaited_ms"`
}

// ABRatio is B against A on one metric, over the pairs: the geometric
// mean of the pairs' ratios, with the randomisation test's interval over
// the pairs (stats.PairedRatio): nil where too few pairs bound it.
type ABRatio struct {
	Metric    string   `json:"metric"` // p50, p95, p99, ttft_p95, tpot_p95
	Pairs     int      `json:"pairs"`  // pairs with the metric on both sides
	Ratio     *float64 `json:"ratio"`
	RatioLow  *float64 `json:"ratio_low"`
	RatioHigh *float64 `json:"ratio_high"`
	// DiffPct is (ratio − 1) in %, with its interval: +8.2 is B 8.2 %
	// slower.
	DiffPct     *float64 `json:"diff_pct"`
	DiffLowPct  *float64 `json:"diff_low_pct"`
	DiffHighPct *float64 `json:"diff_high_pct"`
}

// ABNoise is the interference the trials saw and how it fell on A and B.
type ABNoise struct {
	HitA int `json:"hit_a"` // trials of A that were polluted
	HitB int `json:"hit_b"`
	// OneSided are the pairs where one side was hit and the other not:
	// what pairing cancels where the noise falls on both alike.
	OneSided int `json:"one_sided"`
	// PollutedTicksPct are the mean polluted-tick shares of A's trials
	// and of B's; nil when no trial measured them.
	PollutedTicksPctA *float64 `json:"polluted_ticks_pct_a"`
	PollutedTicksPctB *float64 `json:"polluted_ticks_pct_b"`
	Detail            string   `json:"detail"`
}

// ABMetrics are the metrics an A/B run compares, in order: the
// latency's p50, p95 and p99, a model target's TTFT and TPOT p95, and
// the latency's percentiles less each request's outside wait
// (ABTrial.Unwaited).
var ABMetrics = []string{"p50", "p95", "p99", "ttft_p95", "tpot_p95", "unwaited_p50", "unwaited_p95", "unwaited_p99"}

// Value is the trial's figure for one of ABMetrics; nil when it has none.
func (t *ABTrial) Value(metric string) *float64 {
	switch metric {
	case "p50":
		return t.Latency.P50
	case "p95":
		return t.Latency.P95
	case "p99":
		return t.Latency.P99
	case "ttft_p95":
		return t.TTFTP95MS
	case "tpot_p95":
		return t.TPOTP95MS
	}
	if u := t.Unwaited; u != nil {
		switch metric {
		case "unwaited_p50":
			return u.P50
		case "unwaited_p95":
			return u.P95
		case "unwaited_p99":
			return u.P99
		}
	}
	return nil
}
