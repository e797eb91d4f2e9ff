package judge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// seedComparison is the seed's two runs as stats.Compare lays them out:
// peak-ish (host busy) and off-peak (host quiet), with the divergences the
// fixture expects.
func seedComparison(t *testing.T) (*tare.Comparison, []tare.Summary) {
	t.Helper()
	a := loadArticle(t)
	f := tare.Float
	var runs []tare.Summary
	var c tare.Comparison
	for i, w := range []string{tare.WindowPeak, tare.WindowOffpeak} {
		r := a.Runs[i]
		s := tare.Summary{
			Run:      tare.Run{ID: fmt.Sprintf("r%d", i), Window: w},
			Requests: tare.Requests{Total: r.Requests, OK: r.Requests},
			Latency:  tare.LatencyMS{Avg: f(1000 * r.Latency.Avg), P95: f(1000 * r.Latency.P95), P99: f(1000 * r.Latency.P99)},
		}
		runs = append(runs, s)
		c.Runs = append(c.Runs, tare.ComparedRun{ID: s.Run.ID, Window: w, Latency: s.Latency})
	}
	c.Runs[0].Verdict, c.Runs[1].Verdict = tare.Polluted, tare.Clean
	c.DivergencePct = tare.Divergence{Avg: f(100), P95: f(140.9), P99: f(304.5)}
	return &c, runs
}

func TestProtocolSeed(t *testing.T) {
	c, runs := seedComparison(t)
	Protocol(c, runs, ProtocolRules{})
	v := c.Verdict
	if v.Level != tare.HostVariable || v.ThresholdPct != 30 || strings.Join(v.Diverged, ",") != "avg,p95,p99" {
		t.Errorf("verdict %s threshold %g diverged %v; want host-variable at 30 with avg, p95, p99", v.Level, v.ThresholdPct, v.Diverged)
	}
	all := strings.Join(v.Advice, "\n")
	for _, want := range []string{"the host is the variable: no scaling decision is valid from these runs", "do not scale up", "304.5%"} {
		if !strings.Contains(strings.ToLower(all), strings.ToLower(want)) {
			t.Errorf("advice lacks %q:\n%s", want, all)
		}
	}
	neverScaleUp(t, v.Advice)
	cp := c.Capacity
	if cp.Metric != "p95_ms" || *cp.Best != 1710 || *cp.Worst != 4120 || cp.Typical != nil || *cp.Gap != 2410 || *cp.GapPct != 140.9 {
		t.Errorf("capacity %+v: want best 1710, worst 4120, no typical, gap 2410 (140.9%%)", cp)
	}
}

// neverScaleUp fails when an advice line recommends scaling up: the words
// may appear only as "do not scale up".
func neverScaleUp(t *testing.T, advice []string) {
	t.Helper()
	for _, a := range advice {
		l := strings.ToLower(a)
		if strings.Contains(strings.ReplaceAll(l, "do not scale up", ""), "scale up") ||
			strings.Contains(l, "bigger instance") || strings.Contains(l, "add cpu") {
			t.Errorf("advice recommends scaling up: %q", a)
		}
	}
}

