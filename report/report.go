// Package report renders runs for people and machines: the human text
// summary with its verdict block and sparklines, the tare.summary/v1 JSON,
// comparisons (tare.compare/v1) and capacity sweeps (tare.sweep/v1) as text
// and JSON, raw-record exports, and a self-contained HTML report with charts
// (and its main chart as a PNG).
//
// The charts are drawn here, server-side, with gonum.org/v1/plot: inline
// SVG in the page, PNG through vgimg, the same drawing code for both. The
// page needs no script and no font from the web, and a long run stays
// light: each series is folded into at most 500 buckets, each kept at its
// lowest and highest value, so no spike is lost.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tare-dev/tare"
)

// JSON writes s as one indented tare.summary/v1 object.
func JSON(w io.Writer, s *tare.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("write summary json: %w", err)
	}
	return nil
}

// Text writes the human summary of a run, ending with its verdict. Given
// the run's ticks, it also draws sparklines of the per-tick p95 and steal,
// so latency climbing where steal climbs shows in a terminal too.
func Text(w io.Writer, s *tare.Summary, ticks ...tare.Tick) error {
	p := &printer{w: w}
	r := s.Run
	head := []string{r.Target}
	if r.Arrival != "" {
		head = append(head, r.Arrival)
	}
	if r.Label != "" {
		head = append(head, "label "+r.Label)
	}
	if r.Window != "" {
		head = append(head, "window "+r.Window)
	}
	head = append(head, string(r.Status))
	p.line("%s", strings.Join(head, "  ·  "))
	if !r.StartedAt.IsZero() {
		p.line("  %s → %s (%s)%s", r.StartedAt.Format("2006-01-02 15:04:05"), r.EndedAt.Format("15:04:05"),
			r.EndedAt.Sub(r.StartedAt).Round(100_000_000), idSuffix(r.ID))
	}
	p.line("")

	// A window with no load of tare's own (tare check, tare watch) has
	// only host figures.
	if s.Requests.Total > 0 || s.Latency.P50 != nil {
		q := s.Requests
		p.row("requests", "%d total   %d ok   %d errors   %d dropped%s", q.Total, q.OK, q.Errors, q.Dropped, counts("errors: ", s.ErrorKinds))
		if len(s.StatusCodes) > 0 {
			p.row("", "(status: %s%s)", tally(s.StatusCodes, ", "), failedAfterStatus(s, "; ", ", "))
		}
		for _, kind := range tare.ByCount(s.ErrorKinds) {
			if msg := s.ErrorMessages[kind]; msg != "" {
				p.row("", "%s: %s", kind, msg)
			}
		}
		if q.Redirects > 0 {
			p.row("redirects", "%s", redirectsFollowed(q))
		}
		p.row("rate", "offered %s   achieved %s", rate(s.Rate.Offered), rate(s.Rate.Achieved))
		l := s.Latency
		p.row("latency", "avg %s  p50 %s  p90 %s  p95 %s  p99 %s  max %s   (from the scheduled time)",
			ms(l.Avg), ms(l.P50), ms(l.P90), ms(l.P95), ms(l.P99), ms(l.Max))
		sv, from := s.Service, "from the actual send: what a closed-loop tool reports"
		if s.Queue != nil {
			from = "worker start → done: the worker's own time"
		}
		p.row("service", "p50 %s  p95 %s  p99 %s  max %s   (%s)",
			ms(sv.P50), ms(sv.P95), ms(sv.P99), ms(sv.Max), from)
		p.row("send lag", "p50 %s  p99 %s  max %s", ms(s.SendLag.P50), ms(s.SendLag.P99), ms(s.SendLag.Max))
		if b := s.TTFB; b != nil {
			p.row("ttfb", "p50 %s  p95 %s  p99 %s  max %s   (the first response byte, from the actual send)", ms(b.P50), ms(b.P95), ms(b.P99), ms(b.Max))
		}
		if q := s.Queue; q != nil {
			p.row("queue wait", "avg %s  p50 %s  p95 %s  p99 %s", ms(q.Wait.Avg), ms(q.Wait.P50), ms(q.Wait.P95), ms(q.Wait.P99))
			p.row("queue depth", "mean %s  max %s", num(q.Depth.Mean), num(q.Depth.Max))
			queueRows(p, q)
		}
		if m := s.Model; m != nil {
			p.row("ttft", "p50 %s  p95 %s  p99 %s  max %s", ms(m.TTFT.P50), ms(m.TTFT.P95), ms(m.TTFT.P99), ms(m.TTFT.Max))
			p.row("tpot", "p50 %s  p95 %s  p99 %s  max %s", ms(m.TPOT.P50), ms(m.TPOT.P95), ms(m.TPOT.P99), ms(m.TPOT.Max))
			p.row("tokens", "%d output   %s tokens/s", m.OutputTokens, num(m.TokensPerS))
			if m.InputTokens != nil {
				p.row("", "%d input    %s tokens/s   (prompt tokens from the %s)", *m.InputTokens, num(m.InputTokensPerS), inputSource(m.InputTokenSource))
			}
			classRows(p, m)
			if c := promptCountText(m.PromptCount); c != "" {
				p.row("", "%s", c)
			}
			if sv := m.Server; sv != nil {
				p.row("server", "%s", serverText(sv, "   "))
			}
		}
		if g := s.Goodput; g != nil {
			p.row("goodput", "%d met %s (%s of requests sent)   %s tokens/s", g.Met, g.SLO, pct(g.AttainmentPct), num(g.TokensPerS))
		}
		mixRows(p, s)
	}
	load := s.Requests.Total > 0 || s.Latency.P50 != nil
	if len(s.Shards) == 0 {
		hostRows(p, "", "this host", load, s.Generator, s.Host, s.SUT, s.Env.VCPUs, s.Requests.Total > 0)
		blameRows(p, s)
	}
	// A merged run's host figures are each shard's own: its host's.
	for _, sh := range s.Shards {
		fired := ""
		if len(sh.Fired) > 0 {
			fired = " (" + strings.Join(sh.Fired, ", ") + ")"
		}
		p.row("shard "+sh.Shard, "on %s: %d requests, %s   verdict %s%s", orQuestion(sh.Hostname), sh.Requests, sh.Arrival, strings.ToUpper(string(sh.Level)), fired)
		hostRows(p, " ", "host "+orQuestion(sh.Hostname), true, sh.Generator, sh.Host, sh.SUT, sh.VCPUs, sh.Requests > 0)
	}
	if c := s.CleanLatency; c != nil && s.Requests.Total > 0 {
		if c.By == tare.CleanByRequests {
			p.row("code's own", "p50 %s  p95 %s  p99 %s   (%d requests that overlapped no outside wait)", ms(c.P50), ms(c.P95), ms(c.P99), c.Requests)
		} else {
			p.row("clean ticks", "p50 %s  p95 %s  p99 %s   (%d requests that lived entirely in clean ticks)", ms(c.P50), ms(c.P95), ms(c.P99), c.Requests)
		}
	}
	if t := s.Tail; t != nil && len(t.Slowest) > 0 {
		p.row("tail", "%s", t.Sentence(t.Slowest[0]))
	}
	if p95, steal := sparkRows(s, ticks); p95 != "" || steal != "" {
		if p95 != "" {
			p.row("p95/tick", "%s", p95)
		}
		if steal != "" {
			p.row("steal/tick", "%s", steal)
		}
	}
	if m := s.Model; m != nil && m.Server != nil && s.Queue == nil {
		if w := waitingSpark(ticks); w != "" {
			p.row("waiting/tick", "%s   (the server's queue)", w)
		}
	}
	p.line("")
	Verdict(p.w, s.Verdict)
	return p.err
}

