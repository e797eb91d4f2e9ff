package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/tare-dev/tare"
)

// CompareJSON writes c as one indented tare.compare/v1 object.
func CompareJSON(w io.Writer, c *tare.Comparison) error {
	return writeJSON(w, c, "comparison")
}

// SweepJSON writes s as one indented tare.sweep/v1 object.
func SweepJSON(w io.Writer, s *tare.Sweep) error {
	return writeJSON(w, s, "sweep")
}

func writeJSON(w io.Writer, v any, what string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s json: %w", what, err)
	}
	return nil
}

// CompareText writes a comparison for people: the runs side by side, one
// column each, their whose-CPU ledgers included, then the divergence of
// each metric and whether it counted, the statistical tests, the capacity
// range as measured, what changed between windows and the protocol
// verdict.
func CompareText(w io.Writer, c *tare.Comparison) error {
	p := &printer{w: w}
	head := fmt.Sprintf("comparison of %d runs", len(c.Runs))
	if c.Protocol != "" {
		head += "  ·  protocol " + c.Protocol
	}
	p.line("%s", head)
	p.line("")
	if p.err == nil {
		p.err = table(w, func(tw io.Writer) { runTable(tw, c.Runs) })
	}
	divergenceText(p, c)
	testsText(p, c.Tests)
	p.line("")
	capacityText(p, c.Capacity)
	if len(c.Sweeps) > 0 {
		for _, s := range c.Sweeps {
			bound := ""
			if s.AtLeast {
				bound = "at least "
			}
			p.line("  %-8s sweep of %d steps: %s%s", cmp.Or(s.Window, "-"), s.Steps, bound, perS(s.CapacityPerS))
		}
	}
	changesText(p, c.Changes)
	calendarChecksText(p, c.Calendar)

	v := c.Verdict
	p.line("")
	level := strings.ToUpper(string(v.Level))
	if v.Level == tare.Inconclusive {
		level += ": too little data"
	}
	p.line("verdict: %s", level)
	for _, w := range v.SLO {
		for _, ck := range w.Checks {
			mark := "✓"
			if !ck.Met {
				mark = "✗"
			}
			p.line("  %s slo %s in %s (measured %s)", mark, ck.Objective, w.Window, ms(ck.Value))
		}
	}
	for _, a := range v.Advice {
		p.line("  → %s", a)
	}
	for _, warn := range c.Warnings {
		p.line("  ! %s", warn)
	}
	return p.err
}

// metricMarks are the marks of a figure's divergence by its status.
var metricMarks = map[string]string{tare.MetricDiverged: " ✗", tare.MetricTooLittleData: " ?", tare.MetricBelowFloor: " ·"}

// divergenceText prints the divergence of each metric, marked by whether
// it counted, and a line for each above the threshold saying why.
func divergenceText(p *printer, c *tare.Comparison) {
	d, v := c.DivergencePct, c.Verdict
	status := map[string]tare.MetricVerdict{}
	for _, m := range v.Metrics {
		status[m.Metric] = m
	}
	p.line("")
	p.line("divergence  |a − b| / min(a, b) of the two runs furthest apart; threshold %g%%, counted beyond noise and above the latency floor (%s)",
		v.ThresholdPct, ms(&v.LatencyFloorMS))
	var parts []string
	marked := false
	for _, m := range []struct {
		name string
		v    *float64
	}{{"avg", d.Avg}, {"p50", d.P50}, {"p95", d.P95}, {"p99", d.P99}, {"throughput", d.Throughput}} {
		mark := metricMarks[status[m.name].Status]
		if len(v.Metrics) == 0 && m.v != nil && *m.v > v.ThresholdPct {
			mark = " ✗" // a comparison judged before figures had statuses
		}
		marked = marked || mark != ""
		parts = append(parts, fmt.Sprintf("%s %s%s", m.name, pct(m.v), mark))
	}
	p.line("  %s", strings.Join(parts, "   "))
	if marked {
		p.line("  (✗ counts: the host is the variable; ? too little data to tell; · within the latency floor)")
	}
	for _, m := range v.Metrics {
		if m.Status == tare.MetricWithin || m.A == "" {
			continue
		}
		p.line("  %-4s %s against %s: %s", m.Metric, m.A, m.B, m.Detail)
	}
}

