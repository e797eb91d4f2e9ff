package session

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// TestMergedVerdictNamesTheShard: the shards' own verdicts, judged on
// their own hosts, reach the merged verdict by shard and host name: one
// whose host had steal, one whose generator was starved.
func TestMergedVerdictNamesTheShard(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir()+"/merge.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const group = "0193-merge"
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	th := judge.DefaultThresholds() // as the shards' command line set them
	th.Steal, th.SendLagP99 = 25, 40*time.Millisecond
	fired := map[int]tare.Signal{
		2: {Name: "steal", Fired: true, Value: tare.Float(31), Threshold: 10, Detail: "steal was 31% of ticks"},
		3: {Name: "generator", Fired: true, Value: tare.Float(40), Threshold: 10, Detail: "send lag p99 was 40 ms"},
	}
	for i := 1; i <= 3; i++ {
		run := tare.Run{ID: fmt.Sprintf("%s.shard-%d-of-3", group, i), Label: "merge", Target: "http://127.0.0.1/",
			Arrival: fmt.Sprintf("poisson 10/s for 20 jobs, shard %d/3", i), StartedAt: start,
			Config: map[string]string{tare.ConfigShardArrival: "poisson 30/s for 60 jobs"}}
		env := tare.Env{Hostname: fmt.Sprintf("host-%d", i), VCPUs: 2}
		if err := st.CreateRun(ctx, run, env); err != nil {
			t.Fatal(err)
		}
		var rs []tare.Result
		for k := range 20 {
			at := start.Add(time.Duration(k*300+i*100) * time.Millisecond)
			rs = append(rs, tare.Result{Seq: uint64(k), Scheduled: at, Sent: at, Done: at.Add(time.Duration(i*k+1) * time.Millisecond)})
		}
		if err := st.AppendResults(ctx, run.ID, rs); err != nil {
			t.Fatal(err)
		}
		s := tare.Summary{Schema: tare.SummarySchema, Run: run, Env: env, Requests: tare.Requests{Total: 20, OK: 20},
			Verdict: tare.Verdict{Level: tare.Clean, SLO: []tare.SLOCheck{{Objective: "p95<=2ms", LimitMS: 2}}}, Thresholds: th.Map(),
			// What each shard's own host did: the merged run keeps it per shard.
			Generator: tare.Generator{CPUPct: tare.Float(float64(i)), RunDelayPct: tare.Float(0.5)},
			Host: tare.HostSummary{CPUBusyPct: tare.Float(40 + float64(i)), Steal: tare.StealStats{Mean: tare.Float(float64(i)), Max: tare.Float(float64(5 * i))}, Ticks: 7,
				CPUBy: &tare.CPUBy{SystemUnderTest: 20, Tare: 5, Others: 10, Idle: 65, TopOthers: []tare.ProcessShare{{Name: "cron", PID: 90 + i, CPUPct: 3}}}},
			SUT: &tare.SUTSummary{PIDs: []int{700 + i}, FoundBy: "listening socket of 127.0.0.1:8080", CPUPct: tare.Float(30)}}
		s.Verdict.Warnings = []string{fmt.Sprintf("only %d host ticks", 7)}
		s.Run.Status, s.Run.EndedAt = tare.StatusComplete, start.Add(7*time.Second)
		if sig, ok := fired[i]; ok {
			s.Verdict.Level, s.Verdict.Signals = tare.Polluted, []tare.Signal{sig}
		}
		if err := st.FinishRun(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	s := mergeShards(t, st, group, 3)
	if got := judge.ThresholdsOf(s.Thresholds); got != th {
		t.Errorf("merged run judged with thresholds %+v; want the shards' %+v", got, th)
	}
	if len(s.Verdict.SLO) != 1 || s.Verdict.SLO[0].Objective != "p95<=2ms" || s.Verdict.SLO[0].Met {
		t.Errorf("merged SLO checks %+v; want the shards' p95<=2ms, not met by the pooled records", s.Verdict.SLO)
	}
	if s.Requests.Total != 60 || s.Verdict.Level != tare.Polluted || s.Run.Arrival != "poisson 30/s for 60 jobs over 3 shards" {
		t.Errorf("merged: %d requests, level %s, arrival %q; want 60, polluted, the whole schedule over 3 shards", s.Requests.Total, s.Verdict.Level, s.Run.Arrival)
	}
	// The verdict is the shards': every signal names its shard, every
	// warning is a shard's or the merge's own, and none speaks of the
	// pooled records as if they were a host that was not sampled.
	for _, sig := range s.Verdict.Signals {
		if sig.Fired && !strings.HasPrefix(sig.Detail, "shard ") {
			t.Errorf("a signal of the merged run names no shard: %s: %s", sig.Name, sig.Detail)
		}
	}
	for _, w := range s.Verdict.Warnings {
		if strings.Contains(w, "was not sampled") || strings.HasPrefix(w, "the system under test was not found") {
			t.Errorf("the merged verdict says the host was not measured, though every shard measured its own: %q", w)
		}
	}
	if !slices.Contains(s.Verdict.Warnings, "shard 2/3 on host host-2: only 7 host ticks") {
		t.Errorf("the shards' own warnings are not there, named: %q", s.Verdict.Warnings)
	}
	if s.Env.Hostname != "host-1, host-2, host-3" {
		t.Errorf("merged env hostname %q, want the shards' hosts", s.Env.Hostname)
	}
	for i, sh := range s.Shards {
		n := float64(i + 1)
		if sh.Arrival != fmt.Sprintf("poisson 10/s for 20 jobs, shard %d/3", i+1) || sh.VCPUs != 2 || sh.Generator.CPUPct == nil || *sh.Generator.CPUPct != n ||
			sh.Host.CPUBusyPct == nil || *sh.Host.CPUBusyPct != 40+n || sh.Host.CPUBy == nil || sh.Host.CPUBy.TopOthers[0].PID != 90+i+1 ||
			sh.SUT == nil || sh.SUT.PIDs[0] != 700+i+1 {
			t.Errorf("shard %d's line does not carry its own host's figures: %+v", i+1, sh)
		}
	}
	var details []string
	for _, sig := range s.Verdict.Signals {
		if sig.Fired {
			details = append(details, sig.Detail)
		}
	}
	all := strings.Join(details, "\n")
	for _, want := range []string{"shard 2/3 on host host-2: steal", "shard 3/3 on host host-3: send lag"} {
		if !strings.Contains(all, want) {
			t.Errorf("the merged verdict does not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "host-1") {
		t.Errorf("the quiet shard is blamed:\n%s", all)
	}
	if got := s.Shards[1]; got.Hostname != "host-2" || got.Level != tare.Polluted || !slices.Equal(got.Fired, []string{"steal"}) {
		t.Errorf("shard 2's line: %+v", got)
	}
}

// TestMergeRefusesSkewedClocks: a shard whose clock was further off the
// coordinating Redis than the tolerance is not merged, and the error names
// it; within the tolerance its records move onto the Redis clock.
func TestMergeRefusesSkewedClocks(t *testing.T) {
	tests := []struct {
		name    string
		offset  string // shard 2's offset at start and end, ms
		wantErr string
	}{
		{name: "in tolerance", offset: "20.000"},
		{name: "skewed", offset: "120.000", wantErr: "shard 2/2 on host host-2 had its clock 120ms off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, t.TempDir()+"/clock.db")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
			for i := 1; i <= 2; i++ {
				run := tare.Run{ID: fmt.Sprintf("g.shard-%d-of-2", i), StartedAt: start, Config: map[string]string{
					tare.ConfigClockStart: "0.000", tare.ConfigClockEnd: "0.000"}}
				if i == 2 {
					run.Config[tare.ConfigClockStart], run.Config[tare.ConfigClockEnd] = tt.offset, tt.offset
				}
				env := tare.Env{Hostname: fmt.Sprintf("host-%d", i)}
				if err := st.CreateRun(ctx, run, env); err != nil {
					t.Fatal(err)
				}
				at := start.Add(time.Second)
				st.AppendResults(ctx, run.ID, []tare.Result{{Scheduled: at, Sent: at, Done: at.Add(5 * time.Millisecond)}})
				s := tare.Summary{Schema: tare.SummarySchema, Run: run, Env: env}
				s.Run.Status, s.Run.EndedAt = tare.StatusComplete, start.Add(2*time.Second)
				if err := st.FinishRun(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			rows, _ := Shards(ctx, st, "g")
			s, _, err := merge(ctx, st, "g", rows)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("merged despite the skew: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Latency.Max == nil || math.Abs(*s.Latency.Max-5) > 0.01 {
				t.Errorf("latency max %v ms: the shift changed a latency", s.Latency.Max)
			}
		})
	}
}

// TestSharedHosts: shards that ran on one host are a warning in the merged
// verdict, naming them and the host; shards on hosts of their own are not.
func TestSharedHosts(t *testing.T) {
	on := func(hosts ...string) []tare.ShardSummary {
		var out []tare.ShardSummary
		for i, h := range hosts {
			out = append(out, tare.ShardSummary{Shard: fmt.Sprintf("%d/%d", i+1, len(hosts)), Hostname: h})
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		shards []tare.ShardSummary
		want   []string // one substring per warning
	}{
		{"own hosts", on("node-a", "node-b", "node-c"), nil},
		{"host unknown", on("", ""), nil},
		{"two on one node", on("node-a", "node-b", "node-a"), []string{"shards 1/3, 3/3 ran on one host, node-a:"}},
		{"two pairs", on("node-b", "node-a", "node-b", "node-a"), []string{"shards 1/4, 3/4 ran on one host, node-b:", "shards 2/4, 4/4 ran on one host, node-a:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := sharedHosts(tt.shards)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "anti-affinity") {
					t.Errorf("warning %q, want it to say %q and the cure", got[i], w)
				}
			}
		})
	}
}

// TestMergeStagesAndTargets: the merged stages and requests of a targets
// file are those one recorder computes from all the shards' records (so
// the percentiles are the pooled ones), their counts the sums of the
// shards' own, and a stage's verdict the worst of the shards'; the prompts'
// tokens add up. Shard 2
// starts 3 ms after shard 1, and its records fall in its own stages.
func TestMergeStagesAndTargets(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir()+"/stages.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const group = "0193-stages"
	names := []string{"home", "POST /orders", "slow"}
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	spans := []stats.Span{{From: time.Second, To: 3 * time.Second}, {From: 3 * time.Second, To: 5 * time.Second}}
	var shardRows [][]tare.Result
	for i := 1; i <= 2; i++ {
		began := start.Add(time.Duration(i-1) * 3 * time.Millisecond)
		var rs []tare.Result
		for k := range 100 {
			// 20/s a shard from the warm-up's end, one of them a
			// millisecond before stage 2 by the shard's own clock.
			at := began.Add(time.Second + time.Duration(k)*50*time.Millisecond)
			if k == 40 {
				at = at.Add(-time.Millisecond)
			}
			r := tare.Result{Seq: uint64(k), Scheduled: at, Sent: at, Done: at.Add(time.Duration(1+(i*k)%37+(k%3)*20) * time.Millisecond), TargetIndex: k % 3}
			if k%17 == 5 {
				r.Err = "http 503"
			} else {
				r.PromptTokens, r.PromptTokenSource = 10+k%7, "usage"
			}
			rs = append(rs, r)
		}
		shardRows = append(shardRows, rs)
	}
	// What each shard recorded as it ran, and what one recorder makes of
	// all the records pooled.
	summarise := func(rs []tare.Result, began time.Time) (tare.Summary, *stats.Parts) {
		rec, err := stats.NewRecorder(stats.Config{Start: began, Targets: names, Grace: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		parts, err := stats.NewParts(stats.Config{Start: began, Grace: time.Minute}, spans)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rs {
			rec.AddResult(&rs[k])
			parts.AddResult(&rs[k])
		}
		return rec.Summary(began.Add(6*time.Second), 4*time.Second), parts
	}
	var want []tare.StageSummary
	for i, rs := range shardRows {
		began := start.Add(time.Duration(i) * 3 * time.Millisecond)
		run := tare.Run{ID: fmt.Sprintf("%s.shard-%d-of-2", group, i+1), Target: "targets.jsonl", StartedAt: began}
		env := tare.Env{Hostname: fmt.Sprintf("host-%d", i+1)}
		if err := st.CreateRun(ctx, run, env); err != nil {
			t.Fatal(err)
		}
		if err := st.AppendResults(ctx, run.ID, rs); err != nil {
			t.Fatal(err)
		}
		s, parts := summarise(rs, began)
		s.Schema, s.Run, s.Env = tare.SummarySchema, run, env
		s.Run.Status, s.Run.EndedAt = tare.StatusComplete, began.Add(6*time.Second)
		for k := range parts.Len() {
			ps, _ := parts.Summary(k)
			stage := tare.StageSummary{Stage: k + 1, StartS: spans[k].From.Seconds(), DurationS: (spans[k].To - spans[k].From).Seconds(),
				FromPerS: 10 * float64(k), TargetPerS: 10, Requests: ps.Requests.Total, Verdict: tare.Clean}
			if i == 1 && k == 0 {
				stage.Verdict, stage.Fired = tare.Polluted, []string{"steal"}
			}
			s.Stages = append(s.Stages, stage)
			if i == 0 {
				want = append(want, stage)
			} else {
				want[k].Requests += stage.Requests
			}
		}
		if err := st.FinishRun(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	s := mergeShards(t, st, group, 2)

	// One generator's figures from the same records: each shard's moved
	// onto shard 1's start, so that it falls in the stage it ran in.
	var same []tare.Result
	for i, rs := range shardRows {
		for _, r := range rs {
			lead := time.Duration(i) * 3 * time.Millisecond
			r.Scheduled, r.Sent, r.Done = r.Scheduled.Add(-lead), r.Sent.Add(-lead), r.Done.Add(-lead)
			same = append(same, r)
		}
	}
	pooled, pooledParts := summarise(same, start)
	if !reflect.DeepEqual(s.Targets, pooled.Targets) {
		t.Errorf("merged targets\n%+v\nwant those of the pooled records\n%+v", s.Targets, pooled.Targets)
	}
	if len(s.Stages) != len(want) {
		t.Fatalf("merged stages %+v, want %d", s.Stages, len(want))
	}
	for k, got := range s.Stages {
		w := want[k]
		if got.Requests != w.Requests || got.StartS != w.StartS || got.DurationS != w.DurationS ||
			got.FromPerS != 2*w.FromPerS || got.TargetPerS != 2*w.TargetPerS {
			t.Errorf("merged stage %d: %d requests from %vs for %vs, %v to %v/s; want %d (the shards' sum) from %vs for %vs, %v to %v/s (twice a shard's)",
				k+1, got.Requests, got.StartS, got.DurationS, got.FromPerS, got.TargetPerS, w.Requests, w.StartS, w.DurationS, 2*w.FromPerS, 2*w.TargetPerS)
		}
		ps, _ := pooledParts.Summary(k)
		lat := tare.QuantilesMS{P50: ps.Latency.P50, P95: ps.Latency.P95, P99: ps.Latency.P99}
		if !reflect.DeepEqual(got.Latency, lat) || got.Requests != ps.Requests.Total || got.Errors != ps.Requests.Errors {
			t.Errorf("merged stage %d: %d requests, %d errors, latency %v; one generator's: %d, %d, %v",
				k+1, got.Requests, got.Errors, quantiles(got.Latency), ps.Requests.Total, ps.Requests.Errors, quantiles(lat))
		}
	}
	if got := s.Stages[0]; got.Verdict != tare.Polluted || !slices.Contains(got.Fired, "steal") {
		t.Errorf("merged stage 1 is %s with %v, want polluted by shard 2's steal", got.Verdict, got.Fired)
	}
	if got := s.Stages[1]; got.Verdict == tare.Polluted {
		t.Errorf("merged stage 2 is polluted, though neither shard's was")
	}
	// The warning that stage 1 is worse than the run names it by number.
	if !slices.ContainsFunc(s.Verdict.Warnings, func(w string) bool { return strings.HasPrefix(w, "stage 1 (0/s to 20/s, from 1s) was polluted") }) {
		t.Errorf("no warning names merged stage 1 by its number: %q", s.Verdict.Warnings)
	}
	if s.Requests.Total != 200 {
		t.Errorf("merged %d requests, want 200", s.Requests.Total)
	}
	if s.Model == nil || pooled.Model == nil || s.Model.InputTokens == nil || *s.Model.InputTokens != *pooled.Model.InputTokens {
		t.Errorf("merged model figures %+v, want the prompts' %+v", s.Model, pooled.Model)
	}
}

// quantiles is q for messages.
func quantiles(q tare.QuantilesMS) []any {
	var out []any
	for _, p := range []*float64{q.P50, q.P95, q.P99} {
		if p == nil {
			out = append(out, nil)
		} else {
			out = append(out, *p)
		}
	}
	return out
}

// mergeShards merges the want shards of group stored in st.
func mergeShards(t *testing.T, st tare.Store, group string, want int) tare.Summary {
	t.Helper()
	rows, err := Shards(t.Context(), st, group)
	if err != nil || len(rows) != want {
		t.Fatalf("Shards: %d rows, %v; want %d", len(rows), err, want)
	}
	s, _, err := merge(t.Context(), st, group, rows)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
