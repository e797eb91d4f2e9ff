package session

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// DefaultClockTolerance is the largest clock offset against the
// coordinating Redis a shard may have for its records to be merged onto
// one time axis with the others'.
const DefaultClockTolerance = 50 * time.Millisecond

// Shards returns the stored rows of the shards of run id, in shard order,
// or none when id is not a sharded run.
func Shards(ctx context.Context, st tare.Store, id string) ([]tare.Run, error) {
	if id == "" || strings.Contains(id, tare.ShardSep) {
		return nil, nil
	}
	runs, err := st.FindRuns(ctx, tare.RunFilter{})
	if err != nil {
		return nil, err
	}
	var out []tare.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, id+tare.ShardSep) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return shardOf(out[i].ID) < shardOf(out[j].ID) })
	return out, nil
}

// shardOf is the index of a shard row's id ("…​.shard-2-of-4" is 2).
func shardOf(rowID string) int {
	_, rest, _ := strings.Cut(rowID, tare.ShardSep)
	var i, n int
	fmt.Sscanf(rest, "%d-of-%d", &i, &n)
	return i
}

// shardName is "shard 2/4".
func shardName(rowID string) string {
	_, rest, _ := strings.Cut(rowID, tare.ShardSep)
	return "shard " + strings.Replace(rest, "-of-", "/", 1)
}

// merge summarises the shards of one run as one run. Latency and every
// other per-request figure, the figures per stage of --stages and per
// request of a --targets file among them, are re-summarised from the
// pooled raw records, so the merged percentiles are those of all records
// together, exactly as one generator would have reported them
// (percentiles do not average).
// Host figures and signals are not pooled: each shard's host was judged
// on its own ticks when it ran, so the merged run keeps each shard's host
// lines (its generator, its host, whose CPU, the system under test it
// found) in its line of Shards, and its verdict is the shards' (the worst
// level, every signal that fired named with its shard and host); only the
// SLO is checked on the pooled figures. The run describes its whole
// schedule, as the shards recorded it.
func merge(ctx context.Context, st tare.Store, group string, rows []tare.Run) (tare.Summary, []tare.Tick, error) {
	sh, err := readShards(ctx, st, group, rows)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	parts, start, end := sh.parts, sh.start, sh.end
	// Shards stream one after another, so records are not in time order:
	// a grace over the whole run keeps every tick open until the end.
	names, warnings := shardTargets(parts)
	cfg := stats.Config{Start: start, Grace: end.Sub(start) + time.Second, Targets: names}
	rec, err := stats.NewRecorder(cfg)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	cfg.Targets = nil
	stages, warning, err := newShardStages(cfg, parts, sh.starts)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	if warning != "" {
		warnings = append(warnings, warning)
	}
	var seen arrivalsSeen
	for i, r := range rows {
		err := st.StreamResults(ctx, r.ID, func(res *tare.Result) error {
			onRedisClock(res, sh.shifts[i])
			seen.add(res.Scheduled)
			end = maxTime(end, res.Done)
			rec.AddResult(res)
			stages.add(i, res)
			return nil
		})
		if err != nil {
			return tare.Summary{}, nil, err
		}
	}
	// The shards ran with one command line: the first's thresholds and
	// SLO are the run's.
	th := judge.ThresholdsOf(parts[0].Thresholds)
	slo, err := judge.SLOOf(parts[0].Verdict.SLO)
	if err != nil {
		return tare.Summary{}, nil, fmt.Errorf("the SLO of shard %s: %w", rows[0].ID, err)
	}
	run, env, blameWhy := mergedRun(group, parts, start, end)
	judged := make([]judge.Shard, len(rows))
	s, ticks := finish(rec, closing{
		run: run, span: seen.span(), env: env, blameWhy: blameWhy, thresholds: th, slo: slo,
		before: func(s *tare.Summary) {
			// The raw records do not keep their redirects: each shard
			// counted its own, and counts add up.
			s.Requests.Redirects = 0
			for _, p := range parts {
				s.Requests.Redirects += p.Requests.Redirects
			}
			s.Shards = make([]tare.ShardSummary, len(rows))
			for i := range parts {
				s.Shards[i] = shardSummary(rows[i].ID, &parts[i])
				judged[i] = judge.Shard{Name: fmt.Sprintf("%s on host %s", shardName(rows[i].ID), cmp.Or(parts[i].Env.Hostname, "?")), Summary: &parts[i]}
			}
		},
		verdict: func(s *tare.Summary, _ []tare.Tick) tare.Verdict { return judge.Merged(s, judged, th, slo) },
	})
	stages.summarise(parts, th, slo, &s)
	if !targetsAddUp(s.Targets, parts) {
		s.Targets = nil
		warnings = append(warnings, "the shards' stored records do not add up to their own figures per request of the targets file (records stored before tare kept which request each took, or records lost): the merged run has no figures per request (each shard's own are in its row)")
	}
	s.Verdict.Warnings = append(s.Verdict.Warnings, warnings...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, sharedHosts(s.Shards)...)
	s.Verdict.Warnings = append(s.Verdict.Warnings, fmt.Sprintf("merged from %d shards: latency from all %d raw records pooled; the host figures and the verdict are each shard's own, judged on its host (in its lines)", len(rows), seen.n))
	return s, ticks, nil
}

