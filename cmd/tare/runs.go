package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/atomicfile"
	"github.com/tare-dev/tare/records"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

func newRunsCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show, export, import and delete stored runs",
		Long: `Every run tare measures is kept, with its raw records, its per-tick timeline
and its verdict: when someone asks why the "same" test gave different
numbers, the answer is in the raw output of every window.

Runs are kept in a SQLite file by default, or in PostgreSQL with
--db postgres://… so a team shares one store across hosts. A run id may be
shortened to any unique prefix.`,
		Args: cobra.NoArgs,
	}
	sf.register(cmd.PersistentFlags())
	cmd.AddCommand(newRunsListCmd(&sf), newRunsShowCmd(&sf), newRunsExportCmd(&sf), newRunsImportCmd(&sf), newRunsDeleteCmd(&sf))
	return cmd
}

func newRunsListCmd(sf *storeFlags) *cobra.Command {
	var (
		filter tare.RunFilter
		since  time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List stored runs, newest first",
		Example: `  tare runs list
  tare runs list --window peak --since 168h
  tare runs list --label checkout --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since < 0 {
				return tare.Errorf(tare.EINVALID, "--since must be a positive duration like 24h; got %s", since)
			}
			if filter.Limit < 0 {
				return tare.Errorf(tare.EINVALID, "--limit must be 0 (all) or more; got %d", filter.Limit)
			}
			if err := session.CheckWindow(filter.Window); err != nil {
				return err
			}
			if since > 0 {
				filter.Since = time.Now().Add(-since)
			}
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			runs, err := st.FindRuns(cmd.Context(), filter)
			if err != nil {
				return err
			}
			abs, err := st.FindABs(cmd.Context(), filter)
			if err != nil {
				return err
			}
			runs = withABs(runs, abs, filter.Limit)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if runs == nil {
					runs = []tare.Run{}
				}
				return enc.Encode(runs)
			}
			return report.Runs(cmd.OutOrStdout(), runs, abs, func(id string) (tare.Summary, error) { return st.FindSummary(cmd.Context(), id) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&filter.Window, "window", "", "only runs of this protocol window: peak, offpeak or mid")
	fs.StringVar(&filter.Label, "label", "", "only runs with this label")
	fs.StringVar(&filter.Target, "target", "", "only runs whose target contains this text")
	fs.StringVar(&filter.Protocol, "protocol", "", "only the runs of this protocol")
	fs.DurationVar(&since, "since", 0, "only runs started within this long, like 24h")
	fs.IntVar(&filter.Limit, "limit", 50, "at most this many runs (0: all)")
	fs.BoolVar(&asJSON, "json", false, "print the runs as a JSON array")
	return cmd
}

// findAB finds the A/B run arg names (its id or a unique prefix); ok is
// false when none does. A prefix that names an A/B run and a run too is
// ambiguous.
func findAB(ctx context.Context, st tare.Store, arg string) (ab tare.AB, ok bool, err error) {
	ab, ok, err = session.FindAB(ctx, st, arg)
	if err != nil || !ok || ab.ID == arg {
		return ab, ok, err
	}
	if _, err := session.Resolve(ctx, st, arg); tare.ErrorCode(err) != tare.ENOTFOUND {
		return ab, false, tare.Errorf(tare.EINVALID, "run id %q is ambiguous: an A/B run and a run start with it; give more of it", arg)
	}
	return ab, true, nil
}

// notAB is nil unless arg names an A/B run; then an error saying that it
// cannot stand for a run, why (a clause: "has no …"), and its trials.
func notAB(ctx context.Context, sf *storeFlags, arg, why string) error {
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ab, ok, err := findAB(ctx, st, arg)
	if err != nil || !ok {
		return err
	}
	var trials []string
	for _, p := range ab.Pairs {
		trials = append(trials, p.A.RunID, p.B.RunID)
	}
	return tare.Errorf(tare.EINVALID, "%s is an A/B run, which %s (%s)", ab.ID, why, strings.Join(trials, " "))
}

// deleteAB deletes the A/B run arg names, after asking unless yes; done
// is false when arg names none. Its trials are runs of their own, kept.
func deleteAB(cmd *cobra.Command, sf *storeFlags, arg string, yes bool) (done bool, err error) {
	ctx := cmd.Context()
	st, err := sf.open(ctx)
	if err != nil {
		return false, err
	}
	defer st.Close()
	ab, ok, err := findAB(ctx, st, arg)
	if err != nil || !ok {
		return false, err
	}
	if !yes {
		fmt.Fprintf(cmd.ErrOrStderr(), "delete A/B run %s (%s, %s vs %s, %d pairs, started %s; its trials stay)? [y/N] ", ab.ID,
			cmp.Or(ab.Label, "no label"), ab.A.Target, ab.B.Target, len(ab.Pairs), ab.StartedAt.Local().Format("2006-01-02 15:04"))
		answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return true, &exitError{code: 1, reason: "not deleted"}
		}
	}
	if err := st.DeleteAB(ctx, ab.ID); err != nil {
		return true, err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted A/B run %s (its %d trials are runs of their own, kept)\n", ab.ID, 2*len(ab.Pairs))
	return true, err
}

// withABs lists the A/B runs among the runs, as runs of kind ab, newest
// first, at most limit (0: all) of both.
func withABs(runs []tare.Run, abs []tare.AB, limit int) []tare.Run {
	for _, ab := range abs {
		runs = append(runs, tare.Run{ID: ab.ID, Kind: tare.KindAB, Label: ab.Label, Target: ab.A.Target + " vs " + ab.B.Target,
			StartedAt: ab.StartedAt, EndedAt: ab.EndedAt, Status: tare.RunStatus(ab.Status)})
	}
	slices.SortStableFunc(runs, func(a, b tare.Run) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), strings.Compare(b.ID, a.ID))
	})
	if limit > 0 && len(runs) > limit {
		runs = runs[:limit]
	}
	return runs
}

// openRun opens the store and finds the run arg names; the caller closes
// the store.
func (f *storeFlags) openRun(ctx context.Context, arg string) (tare.Store, string, error) {
	st, err := f.open(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err := session.Resolve(ctx, st, arg)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	return st, id, nil
}

func newRunsShowCmd(sf *storeFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Print a stored run's summary and verdict as tare run printed them (an A/B run's as tare ab did)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if ab, ok, err := findAB(cmd.Context(), st, args[0]); err != nil || ok {
				if err != nil {
					return err
				}
				if asJSON {
					return report.ABJSON(cmd.OutOrStdout(), &ab)
				}
				return report.ABText(cmd.OutOrStdout(), &ab)
			}
			s, ticks, err := session.Load(cmd.Context(), st, args[0])
			if err != nil {
				return err
			}
			return printSummary(cmd.OutOrStdout(), &s, asJSON, ticks...)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tare.summary/v1 JSON (an A/B run's: the tare.ab/v1 JSON)")
	return cmd
}

func newRunsExportCmd(sf *storeFlags) *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "export RUN [--format jsonl|csv|hdr] [-o FILE]",
		Short: "Stream a run's raw records: JSONL, CSV or an HdrHistogram interval log",
		Long: `Stream every raw record of a stored run (one per request or job: scheduled,
sent, first answer, done, queue wait, status, error kind, output and prompt
tokens, which request of a --targets file it took: target_index from 0 and
its name, target; of a model call, its class (the turn of a conversation, or
the prefix group), conversation, prompt_words (tare's own count) and the
server's words on a failure, detail) in flat memory, whatever the run's size. The first answer is named for what it is:
on a plain HTTP record the first response byte (first_byte, ttfb_ms), on a
model call or a queue job the first content token (first_token, ttft_ms).

  jsonl  one JSON object per record; tare runs import reads it back
  csv    the same columns, with a header row
  hdr    an HdrHistogram interval log of latency (ns) per tick, for
         HistogramLogAnalyzer and the other HdrHistogram tools`,
		Example: `  tare runs export 0193 > run.jsonl
  tare runs export 0193 --format csv -o run.csv
  tare runs export 0193 --format hdr -o run.hlog`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := notAB(ctx, sf, args[0], "has no raw records of its own: export its trials, each a run"); err != nil {
				return err
			}
			st, id, err := sf.openRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.FindSummary(ctx, id)
			if err != nil {
				return err
			}
			tick := time.Second
			if ticks, err := st.FindTicks(ctx, id); err == nil && len(ticks) > 0 {
				tick = ticks[0].End.Sub(ticks[0].Start)
			}
			var targets []string // so that the records summarised again have their figures per request
			for _, t := range s.Targets {
				targets = append(targets, t.Name)
			}
			// Validated before any file is made.
			if _, err := records.NewExporter(io.Discard, format, s.Run.StartedAt, tick, targets); err != nil {
				return session.Flagged(err, "format")
			}
			_, err = atomicfile.Write(cmp.Or(output, "-"), cmd.OutOrStdout(), "-o", func(w io.Writer) error {
				bw := bufio.NewWriterSize(w, 256<<10)
				exp, err := records.NewExporter(bw, format, s.Run.StartedAt, tick, targets)
				if err != nil {
					return err
				}
				if err := st.StreamResults(ctx, id, exp.Write); err != nil {
					return err
				}
				if err := exp.Close(); err != nil {
					return err
				}
				return bw.Flush()
			})
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", records.FormatJSONL, "jsonl, csv or hdr")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func newRunsImportCmd(sf *storeFlags) *cobra.Command {
	var label string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Store a run measured elsewhere: a tare.summary/v1 JSON or raw JSONL records",
		Long: `Store a run from another machine: either the summary JSON that tare run
--json printed (kept as it is), or raw JSONL records that tare runs export
wrote (stored, and summarised and judged again here; the host was not
sampled, so the host figures are n/a).`,
		Example: `  tare runs import window-peak.json
  tare runs import --label imported run.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			var id string
			if s, serr := session.ReadSummary(args[0]); serr == nil {
				id, err = session.ImportSummary(ctx, st, s, label)
			} else {
				id, err = session.ImportRecords(ctx, st, args[0], label, version)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %s as run %s\n", args[0], id)
			return err
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "label the imported run (default: its own label, or the file name)")
	return cmd
}

func newRunsDeleteCmd(sf *storeFlags) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete RUN",
		Short: "Delete a stored run and everything recorded for it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if done, err := deleteAB(cmd, sf, args[0], yes); done || err != nil {
				return err
			}
			st, id, err := sf.openRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			// A sharded run is stored as one row per shard: all go.
			ids := []string{id}
			if rows, err := session.Shards(ctx, st, id); err != nil {
				return err
			} else if len(rows) > 0 {
				ids = ids[:0]
				for _, r := range rows {
					ids = append(ids, r.ID)
				}
			}
			if !yes {
				s, _, err := session.Load(ctx, st, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "delete run %s (%s, %s, %d requests, started %s)? [y/N] ", id,
					cmp.Or(s.Run.Label, "no label"), s.Run.Target, s.Requests.Total, s.Run.StartedAt.Local().Format("2006-01-02 15:04"))
				answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return &exitError{code: 1, reason: "not deleted"}
				}
			}
			for _, rowID := range ids {
				if err := st.DeleteRun(ctx, rowID); err != nil {
					return err
				}
			}
			if len(ids) > 1 {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted run %s (%d shards)\n", id, len(ids))
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted run %s\n", id)
			return err
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask")
	return cmd
}
