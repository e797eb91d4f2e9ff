// Package stats turns the stream of a run into its figures: run-wide HDR
// histograms, the per-tick timeline, the machine-readable tare.Summary,
// clean-tick percentiles and the attribution of per-tick p95 to host and load
// figures.
//
// It is pure computation: no I/O, no goroutines, no locks. One consumer
// goroutine (the caller's) feeds every *tare.Result, every tare.HostSample and
// every queue depth sample into a Recorder, in the order it receives them.
//
// # What it assumes
//
//   - Results arrive when they finish, roughly in the order of their Done
//     time. A tick's latency percentiles are computed from a small histogram
//     that is closed and discarded once the newest instant seen (the latest
//     Done or host sample End) is Config.Grace past the tick's end. A result
//     that arrives later still counts everywhere else, is left out of that
//     tick's percentiles, and is reported by Recorder.Warnings.
//   - Host samples arrive asynchronously at roughly the tick boundaries. A
//     sample belongs to the tick that contains its midpoint,
//     Start + (End − Start)/2, so a sample a little early or late on either
//     edge still lands in the tick it mostly covers. Several samples in one
//     tick (a sampler faster than the timeline) are merged into their
//     duration-weighted mean.
//   - Memory stays flat in the number of requests: the recorder keeps seven
//     run-wide histograms (about 184 KB each, allocated on first use), one
//     small struct per tick, at most a grace window of open per-tick
//     histograms, a pending buffer of the requests that finished within
//     the grace window, and a uniform sample of SampleSize requests (256 KB)
//     for the verdict's latency signal. A run of 1,000,000 requests does
//     not keep 1,000,000 results.
//
// # Which requests count
//
// Latency (Done − Scheduled) and service time (Done − Sent) are taken over
// every request that was sent and finished, failed ones included: a timeout
// is a slow answer, and leaving it out would flatter the tail. Dropped
// arrivals (never sent, the in-flight cap was reached) have no latency; they
// are counted in requests.dropped and in their tick. Send lag is over every
// sent request.
//
// Run-wide percentiles come from HDR histograms in microseconds with three
// significant figures over 1 µs .. 1 h, so a reported percentile is within
// 0.1 % of the true order statistic; values above 1 h are recorded as 1 h and
// counted (the exact maximum and mean are kept aside). Per-tick percentiles
// use two significant figures (within 1 %): they are read one tick at a time
// against the host figures of that tick, where 1 % is far below the noise.
//
// A tick is polluted when its aggregate steal, its throttled share or the
// measured processes' wait behind neighbours exceeds Config.Threshold
// (tare.HostSample.Polluted; PSI is reported, not judged there, since it
// cannot tell the system under test's own waiting from a neighbour's
// doing). Clean-tick percentiles are over the
// requests whose every tick, from the one containing Scheduled to the one
// containing Done, has a host sample and is not polluted; a tick without a
// sample cannot vouch for the request.
//
// # Comparisons
//
// Compare puts runs side by side. Divergence per metric is |a − b| /
// min(a, b) for the two runs furthest apart. Between two windows there are
// two tests, runs of one window pooled.
//
// The first is on every request's latency, from the raw records (at most
// MaxTestedRequests a run, every k-th beyond): a Mann-Whitney U test, its
// effect size as the chance that a request of one window was slower than
// one of the other, and the ratio of avg, p50, p95 and p99 with an
// interval. The intervals are Bonferroni-widened so that all of a
// comparison's hold together at FamilyConfidence (95 %): with three
// windows, each is at 99.6 %. Requests are taken as independent draws; a
// neighbour that slowed a few seconds of one window slows a run of them
// together, a real difference of that window, not a measure of how often
// the host does it. RequestTest says how the intervals are drawn.
//
// The second is on per-tick p95, the figure every stored run keeps: one
// value per tick with completions. Ticks are taken as independent draws,
// which they are not quite (a slow tick tends to follow a slow tick), so
// the p-value is on the hopeful side; it backs the divergence, it does not
// replace it. The test is go-moremath's, the one
// benchstat runs: exact for small samples (up to 50 ticks a side, 25 with
// ties), where the normal approximation is rough, and the tie- and
// continuity-corrected normal approximation beyond. The bootstrap interval
// is for the difference of the median tick p95 of the two windows, from
// resamples drawn with a fixed seed, so the same runs give the same
// interval; its bounds are quantiles of the resampled differences, taken
// with go-moremath's Sample.Quantile.
//
// # What judge applies thresholds to
//
// As benchstat's benchmath computes and its benchtab presents, stats
// computes the statistics the verdict reads and judge decides on them:
// TickVariation, the permutation test of the latency signal (whether
// some ticks' requests are slower than the same requests shuffled into
// ticks of their sizes); RequestsToResolve, the power calculation of a
// comparison judged too little data; Median; and PText, a p-value in
// words. go-moremath is imported here alone.
package stats