// shards are the stored summaries of a run's shards, each moved onto the
// coordinating Redis's clock (by shifts), with their starts and the whole
// run's start and end.
type shards struct {
	parts      []tare.Summary
	shifts     []time.Duration
	starts     []time.Time
	start, end time.Time
}

// readShards reads the summaries of run group's shards, rows.
func readShards(ctx context.Context, st tare.Store, group string, rows []tare.Run) (shards, error) {
	sh := shards{parts: make([]tare.Summary, len(rows)), shifts: make([]time.Duration, len(rows)), starts: make([]time.Time, len(rows))}
	for i, r := range rows {
		s, err := st.FindSummary(ctx, r.ID)
		if err != nil {
			return sh, err
		}
		sh.parts[i] = s
		// Each shard stamped its records with its own clock: a coordinated
		// shard's recorded offset moves them onto the Redis clock, one time
		// axis for all, unless it is too large to trust.
		if mean, worst, ok := s.Run.ClockOffset(); ok {
			if worst > DefaultClockTolerance {
				return sh, tare.Errorf(tare.EINVALID, "run %s: %s on host %s had its clock %s off the coordinating Redis (tolerance %s): its records cannot be merged onto one time axis with the others; synchronise the clocks (chrony, NTP) and measure again",
					group, shardName(r.ID), cmp.Or(s.Env.Hostname, "?"), worst, DefaultClockTolerance)
			}
			sh.shifts[i] = mean
			s.Run.StartedAt, s.Run.EndedAt = s.Run.StartedAt.Add(mean), s.Run.EndedAt.Add(mean)
		}
		sh.starts[i] = s.Run.StartedAt
		if i == 0 || s.Run.StartedAt.Before(sh.start) {
			sh.start = s.Run.StartedAt
		}
		sh.end = maxTime(sh.end, s.Run.EndedAt)
	}
	return sh, nil
}

// mergedRun is the run the shards make, group, from start to end, its
// environment and why its blame was estimated: the first shard's, with
// the whole schedule, the hosts of all, and the status of one that did
// not complete.
func mergedRun(group string, parts []tare.Summary, start, end time.Time) (tare.Run, tare.Env, string) {
	run := parts[0].Run
	run.ID, run.StartedAt, run.EndedAt = group, start, end
	run.Status = tare.StatusComplete
	for _, p := range parts {
		if p.Run.Status != tare.StatusComplete {
			run.Status = p.Run.Status
		}
	}
	run.Arrival = wholeSchedule(parts[0].Run, len(parts))
	env := parts[0].Env
	env.Hostname = hostnames(parts)
	env.Pod = nil // each shard's own: in its line of Shards
	var blameWhy string
	if parts[0].Blame != nil {
		blameWhy = parts[0].Blame.Why
	}
	return run, env, blameWhy
}