// hostRows are one host's rows, their names indented by indent: tare's
// generator there (when it sent load), the host's interference, whose CPU
// it was, and the system under test tare found on it (where, for a run
// that sent requests, saying so when it found none).
func hostRows(p *printer, indent, where string, load bool, g tare.Generator, h tare.HostSummary, sut *tare.SUTSummary, vcpus int, requests bool) {
	if load {
		p.row(indent+"generator", "cpu %s of a core   run delay %s%s", pct(g.CPUPct), pct(g.RunDelayPct), engineText(g, "   "))
		if c := connectionsText(g, "   "); c != "" {
			p.row(indent+"connections", "%s", c)
		}
	}
	p.row(indent+"host", "cpu busy %s   steal mean %s  max %s  worst cpu %s   polluted ticks %s of %d",
		pct(h.CPUBusyPct), pct(h.Steal.Mean), pct(h.Steal.Max), pct(h.Steal.MaxCPU), pct(h.PollutedTicksPct), h.Ticks)
	p.row("", "psi some %s   throttled %s   run delay %s   behind neighbours %s", pct(h.PSISomePct), pct(h.ThrottledPct), pct(h.RunDelayPct), pct(h.NeighbourWaitPct))
	if by := h.CPUBy; by != nil {
		p.row(indent+"whose cpu", "%s", WhoseCPU(by, vcpus))
	}
	if u := sut; u != nil {
		calls := ""
		if len(u.Calls) > 0 && len(u.Graph) < 2 {
			calls = fmt.Sprintf(", with pid %s it calls", joinInts(u.Calls))
		}
		if len(u.Graph) == 1 && u.Graph[0].Container != nil && !strings.Contains(u.FoundBy, u.Graph[0].Container.String()) {
			calls += ", in " + u.Graph[0].Container.String()
		}
		p.row(indent+"under test", "pid %s (%s%s)   cpu %s of a core   run delay %s", joinInts(u.PIDs), u.FoundBy, calls, pct(u.CPUPct), pct(u.RunDelayPct))
		graphRows(p, u.Graph)
	} else if requests {
		p.row(indent+"under test", "not found on %s (--pid or --cgroup name it)", where)
	}
}

