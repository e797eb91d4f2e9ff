package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/atomicfile"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

func newReportCmd() *cobra.Command {
	var (
		sf            storeFlags
		output, chart string
		title         string
	)
	cmd := &cobra.Command{
		Use:   "report RUN... [-o report.html] [--png chart.png]",
		Short: "Write a self-contained HTML report with charts, for one run or several",
		Long: `Write one HTML file that shows a run the way a person would rather look at
it than read it: the verdict in words at the top, then latency p50/p95/p99
per tick with steal, throttling, CPU pressure, run delay and the wait
behind neighbours (the part of run delay the verdict judges) shaded on the
same time axis, every request's latency over time coloured by what it
overlapped (where the scheduler probe measured: no outside wait, behind
other processes, kernel threads, steal; past 20,000 requests, every one
slower than p95 and a sample of the rest), whose CPU each tick was and
whom the system under test and
tare waited behind (measured by the scheduler probe, or estimated),
arrivals and completions, work outstanding (in flight, queue depth), time
to first token and tokens/s for model runs, the latency distribution over
every request and over the clean ticks only, and the summary table.
Several runs are shown one after another, with their latency distributions
overlaid.

The file is self-contained: charts are inline SVG, there is no script and
no web font, and the page forbids itself any request, so it opens offline
and can be attached to a ticket as it is. Its data (every summary and every
point drawn) is in the page too, as JSON (schema tare.report/v1).

Each RUN is a stored run id (any unique prefix; tare runs list shows them),
a protocol id (its windows), a summary JSON file (tare run --json), or raw
JSONL records (tare runs export). A summary file has no timeline, so only
its tables and percentiles are drawn. An A/B run's id (tare ab), given
alone, draws its paired trials: each pair's B/A against 1 and the
interval, and the interference of each trial.`,
		Example: `  tare report 0193
  tare report 0193 0194 0195 -o windows.html
  tare report run.jsonl --png latency.png
  tare report peak.json offpeak.json mid.json -o -  > report.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				return tare.Errorf(tare.EINVALID, "-o must name a file, or - for stdout; got an empty name")
			}
			if output == "-" && chart == "-" {
				return tare.Errorf(tare.EINVALID, "-o and --png cannot both be stdout (-)")
			}
			src := &session.Sources{Open: sf.open}
			defer src.Close()
			page := report.Page{Title: title, Generated: time.Now(), Version: version}
			if ab, err := reportAB(cmd.Context(), &sf, args); err != nil || ab != nil {
				if err != nil {
					return err
				}
				if chart != "" {
					return tare.Errorf(tare.EINVALID, "--png draws a run's timeline: an A/B run has none of its own (give one of its trials' run ids)")
				}
				page.AB = ab
				return writeReport(cmd, output, page, "an A/B run")
			}
			var runs []*report.Run
			for _, arg := range args {
				rs, err := src.ReportRuns(cmd.Context(), arg)
				if err != nil {
					return err
				}
				runs = append(runs, rs...)
			}
			if chart != "" && !slices.ContainsFunc(runs, func(r *report.Run) bool { return len(r.Ticks) > 0 }) {
				return tare.Errorf(tare.EINVALID, "--png: nothing to draw: the runs have no timeline (a summary JSON file has none; give a run id or exported records)")
			}
			page.Runs = runs
			if len(runs) > 1 {
				// Several runs are windows to compare: divergence, verdict,
				// capacity range, as tare compare judges them.
				c := src.CompareReport(runs, judge.ProtocolRules{DivergencePct: judge.DefaultDivergencePct})
				page.Comparison = report.ComparisonOf(c, runs)
			}
			if err := writeReport(cmd, output, page, fmt.Sprintf("%d %s", len(runs), plural(len(runs), "run", "runs"))); err != nil {
				return err
			}
			if chart != "" {
				size, err := atomicfile.Write(chart, cmd.OutOrStdout(), "--png", func(w io.Writer) error { return report.PNG(w, runs...) })
				if err != nil {
					return err
				}
				if chart != "-" {
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s)\n", chart, kilobytes(size))
				}
			}
			return nil
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "report.html", "write the HTML report to this file (- for stdout)")
	cmd.Flags().StringVar(&chart, "png", "", "also write the main chart (latency with the interference band) as a PNG image to this file")
	cmd.Flags().StringVar(&title, "title", "", "the report's title (default: from the runs)")
	return cmd
}

// writeReport writes the page to output (- for stdout) and says so.
func writeReport(cmd *cobra.Command, output string, page report.Page, what string) error {
	size, err := atomicfile.Write(output, cmd.OutOrStdout(), "-o", func(w io.Writer) error { return report.HTML(w, page) })
	if err != nil {
		return err
	}
	if output != "-" {
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s, %s): open it in any browser, offline\n", output, what, kilobytes(size))
	}
	return nil
}

// reportAB is the A/B run that the only argument names, or nil when it
// names none (a run, a file): an A/B run is reported alone.
func reportAB(ctx context.Context, sf *storeFlags, args []string) (*tare.AB, error) {
	if len(args) != 1 {
		return nil, nil
	}
	if _, err := os.Stat(args[0]); err == nil {
		return nil, nil // a file
	}
	st, err := sf.open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ab, ok, err := findAB(ctx, st, args[0])
	if err != nil || !ok {
		return nil, err
	}
	return &ab, nil
}

func kilobytes(n int64) string {
	return fmt.Sprintf("%d KB", (n+512)/1024)
}