func TestProtocolDecisionRules(t *testing.T) {
	f := tare.Float
	// run is a window's summary with the given p95, in ms.
	run := func(window string, p95 float64) tare.Summary {
		return tare.Summary{Run: tare.Run{ID: window + "-id", Window: window}, Latency: tare.LatencyMS{P95: f(p95)}}
	}
	tests := []struct {
		name   string
		runs   []tare.Summary
		slo    string
		level  tare.CompareLevel
		advice string
		met    string // windows meeting the SLO, in order
	}{
		{"reproducible, SLO met", []tare.Summary{run("peak", 1100), run("offpeak", 1000), run("mid", 1050)}, "p95<=2s",
			tare.Reproducible, "Every run meets the SLO p95<=2s", "peak,offpeak,mid"},
		{"peak over, off-peak within", []tare.Summary{run("peak", 2600), run("offpeak", 1500), run("mid", 1700)}, "p95<=2s",
			tare.HostVariable, "Peak fails the SLO p95<=2s (p95<=2s: 2600 ms) while off-peak meets it: add headroom or move the workload", "offpeak,mid"},
		{"off-peak over too", []tare.Summary{run("peak", 2600), run("offpeak", 2100), run("mid", 2300)}, "p95<=2s",
			tare.Reproducible, "the problem is the code, not the host", ""},
		{"mid over, no peak", []tare.Summary{run("offpeak", 1500), run("mid", 2200)}, "p95<=2s",
			tare.HostVariable, "Mid fails the SLO", "offpeak"},
		{"peak over, no off-peak run", []tare.Summary{run("peak", 2600), run("mid", 1900)}, "p95<=2s",
			tare.HostVariable, "no off-peak run says whether a quiet host would meet it", "mid"},
		{"runs without windows", []tare.Summary{run("", 2600), run("", 1900)}, "p95<=2s",
			tare.HostVariable, "without protocol windows tare cannot tell the host from the code", "-id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo, err := ParseSLO(tt.slo)
			if err != nil {
				t.Fatal(err)
			}
			c := &tare.Comparison{}
			var p95s []*float64
			for _, r := range tt.runs {
				c.Runs = append(c.Runs, tare.ComparedRun{ID: r.Run.ID, Window: r.Run.Window, Latency: r.Latency})
				p95s = append(p95s, r.Latency.P95)
			}
			lo, hi := *p95s[0], *p95s[0]
			for _, p := range p95s {
				lo, hi = min(lo, *p), max(hi, *p)
			}
			c.DivergencePct.P95 = f(100 * (hi - lo) / lo)
			Protocol(c, tt.runs, ProtocolRules{SLO: slo})
			all := strings.Join(c.Verdict.Advice, "\n")
			if c.Verdict.Level != tt.level || !strings.Contains(all, tt.advice) {
				t.Errorf("level %s, advice:\n%s\nwant %s and %q", c.Verdict.Level, all, tt.level, tt.advice)
			}
			var met []string
			for _, w := range c.Verdict.SLO {
				if w.Met {
					met = append(met, w.Window)
				}
			}
			if got := strings.Join(met, ","); got != tt.met {
				t.Errorf("windows meeting the SLO: %q, want %q", got, tt.met)
			}
			neverScaleUp(t, c.Verdict.Advice)
		})
	}
}

func TestProtocolThreshold(t *testing.T) {
	c, runs := seedComparison(t)
	Protocol(c, runs, ProtocolRules{DivergencePct: 500})
	if c.Verdict.Level != tare.Reproducible || len(c.Verdict.Diverged) != 0 {
		t.Errorf("at a 500%% threshold: %s %v, want reproducible", c.Verdict.Level, c.Verdict.Diverged)
	}
	if !strings.Contains(strings.Join(c.Verdict.Advice, " "), "Even so, peak was polluted") {
		t.Errorf("advice %q: want the polluted peak run named", c.Verdict.Advice)
	}
}

func TestProtocolSweepCapacityDiverges(t *testing.T) {
	f := tare.Float
	c := &tare.Comparison{Sweeps: []tare.SweepCapacity{{Window: "peak", CapacityPerS: f(12)}, {Window: "offpeak", CapacityPerS: f(24)}}}
	Protocol(c, nil, ProtocolRules{})
	if c.Verdict.Level != tare.HostVariable || strings.Join(c.Verdict.Diverged, ",") != "capacity" ||
		!strings.Contains(c.Verdict.Advice[0], "The capacity a sweep found diverges by 100.0% between") {
		t.Errorf("verdict %+v: want host-variable on a 100%% capacity gap", c.Verdict)
	}
}