func orQuestion(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// graphRows draw the system under test's process graph, a row a node
// (what it called indented under an arrow), when it is more than the
// processes found first.
func graphRows(p *printer, graph []tare.SUTNode) {
	if len(graph) < 2 {
		return
	}
	names := make([]string, len(graph))
	width := 0
	for i, n := range graph {
		names[i] = fmt.Sprintf("%s (%d)", n.Name, len(n.PIDs))
		if n.From != nil {
			names[i] = "→ " + names[i]
		}
		width = max(width, utf8.RuneCountInString(names[i]))
	}
	for i, n := range graph {
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(names[i]))
		in := ""
		if n.Container != nil && !strings.Contains(n.ReachedBy, n.Container.String()) {
			in = "   in " + n.Container.String()
		}
		p.row("", "%s%s   cpu %s of a core   run delay %s   %s%s", names[i], pad, pct(n.CPUPct), pct(n.RunDelayPct), n.ReachedBy, in)
	}
}

// mixRows are the breakdowns of a run that mixed requests or ramped: the
// warm-up left out, a row per target and a row per stage.
func mixRows(p *printer, s *tare.Summary) {
	if w := s.Warmup; w != nil {
		p.row("warm-up", "%d arrivals of the first %s sent, left out of every figure and of the verdict", w.Requests, fmtSeconds(w.DurationS))
	}
	for i, t := range s.Targets {
		name := ""
		if i == 0 {
			name = "targets"
		}
		p.row(name, "%-28s %6d sent  %d ok  %d errors  %d dropped   p50 %s  p95 %s  p99 %s", t.Name, t.Requests, t.OK, t.Errors, t.Dropped,
			ms(t.Latency.P50), ms(t.Latency.P95), ms(t.Latency.P99))
	}
	for i, st := range s.Stages {
		name := ""
		if i == 0 {
			name = "stages"
		}
		p.row(name, "%s–%s  %s → %s   offered %s  achieved %s   p50 %s  p95 %s  p99 %s   %s",
			fmtSeconds(st.StartS), fmtSeconds(st.StartS+st.DurationS), rate(&st.FromPerS), rate(&st.TargetPerS), rate(st.OfferedPerS), rate(st.AchievedPerS),
			ms(st.Latency.P50), ms(st.Latency.P95), ms(st.Latency.P99), strings.ToUpper(string(st.Verdict)))
	}
}

// inputSource says where the prompt tokens were counted.
func inputSource(s string) string {
	if s == "worker" {
		return "workers' model usage"
	}
	return "server's usage"
}

