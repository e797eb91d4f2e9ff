package report

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tare-dev/tare"
)

// Runs writes a table of stored runs, one a line, with the figures of
// each one's summary that summary finds (a dash where it has none). An
// A/B run among them (kind ab) has its figures from abs: its trials'
// requests, B against A on its deciding metric, and its result.
func Runs(w io.Writer, runs []tare.Run, abs []tare.AB, summary func(id string) (tare.Summary, error)) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no stored runs match")
		return err
	}
	byID := map[string]*tare.AB{}
	for i := range abs {
		byID[abs[i].ID] = &abs[i]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTARTED\tLABEL\tWINDOW\tSTATUS\tREQUESTS\tP95\tVERDICT\tTARGET")
	for _, r := range runs {
		kind, requests, p95, level := "run", "-", "-", "-"
		if ab, ok := byID[r.ID]; ok && r.Kind == tare.KindAB {
			kind, requests, p95, level = tare.KindAB, fmt.Sprint(abRequests(ab)), abDiff(ab), string(ab.Result)
		} else if s, err := summary(r.ID); err == nil {
			requests = fmt.Sprint(s.Requests.Total)
			if s.Latency.P95 != nil {
				p95 = fmt.Sprintf("%.1fms", *s.Latency.P95)
			}
			if s.Verdict.Level != "" {
				level = string(s.Verdict.Level)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, kind, r.StartedAt.Local().Format("2006-01-02 15:04"),
			cmp.Or(r.Label, "-"), cmp.Or(r.Window, "-"), r.Status, requests, p95, level, r.Target)
	}
	return tw.Flush()
}

// abRequests counts the requests of an A/B run's trials.
func abRequests(ab *tare.AB) int {
	n := 0
	for _, p := range ab.Pairs {
		n += p.A.Requests + p.B.Requests
	}
	return n
}

// abDiff is B against A on the A/B run's deciding metric, like
// "p99 B +8.2%", or a dash.
func abDiff(ab *tare.AB) string {
	for _, r := range ab.Ratios {
		if r.Metric == ab.On && r.DiffPct != nil {
			return fmt.Sprintf("%s B %+.1f%%", r.Metric, *r.DiffPct)
		}
	}
	return "-"
}