// testsText prints the tests between every two windows: on their
// requests, then on their ticks.
func testsText(p *printer, tests []tare.WindowTest) {
	if len(tests) == 0 {
		return
	}
	p.line("")
	p.line("tests  every request's latency: Mann-Whitney U, and each figure's ratio A / B with its interval;")
	p.line("       per-tick p95: Mann-Whitney U, and a bootstrap interval of the difference of median tick p95")
	for _, t := range tests {
		p.line("  %s vs %s", t.A, t.B)
		if r := t.Requests; r != nil {
			mw := ""
			if r.PValue != nil {
				mw = fmt.Sprintf("  U %.1f  z %.2f  p %s  a request of %s slower than one of %s %s of the time",
					*r.U, *r.Z, pValue(*r.PValue), t.A, t.B, pct(r.SlowerPct))
			}
			p.line("    requests %d / %d%s", r.RequestsA, r.RequestsB, mw)
			var ratios []string
			for _, m := range r.Metrics {
				mark := ""
				if m.Significant {
					mark = " *"
				}
				ratios = append(ratios, fmt.Sprintf("%s %s (%s … %s)%s", m.Metric, times(m.Ratio), times(m.RatioLow), times(m.RatioHigh), mark))
			}
			p.line("    ratio at %g%% each (%g%% together; * excludes ×1): %s", r.ConfidencePct, r.FamilyConfidencePct, strings.Join(ratios, "   "))
		}
		if t.PValue == nil {
			p.line("    ticks %d / %d  no test", t.TicksA, t.TicksB)
		} else {
			ci := ""
			if t.DiffMS != nil {
				ci = fmt.Sprintf("  difference %s, %g%% interval %s … %s", signedMS(t.DiffMS), t.ConfidencePct, signedMS(t.CILowMS), signedMS(t.CIHighMS))
			}
			p.line("    ticks %d / %d  U %.1f  z %.2f  p %s%s", t.TicksA, t.TicksB, *t.U, *t.Z, pValue(*t.PValue), ci)
		}
		if t.Warning != "" {
			p.line("    ! %s", t.Warning)
		}
	}
}

// changesText prints what differed in each window's ledger.
func changesText(p *printer, changes []tare.WindowChange) {
	if len(changes) == 0 {
		return
	}
	p.line("")
	p.line("what changed  each window's whose-CPU ledger against %s, the quietest measured", changes[0].Against)
	for _, ch := range changes {
		if len(ch.Items) == 0 {
			p.line("  %s: nothing in the ledger differed from %s", ch.Window, ch.Against)
			continue
		}
		p.line("  %s:", ch.Window)
		for _, it := range ch.Items {
			p.line("    · %s", it.Detail)
		}
	}
}

