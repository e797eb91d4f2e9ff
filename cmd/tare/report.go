package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/stats"
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
per tick with steal, throttling and run delay shaded on the same time axis,
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
its tables and percentiles are drawn.`,
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
			src := &sources{runSource{sf: &sf}}
			defer src.close()
			var runs []*report.Run
			for _, arg := range args {
				rs, err := src.load(cmd.Context(), arg)
				if err != nil {
					return err
				}
				runs = append(runs, rs...)
			}
			if chart != "" && !slices.ContainsFunc(runs, func(r *report.Run) bool { return len(r.Ticks) > 0 }) {
				return tare.Errorf(tare.EINVALID, "--png: nothing to draw: the runs have no timeline (a summary JSON file has none; give a run id or exported records)")
			}
			page := report.Page{Title: title, Runs: runs, Generated: time.Now(), Version: version}
			if len(runs) > 1 {
				// Several runs are windows to compare: divergence, verdict,
				// capacity range, as tare compare judges them.
				inputs := make([]stats.CompareInput, len(runs))
				for i, r := range runs {
					inputs[i] = stats.CompareInput{Summary: r.Summary, Ticks: r.Ticks, Source: "store"}
				}
				c := session.Compare(inputs, nil, judge.ProtocolRules{DivergencePct: judge.DefaultDivergencePct})
				page.Comparison = report.ComparisonOf(c, runs)
			}
			size, err := writeOutput(output, cmd.OutOrStdout(), "-o", func(w io.Writer) error { return report.HTML(w, page) })
			if err != nil {
				return err
			}
			if output != "-" {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s, %s): open it in any browser, offline\n", output, fmt.Sprintf("%d %s", len(runs), plural(len(runs), "run", "runs")), kilobytes(size))
			}
			if chart != "" {
				size, err := writeOutput(chart, cmd.OutOrStdout(), "--png", func(w io.Writer) error { return report.PNG(w, runs...) })
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

// sources loads the runs a report is made of, opening the store only
// when an argument is not a file.
type sources struct{ runSource }

// load returns the runs an argument names: a file, a stored run or the
// windows of a protocol.
func (s *sources) load(ctx context.Context, arg string) ([]*report.Run, error) {
	if info, err := os.Stat(arg); err == nil && info.Mode().IsRegular() {
		run, err := loadFile(arg)
		if err != nil {
			return nil, err
		}
		return []*report.Run{run}, nil
	}
	if strings.ContainsRune(arg, filepath.Separator) || strings.HasSuffix(arg, ".json") || strings.HasSuffix(arg, ".jsonl") {
		return nil, tare.Errorf(tare.EINVALID, "report %s: no such file", arg)
	}
	st, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	id, err := session.Resolve(ctx, st, arg)
	if err == nil {
		run, err := loadStored(ctx, st, id)
		if err != nil {
			return nil, err
		}
		return []*report.Run{run}, nil
	}
	if tare.ErrorCode(err) != tare.ENOTFOUND {
		return nil, err
	}
	windows, ferr := st.FindRuns(ctx, tare.RunFilter{Protocol: arg})
	if ferr != nil || len(windows) == 0 {
		return nil, tare.Errorf(tare.ENOTFOUND, "report %s: no stored run or protocol has that id, and there is no file by that name (tare runs list shows the runs)", arg)
	}
	var out []*report.Run
	for _, w := range slices.Backward(windows) { // oldest first: the order they ran in
		run, err := loadStored(ctx, st, w.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// loadStored reads a stored run: its summary, its ticks and, streamed, its
// raw records.
func loadStored(ctx context.Context, st tare.Store, id string) (*report.Run, error) {
	s, ticks, err := session.LoadRun(ctx, st, id)
	if err != nil {
		return nil, err
	}
	run := report.NewRun(s, ticks)
	if err := session.StreamResults(ctx, st, id, run.AddResult); err != nil {
		return nil, err
	}
	return run, nil
}

// loadFile reads a summary JSON file as it is, or raw JSONL records,
// summarised and judged here, then streamed once more into the report.
func loadFile(path string) (*report.Run, error) {
	if s, err := session.ReadSummary(path); err == nil {
		return report.NewRun(s, nil), nil
	}
	f := session.Records{Path: path, Command: "report"}
	s, ticks, err := f.Summarise(nil, nil)
	if err != nil {
		return nil, err
	}
	run := report.NewRun(s, ticks)
	if err := f.Each(run.AddResult); err != nil {
		return nil, err
	}
	return run, nil
}

// writeOutput writes through fn to the file, or to stdout for "-", and
// returns the bytes written. The file appears whole or not at all: it is
// written beside its final name and renamed into place.
func writeOutput(path string, stdout io.Writer, flag string, fn func(io.Writer) error) (int64, error) {
	if path == "-" {
		cw := &countWriter{w: stdout}
		err := fn(cw)
		return cw.n, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, tare.Errorf(tare.EINVALID, "%s %s: %w", flag, path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	cw := &countWriter{w: bufio.NewWriterSize(tmp, 256<<10)}
	err = fn(cw)
	if err == nil {
		err = cw.w.(*bufio.Writer).Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil && tare.ErrorCode(err) == tare.EINTERNAL {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func kilobytes(n int64) string {
	return fmt.Sprintf("%d KB", (n+512)/1024)
}