// TestCapacityRange: best, worst and typical are what was measured, each
// named by its window, whichever window it was; where off-peak was not
// the quietest or peak not the busiest, a finding says so.
func TestCapacityRange(t *testing.T) {
	f := tare.Float
	tests := []struct {
		name                      string
		c                         tare.Comparison
		metric, from              string
		best, worst, typical, gap *float64
		gapPct                    *float64
		windows                   string // best, worst, typical
		finding                   string // in the findings; "" for none
	}{
		{"windows, days pooled by median", tare.Comparison{Runs: []tare.ComparedRun{
			{Window: "peak", Latency: tare.LatencyMS{P95: f(300)}}, {Window: "peak", Latency: tare.LatencyMS{P95: f(500)}},
			{Window: "offpeak", Latency: tare.LatencyMS{P95: f(100)}}, {Window: "mid", Latency: tare.LatencyMS{P95: f(200)}},
		}}, "p95_ms", "windows", f(100), f(400), f(200), f(300), f(300), "offpeak,peak,mid", ""},
		{"runs without windows", tare.Comparison{Runs: []tare.ComparedRun{
			{ID: "r1", Latency: tare.LatencyMS{P95: f(120)}}, {ID: "r2", Latency: tare.LatencyMS{P95: f(80)}},
		}}, "p95_ms", "runs", f(80), f(120), nil, f(40), f(50), "r2,r1,", ""},
		{"sweeps: requests per second", tare.Comparison{Sweeps: []tare.SweepCapacity{
			{Window: "peak", CapacityPerS: f(12)}, {Window: "offpeak", CapacityPerS: f(24)}, {Window: "mid", CapacityPerS: f(20)},
		}}, "rate_per_s", "windows", f(24), f(12), f(20), f(12), f(100), "offpeak,peak,mid", ""},
		{"peak faster than off-peak", tare.Comparison{Runs: []tare.ComparedRun{
			{Window: "peak", Latency: tare.LatencyMS{P95: f(90)}}, {Window: "offpeak", Latency: tare.LatencyMS{P95: f(130)}},
		}}, "p95_ms", "windows", f(90), f(130), nil, f(40), f(44.4), "peak,offpeak,",
			"Off-peak, the window expected to be the quietest, was not: p95 was 90.0ms in peak against 130ms in offpeak, untested"},
		{"peak a little faster than off-peak: a tie, no finding", tare.Comparison{Runs: []tare.ComparedRun{
			{Window: "peak", Latency: tare.LatencyMS{P95: f(90)}}, {Window: "offpeak", Latency: tare.LatencyMS{P95: f(100)}},
		}}, "p95_ms", "windows", f(90), f(100), nil, f(10), f(11.1), "peak,offpeak,", ""},
		{"mid slower than peak", tare.Comparison{Runs: []tare.ComparedRun{
			{Window: "peak", Latency: tare.LatencyMS{P95: f(150)}}, {Window: "offpeak", Latency: tare.LatencyMS{P95: f(100)}}, {Window: "mid", Latency: tare.LatencyMS{P95: f(400)}},
		}}, "p95_ms", "windows", f(100), f(400), f(150), f(300), f(300), "offpeak,mid,peak",
			"Peak, the window expected to be the busiest, was not: p95 was 400ms in mid against 150ms in peak"},
		{"sweep: peak sustained the most", tare.Comparison{Sweeps: []tare.SweepCapacity{
			{Window: "peak", CapacityPerS: f(30)}, {Window: "offpeak", CapacityPerS: f(24)},
		}}, "rate_per_s", "windows", f(30), f(24), nil, f(6), f(25), "peak,offpeak,",
			"Off-peak, the window expected to be the quietest, was not: the highest sustainable rate was 30/s in peak against 24/s in offpeak"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Protocol(&tt.c, make([]tare.Summary, len(tt.c.Runs)), ProtocolRules{})
			r := tt.c.Capacity
			if r.Metric != tt.metric || r.From != tt.from || !eqPtr(r.Best, tt.best) || !eqPtr(r.Worst, tt.worst) ||
				!eqPtr(r.Typical, tt.typical) || !eqPtr(r.Gap, tt.gap) || !eqPtr(r.GapPct, tt.gapPct) {
				t.Errorf("got %s from %s best %v worst %v typical %v gap %v (%v%%)", r.Metric, r.From,
					show(r.Best), show(r.Worst), show(r.Typical), show(r.Gap), show(r.GapPct))
			}
			if got := r.BestWindow + "," + r.WorstWindow + "," + r.TypicalWindow; got != tt.windows {
				t.Errorf("best, worst, typical from %q; want %q", got, tt.windows)
			}
			found := strings.Join(r.Findings, "\n")
			if tt.finding == "" && found != "" || !strings.Contains(found, tt.finding) {
				t.Errorf("findings:\n%s\nwant %q", found, tt.finding)
			}
		})
	}
}