// table writes what fill prints through a tabwriter, with the padding
// at the end of each line trimmed.
func table(w io.Writer, fill func(tw io.Writer)) error {
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
	fill(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimSuffix(l, "\n"), " ")
		if strings.HasSuffix(l, "\n") {
			lines[i] += "\n"
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}

// runTable prints the runs side by side: a column per run, a row per
// figure.
func runTable(tw io.Writer, runs []tare.ComparedRun) {
	ids := shortIDs(runs)
	row := func(name string, cell func(r *tare.ComparedRun) string) {
		cells := []string{"  " + name}
		for i := range runs {
			cells = append(cells, cell(&runs[i]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	n := 0
	row("", func(r *tare.ComparedRun) string {
		n++
		return cmp.Or(r.Window, r.Label, fmt.Sprintf("run %d", n))
	})
	row("run", func(r *tare.ComparedRun) string {
		if r.Source != "" && r.Source != "store" {
			return filepath.Base(r.Source)
		}
		return cmp.Or(ids[r.ID], "-")
	})
	row("started", func(r *tare.ComparedRun) string {
		if r.StartedAt.IsZero() {
			return "-"
		}
		return r.StartedAt.Format("2006-01-02 15:04")
	})
	row("requests", func(r *tare.ComparedRun) string { return fmt.Sprint(r.Requests) })
	row("avg", func(r *tare.ComparedRun) string { return ms(r.Latency.Avg) })
	row("p50", func(r *tare.ComparedRun) string { return ms(r.Latency.P50) })
	row("p95", func(r *tare.ComparedRun) string { return ms(r.Latency.P95) })
	row("p99", func(r *tare.ComparedRun) string { return ms(r.Latency.P99) })
	row("achieved", func(r *tare.ComparedRun) string { return rate(r.AchievedPerS) })
	row("tokens/s", func(r *tare.ComparedRun) string { return num(r.TokensPerS) })
	row("cpu busy", func(r *tare.ComparedRun) string { return pct(r.CPUBusyPct) })
	row("steal", func(r *tare.ComparedRun) string {
		return fmt.Sprintf("mean %s max %s", pct(r.Steal.Mean), pct(r.Steal.Max))
	})
	row("verdict", func(r *tare.ComparedRun) string { return cmp.Or(string(r.Verdict), "-") })
	row("send lag p99", func(r *tare.ComparedRun) string { return ms(r.SendLag.P99) })
	row("neighbours", func(r *tare.ComparedRun) string {
		if r.CPUBy == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.0f%% of a CPU", r.CPUBy.Neighbours()*float64(max(r.VCPUs, 1)))
	})
	row("busiest other", func(r *tare.ComparedRun) string {
		if r.CPUBy == nil || len(r.CPUBy.TopOthers) == 0 {
			return "-"
		}
		top := r.CPUBy.TopOthers[0]
		return fmt.Sprintf("%s %.0f%%", top.Name, top.CPUPct*float64(max(r.VCPUs, 1)))
	})
	row("waited behind", func(r *tare.ComparedRun) string { return pct(r.NeighbourWaitPct) })
	row("cpu/request", func(r *tare.ComparedRun) string { return ms(r.SUTCPUPerRequestMS) })
}

// shortIDs shortens run ids to a prefix that tells the compared runs
// apart, as tare runs accepts: at least the 13 characters of a UUIDv7's
// millisecond timestamp.
func shortIDs(runs []tare.ComparedRun) map[string]string {
	n := 13
	for unique := false; !unique; n++ {
		seen := map[string]bool{}
		unique = true
		for _, r := range runs {
			p := r.ID[:min(n, len(r.ID))]
			if seen[p] && p != r.ID {
				unique = false
			}
			seen[p] = true
		}
		if unique {
			break
		}
	}
	out := map[string]string{}
	for _, r := range runs {
		out[r.ID] = r.ID[:min(n, len(r.ID))]
	}
	return out
}

func capacityText(p *printer, r tare.CapacityRange) {
	what, better := "p95 at the load run", "lower is better"
	format := ms
	if r.Metric == "rate_per_s" {
		what, better, format = "highest sustainable rate", "higher is better", perS
	}
	from := "the windows"
	if r.From == "runs" {
		from = "the runs, which carry no window"
	}
	p.line("capacity  %s, %s; best, worst and typical as measured in %s", what, better, from)
	end := func(v *float64, window string) string {
		if v == nil {
			return "n/a"
		}
		return fmt.Sprintf("%s (%s)", format(v), window)
	}
	p.line("  best %s   worst %s   typical %s", end(r.Best, r.BestWindow), end(r.Worst, r.WorstWindow), end(r.Typical, r.TypicalWindow))
	if r.Gap != nil {
		p.line("  gap %s (%s): the cost of shared infrastructure", format(r.Gap), pct(r.GapPct))
	}
	for _, m := range r.Metrics {
		if m.Metric == r.Metric {
			continue
		}
		p.line("  %-4s best %s   worst %s   typical %s", strings.TrimSuffix(m.Metric, "_ms"),
			end(m.Best, m.BestWindow), end(m.Worst, m.WorstWindow), end(m.Typical, m.TypicalWindow))
	}
	for _, f := range r.Findings {
		p.line("  ! %s", f)
	}
}

// SweepStep is the line of a sweep's step n, as the search goes.
func SweepStep(n int, step tare.SweepStep) string {
	why := ""
	if len(step.Reasons) > 0 {
		why = ": " + strings.Join(step.Reasons, "; ")
	}
	return fmt.Sprintf("step %d  %s  achieved %s  p95 %s  verdict %s  %s%s", n, perS(&step.OfferedPerS),
		rate(step.AchievedPerS), ms(step.P95MS), step.Verdict, step.Status, why)
}

// SweepText writes a sweep for people: each step with its outcome, then
// the capacity found.
func SweepText(w io.Writer, s *tare.Sweep) error {
	p := &printer{w: w}
	head := []string{"sweep", s.Target}
	if s.SLO != "" {
		head = append(head, "slo "+s.SLO)
	}
	if s.Window != "" {
		head = append(head, "window "+s.Window)
	}
	p.line("%s", strings.Join(head, "  ·  "))
	p.line("")
	if p.err == nil {
		p.err = table(w, func(tw io.Writer) {
			fmt.Fprintln(tw, "  STEP\tOFFERED\tACHIEVED\tP95\tVERDICT\tSTATUS\tWHY")
			for i, st := range s.Steps {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, perS(&st.OfferedPerS), perS(st.AchievedPerS), ms(st.P95MS),
					verdictText(st), st.Status, strings.Join(st.Reasons, "; "))
			}
		})
	}
	p.line("")
	switch {
	case s.CapacityPerS == nil:
		p.line("capacity: none found")
	case s.AtLeast:
		p.line("capacity: at least %s", perS(s.CapacityPerS))
	default:
		p.line("capacity: %s   the highest rate that held the SLO without saturating", perS(s.CapacityPerS))
	}
	if s.Stopped != "" {
		p.line("  stopped: %s", s.Stopped)
	}
	for _, warn := range s.Warnings {
		p.line("  ! %s", warn)
	}
	return p.err
}

// verdictText is a step's verdict with the signals that fired.
func verdictText(st tare.SweepStep) string {
	v := cmp.Or(string(st.Verdict), "-")
	if len(st.Fired) > 0 {
		v += " (" + strings.Join(st.Fired, ", ") + ")"
	}
	return v
}

// perS formats a rate per second to a tenth.
func perS(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", *v), ".0") + "/s"
}

func signedMS(v *float64) string {
	if v == nil {
		return "n/a"
	}
	if *v < 0 {
		return "−" + ms(tare.Float(-*v))
	}
	return "+" + ms(v)
}

// times formats a ratio as ×1.35.
func times(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("×%.3g", *v)
}

func pValue(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}