// fmtSeconds prints seconds as a duration: 90 is 1m30s.
func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// queueRows are what the generator saw of the queue besides the results,
// when it was measured: redeliveries, results that matched no job, the
// oldest pending job, the workers.
func queueRows(p *printer, q *tare.QueueSummary) {
	if q.Redelivered != nil {
		p.row("queue jobs", "%d redelivered   results: %d duplicate  %d unknown  %d late", *q.Redelivered,
			deref(q.DuplicateResults), deref(q.UnknownResults), deref(q.LateResults))
	}
	if o := q.OldestPending; o != nil {
		p.row("pending", "oldest max %s  at the end %s   (the age of the oldest job a worker holds: a dead worker's grows here)", ms(o.Max), ms(o.End))
	}
	if w := q.Workers; w != nil {
		lost := ""
		switch {
		case w.Lost > 0 && w.End == 0:
			lost = "   ALL GONE before the end"
		case w.Lost > 0:
			lost = fmt.Sprintf("   all gone %d× during the run", w.Lost)
		}
		p.row("workers", "%d at most  %d at the end%s", w.Max, w.End, lost)
	}
}

func deref(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// Verdict writes the verdict block: the level, each fired signal in one
// line, the SLO checks, the advice and the warnings.
func Verdict(w io.Writer, v tare.Verdict) error {
	p := &printer{w: w}
	p.line("verdict: %s", strings.ToUpper(string(v.Level)))
	for _, sig := range v.Signals {
		switch {
		case sig.Fired && sig.Finding:
			// About the code, not against the measurement.
			p.line("  ▲ %s: %s", sig.Name, sig.Detail)
		case sig.Fired:
			p.line("  ✗ %s: %s", sig.Name, sig.Detail)
		}
	}
	for _, c := range v.SLO {
		mark := "✓"
		if !c.Met {
			mark = "✗"
		}
		p.line("  %s slo %s (measured %s)", mark, c.Objective, ms(c.Value))
	}
	if v.Attribution != "" {
		p.line("  ≈ %s", v.Attribution)
	}
	for _, a := range v.Advice {
		p.line("  → %s", a)
	}
	for _, warn := range v.Warnings {
		p.line("  ! %s", warn)
	}
	return p.err
}

// WhoseCPU is the ledger in one line: each owner's share of the host's CPU
// time, and the busiest other process in shares of one CPU.
func WhoseCPU(by *tare.CPUBy, vcpus int) string {
	line := fmt.Sprintf("under test %.1f%%  tare %.1f%%  others %.1f%%  kernel %.1f%%  unattributed %.1f%%  steal %.1f%%  idle %.1f%%",
		by.SystemUnderTest, by.Tare, by.Others, by.Kernel, by.Unattributed, by.Steal, by.Idle)
	if len(by.TopOthers) > 0 && by.TopOthers[0].CPUPct*float64(max(vcpus, 1)) >= 0.5 {
		top := by.TopOthers[0]
		who := fmt.Sprintf("%s (pid %d)", top.Name, top.PID)
		if top.Container != nil || len(top.PIDs) > 1 {
			who = top.Who()
		}
		line += fmt.Sprintf("   top other: %s %.0f%% of a CPU", who, top.CPUPct*float64(max(vcpus, 1)))
	}
	return line
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

type printer struct {
	w   io.Writer
	err error // the first write error; later writes are skipped
}

func (p *printer) line(format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) row(name, format string, args ...any) {
	p.line("  %-12s "+format, append([]any{name}, args...)...)
}

func idSuffix(id string) string {
	if id == "" {
		return ""
	}
	return "  run " + id
}

// ms formats milliseconds with three significant figures, switching to
// seconds at one second; "n/a" when not measured.
func ms(v *float64) string {
	switch {
	case v == nil:
		return "n/a"
	case *v >= 1000:
		return fmt.Sprintf("%.3gs", *v/1000)
	case *v >= 100:
		return fmt.Sprintf("%.0fms", *v)
	case *v >= 10:
		return fmt.Sprintf("%.1fms", *v)
	default:
		return fmt.Sprintf("%.2fms", *v)
	}
}

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", *v)
}

func rate(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f/s", *v)
}

func num(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *v)
}