func TestStep(t *testing.T) {
	f := tare.Float
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	// timeline is 10 ticks of 1 s at rate arrivals a tick; the backlog
	// grows by grow a tick; completions keep up unless short.
	timeline := func(rate, grow, completions int) []tare.Tick {
		var out []tare.Tick
		for i := range 10 {
			out = append(out, tare.Tick{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
				Arrivals: rate, Completions: completions, InFlight: 2 + grow*i})
		}
		return out
	}
	summary := func(offered, p95 float64, q tare.Requests) *tare.Summary {
		return &tare.Summary{Run: tare.Run{ID: "s"}, Requests: q, Rate: tare.Rate{Offered: f(offered), Achieved: f(offered)},
			Latency: tare.LatencyMS{P50: f(p95 / 2), P95: f(p95)}}
	}
	slo, _ := ParseSLO("p95<=500ms")
	ok := tare.Requests{Total: 200, OK: 200}
	tests := []struct {
		name   string
		s      *tare.Summary
		ticks  []tare.Tick
		status tare.StepStatus
		reason string
	}{
		{"holds", summary(20, 100, ok), timeline(20, 0, 20), tare.StepOK, ""},
		{"slo fails", summary(20, 800, ok), timeline(20, 0, 20), tare.StepSLOFailed, "SLO p95<=500ms: 800 ms"},
		{"backlog grows", summary(20, 400, ok), timeline(20, 4, 16), tare.StepSaturated, "in-flight grew by 4.0 a second"},
		{"a little growth at a low rate is noise", summary(2, 100, ok), timeline(2, 0, 2), tare.StepOK, ""},
		{"completions short", summary(20, 100, ok), timeline(20, 0, 14), tare.StepSaturated, "completions fell 30% short"},
		{"drops", summary(20, 100, tare.Requests{Total: 200, OK: 190, Dropped: 10}), timeline(20, 0, 20), tare.StepSaturated, "10 of 200 arrivals dropped"},
		{"errors", summary(20, 100, tare.Requests{Total: 200, OK: 180, Errors: 20}), timeline(20, 0, 20), tare.StepSaturated, "10.0% of requests failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Step(tt.s, tt.ticks, slo, DefaultSweepRules())
			reasons := strings.Join(st.Reasons, "; ")
			if st.Status != tt.status || (tt.reason == "" && reasons != "") || !strings.Contains(reasons, tt.reason) {
				t.Errorf("status %s reasons %q; want %s with %q", st.Status, reasons, tt.status, tt.reason)
			}
		})
	}
	q := tare.Tick{QueueDepth: f(3), InFlight: 9}
	if backlogName(&tare.Summary{}, []tare.Tick{q}) != "queue depth" || outstanding(&tare.Summary{})(q) != 3 {
		t.Errorf("a queue target's backlog is its queue depth")
	}
	// A model server's waiting requests are part of the requests in
	// flight: one without a cap queues none while its work piles up.
	model := &tare.Summary{Model: &tare.ModelSummary{}}
	if backlogName(model, []tare.Tick{q}) != "in-flight" || outstanding(model)(q) != 9 {
		t.Errorf("a model target's backlog is its requests in flight")
	}
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name     string
		plan     SweepPlan
		capacity float64 // the system holds up to this rate
		steps    string
		found    float64
		atLeast  bool
		why      string
	}{
		{"linear then narrow", SweepPlan{From: 10, To: 50, Step: 5, Narrow: 2}, 27,
			"10 15 20 25 30 27.5 26.2", 26.2, false, "narrowed to between 26.2/s (held) and 27.5/s (failed)"},
		{"doubling", SweepPlan{From: 1, To: 100, Narrow: 1}, 20,
			"1 2 4 8 16 32 24", 16, false, "narrowed"},
		{"up to --to, overshooting step", SweepPlan{From: 10, To: 22, Step: 5, Narrow: 2}, 100,
			"10 15 20 22", 22, true, "capacity is at least that"},
		{"first step fails", SweepPlan{From: 10, To: 50, Step: 5, Narrow: 2}, 5,
			"10", 0, false, "the first step, 10/s, already failed"},
		{"no narrowing", SweepPlan{From: 10, To: 50, Step: 10}, 35,
			"10 20 30 40", 30, false, "narrowed to between 30/s (held) and 40/s (failed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSearch(tt.plan)
			if err != nil {
				t.Fatal(err)
			}
			var steps []string
			for i := 0; i < 100; i++ {
				r, ok := s.Next()
				if !ok {
					break
				}
				steps = append(steps, fmt.Sprint(r))
				s.Record(r, r <= tt.capacity)
			}
			found, ok, atLeast, why := s.Result()
			if strings.Join(steps, " ") != tt.steps || found != tt.found || ok != (tt.found > 0) || atLeast != tt.atLeast || !strings.Contains(why, tt.why) {
				t.Errorf("steps %v found %g (%v, at least %v) why %q; want %s, %g, at least %v, %q", steps, found, ok, atLeast, why, tt.steps, tt.found, tt.atLeast, tt.why)
			}
			if n := len(steps); n > tt.plan.MaxSteps() {
				t.Errorf("%d steps, more than MaxSteps %d", n, tt.plan.MaxSteps())
			}
		})
	}
}

