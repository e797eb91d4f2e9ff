package report

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tare-dev/tare"
)

// Runs writes a table of stored runs, one a line, with the figures of
// each one's summary that summary finds (a dash where it has none).
func Runs(w io.Writer, runs []tare.Run, summary func(id string) (tare.Summary, error)) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no stored runs match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tLABEL\tWINDOW\tSTATUS\tREQUESTS\tP95\tVERDICT\tTARGET")
	for _, r := range runs {
		requests, p95, level := "-", "-", "-"
		if s, err := summary(r.ID); err == nil {
			requests = fmt.Sprint(s.Requests.Total)
			if s.Latency.P95 != nil {
				p95 = fmt.Sprintf("%.1fms", *s.Latency.P95)
			}
			if s.Verdict.Level != "" {
				level = string(s.Verdict.Level)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.StartedAt.Local().Format("2006-01-02 15:04"),
			cmp.Or(r.Label, "-"), cmp.Or(r.Window, "-"), r.Status, requests, p95, level, r.Target)
	}
	return tw.Flush()
}