// counts formats a tally as "  (prefix a 3, b 1)", largest first.
// promptCountText says in how many requests the server's count of the
// prompt and tare's disagreed beyond the margin; "" when none did.
func promptCountText(c *tare.TokenCount) string {
	if c == nil || c.Disagreed == 0 {
		return ""
	}
	return fmt.Sprintf("the server's count of the prompt and tare's (its words) differ by more than %g%% and %d tokens in %d of %d requests (%s): %s tokens a word; every per-token figure uses the server's",
		c.MarginPct, c.MarginTokens, c.Disagreed, c.Compared, pct(c.DisagreedPct), num(c.TokensPerWord))
}

// serverText is what a model server said of itself during the run, the
// parts joined by sep: "waiting mean 2.4 max 6   running mean 4 max 4
// kv cache mean 31% max 50%   preemptions 0   (vllm metrics, 40 reads of
// http://127.0.0.1:8000/metrics)".
func serverText(sv *tare.ModelServer, sep string) string {
	parts := []string{
		fmt.Sprintf("waiting mean %s max %s", num(sv.Waiting.Mean), num(sv.Waiting.Max)),
		fmt.Sprintf("running mean %s max %s", num(sv.Running.Mean), num(sv.Running.Max)),
		fmt.Sprintf("kv cache mean %s max %s", pct(sv.KVCachePct.Mean), pct(sv.KVCachePct.Max)),
	}
	pre := "n/a"
	if sv.Preemptions != nil {
		pre = fmt.Sprint(*sv.Preemptions)
	}
	parts = append(parts, "preemptions "+pre)
	reads := fmt.Sprintf("(%s metrics, %d reads of %s", orQuestion(sv.Server), sv.Readings, sv.MetricsURL)
	if sv.Failed > 0 {
		reads += fmt.Sprintf(", %d failed", sv.Failed)
	}
	return strings.Join(parts, sep) + sep + reads + ")"
}

// failedAfterStatus says which of the requests the status codes count
// as a success failed after that status (a stream that began, then timed
// out or broke off): "failed after their status: 200 then timeout 5",
// after lead; "" when none did.
func failedAfterStatus(s *tare.Summary, lead, sep string) string {
	if len(s.FailedAfterStatus) == 0 {
		return ""
	}
	m := make(map[string]int, len(s.FailedAfterStatus))
	for k, n := range s.FailedAfterStatus {
		m[strings.Replace(k, " ", " then ", 1)] = n
	}
	return lead + "failed after their status: " + tally(m, sep)
}

func counts(prefix string, m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return "  (" + prefix + tally(m, ", ") + ")"
}

// connectionsText says what the run did with its connections, the parts
// joined by sep: "2 open at most (limit 2)   opened 2   reused 998
// closed 0   waited 412   in use per tick 1–2"; "" when the summary
// does not say.
func connectionsText(g tare.Generator, sep string) string {
	u := g.ConnectionUse
	if u == nil {
		return ""
	}
	limit := "no limit"
	if u.Limit != nil {
		limit = fmt.Sprintf("limit %d", *u.Limit)
	}
	parts := []string{fmt.Sprintf("%d open at most (%s)", g.Connections, limit),
		fmt.Sprintf("opened %d", u.Opened), fmt.Sprintf("reused %d", u.Reused), fmt.Sprintf("closed %d", u.Closed)}
	if u.Waited != nil {
		parts = append(parts, fmt.Sprintf("waited %d", *u.Waited))
	}
	if len(u.InUsePerTick) > 0 {
		lo, hi := slices.Min(u.InUsePerTick), slices.Max(u.InUsePerTick)
		if lo == hi {
			parts = append(parts, fmt.Sprintf("in use per tick %d", lo))
		} else {
			parts = append(parts, fmt.Sprintf("in use per tick %d–%d", lo, hi))
		}
	}
	return strings.Join(parts, sep)
}

// engineText says what sent the load, after sep: "event loop ×2, 12
// connections at most" or "goroutines", and what HTTP/2's connections
// spoke ("connections h2 4"); "" when the summary does not say.
func engineText(g tare.Generator, sep string) string {
	protocols := ""
	if len(g.Protocols) > 0 {
		protocols = sep + "connections " + tally(g.Protocols, ", ")
	}
	switch {
	case g.Engine == "":
		return protocols
	case g.Engines > 0:
		return fmt.Sprintf("%s%s ×%d, %d connections at most%s", sep, g.Engine, g.Engines, g.Connections, protocols)
	}
	return sep + g.Engine + protocols
}