func TestSweepPlanValidate(t *testing.T) {
	tests := []struct {
		plan SweepPlan
		err  string
	}{
		{SweepPlan{From: 0, To: 10}, "--from must be a positive rate"},
		{SweepPlan{From: 10, To: 5}, "--to must be at least --from (10/s); got 5/s"},
		{SweepPlan{From: 1, To: 5, Step: -1}, "--step must be a positive rate"},
		{SweepPlan{From: 1, To: 5, Narrow: -1}, "--narrow must be 0 or more"},
		{SweepPlan{From: 1, To: 5000, Step: 1}, "more than 1000 steps"},
	}
	for _, tt := range tests {
		err := tt.plan.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.err) || tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("%+v: %v, want EINVALID %q", tt.plan, err, tt.err)
		}
		// The field by name, for a plan to word as its key.
		if e, ok := errors.AsType[*tare.SettingError](err); !ok || e.Field == "" || !strings.HasPrefix(err.Error(), "--"+e.Field+" ") {
			t.Errorf("%+v: %v, want a tare.SettingError naming the field it starts with", tt.plan, err)
		}
	}
	if err := (SweepPlan{From: 1, To: 1}).Validate(); err != nil {
		t.Errorf("a one-step plan: %v", err)
	}
	if got := (SweepPlan{From: 1, To: 1}).raising(); !slices.Equal(got, []float64{1}) {
		t.Errorf("raising of a one-step plan: %v", got)
	}
}

func eqPtr(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *float64) any {
	if p == nil {
		return "nil"
	}
	return *p
}