// wholeSchedule describes the run's whole schedule over its n shards, as
// a shard recorded it ("poisson 200/s for 6s over 2 shards"); a shard
// stored before it did gives its own part, said to be one.
func wholeSchedule(first tare.Run, n int) string {
	if whole := first.Config[tare.ConfigShardArrival]; whole != "" {
		return fmt.Sprintf("%s over %d shards", whole, n)
	}
	return first.Arrival + " (one shard's part; the whole schedule was not recorded)"
}

// hostnames are the hosts the shards ran on, each once, in shard order.
func hostnames(parts []tare.Summary) string {
	var hosts []string
	for _, p := range parts {
		if h := cmp.Or(p.Env.Hostname, "?"); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ", ")
}

// shardTargets are the names of the requests of the targets file the
// shards ran, or none when they ran none; shards whose summaries name
// different ones are a warning, and no names.
func shardTargets(parts []tare.Summary) ([]string, []string) {
	namesOf := func(s tare.Summary) []string {
		var names []string
		for _, t := range s.Targets {
			names = append(names, t.Name)
		}
		return names
	}
	names := namesOf(parts[0])
	for _, p := range parts[1:] {
		if !slices.Equal(namesOf(p), names) {
			return nil, []string{"the shards' summaries do not name the same requests of a targets file (a shard that never finished names none): the merged run has no figures per request (each shard's own are in its row)"}
		}
	}
	return names, nil
}

// targetsAddUp reports whether the merged requests of each target are the
// sum of the shards' own: what the records the shards stored give.
func targetsAddUp(merged []tare.TargetSummary, parts []tare.Summary) bool {
	for j, t := range merged {
		sum := 0
		for _, p := range parts {
			sum += p.Targets[j].Requests
		}
		if t.Requests != sum {
			return false
		}
	}
	return true
}

// sharedHosts warns of shards that ran on one host: they shared its CPUs
// and its interference, so each one's host signals are no longer its own,
// and their generators may have starved each other.
func sharedHosts(shards []tare.ShardSummary) []string {
	var hosts []string
	on := map[string][]string{}
	for _, sh := range shards {
		if sh.Hostname == "" {
			continue
		}
		if on[sh.Hostname] == nil {
			hosts = append(hosts, sh.Hostname)
		}
		on[sh.Hostname] = append(on[sh.Hostname], sh.Shard)
	}
	var out []string
	for _, h := range hosts {
		if n := on[h]; len(n) > 1 {
			out = append(out, fmt.Sprintf("shards %s ran on one host, %s: they shared its CPUs and its interference, so their host figures are not told apart; give each generator a host of its own (on Kubernetes, the Job's pod anti-affinity on kubernetes.io/hostname)",
				strings.Join(n, ", "), h))
		}
	}
	return out
}

// shardSummary is one shard's line in a merged summary.
func shardSummary(rowID string, p *tare.Summary) tare.ShardSummary {
	sh := tare.ShardSummary{
		Shard: strings.TrimPrefix(shardName(rowID), "shard "), RunID: rowID, Hostname: p.Env.Hostname,
		Requests: p.Requests.Total, LatencyP99: p.Latency.P99, StealMeanPct: p.Host.Steal.Mean,
		ThrottledPct: p.Host.ThrottledPct, SendLagP99: p.SendLag.P99, Level: p.Verdict.Level,
		Arrival: p.Run.Arrival, VCPUs: p.Env.VCPUs, Generator: p.Generator, Host: p.Host, SUT: p.SUT,
	}
	if pod := p.Env.Pod; pod != nil {
		sh.Pod = pod.Namespace + "/" + pod.Name
	}
	for _, sig := range judge.Fired(p.Verdict) {
		sh.Fired = append(sh.Fired, sig.Name)
	}
	return sh
}

// onRedisClock moves the times a generator stamped by its clock offset.
// A queue job's Started, FirstByte and Done are a worker's stamps, on its
// own host's clock: they are left alone (workers record no offset yet).
func onRedisClock(res *tare.Result, shift time.Duration) {
	if shift == 0 {
		return
	}
	stamps := []*time.Time{&res.Scheduled, &res.Sent, &res.FirstByte, &res.Done}
	if !res.Started.IsZero() {
		stamps = stamps[:2]
	}
	for _, t := range stamps {
		if !t.IsZero() {
			*t = t.Add(shift)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
