package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

const sweepLong = `Find the highest arrival rate the target sustains within an SLO: raise the
rate step by step (--from, --step, --to), then narrow between the last rate
that held and the first that failed (--narrow bisections). Each step is one
load window of --duration (or --jobs), measured and stored like tare run.

A step fails when the SLO fails, or when the system saturates: arrivals
dropped at the in-flight cap, more than 1% of requests failed, the backlog
(queue depth, or requests in flight) grew without bound over the second
half of the step, or completions fell short of arrivals. The rate is not
raised past a failure: a saturated target is not pushed further.

On a shared host the capacity moves with the hour: run a sweep in each
window of the protocol (a sweep: section in the plan) to get it as a range.
Constant arrivals (--arrival constant) give a sharper edge than Poisson
ones, whose bursts fail a step early.`

func newSweepCmd() *cobra.Command {
	var (
		w  windowFlags
		sw = session.NewSweepSpec()
		sf storeFlags
	)
	cmd := &cobra.Command{
		Use:   "sweep --url URL --slo p95<=2s [--from 1/s --to 1000/s --step 10/s] [flags]",
		Short: "Find the highest arrival rate that meets the SLO: the capacity, per window",
		Long:  sweepLong,
		Example: `  # double the rate from 1/s until p95 passes 2s or the service saturates, then narrow
  tare sweep --url http://127.0.0.1:8080/ --slo 'p95<=2s'

  # 10 s steps of 5/s from 5/s to 100/s, constant arrivals, in the peak window
  tare sweep --url http://127.0.0.1:8080/ --slo 'p95<=300ms' --from 5/s --step 5/s --to 100/s \
      --duration 10s --arrival constant --window peak`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("rate") || cmd.Flags().Changed("fail-on") {
				return tare.Errorf(tare.EINVALID, "--rate and --fail-on have no meaning for a sweep: the search sets the rate; use --from, --to and --step")
			}
			if w.spec.Judge.SLO == "" {
				return tare.Errorf(tare.EINVALID, "tare sweep needs an --slo to hold the rate to, like --slo p95<=2s")
			}
			plan, err := sw.Plan()
			if err != nil {
				return err
			}
			prep, err := w.prepare(cmd.Context(), "tare sweep")
			if err != nil {
				return err
			}
			defer prep.Release()
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			if st != nil {
				defer st.Close()
			}
			stderr := cmd.ErrOrStderr()
			result, err := w.driver(prep, st, stderr).Sweep(cmd.Context(), session.SweepConfig{
				Plan: plan, Cooldown: sw.Cooldown,
				Run:    tare.Run{Label: w.spec.Load.Label, Window: w.spec.Load.Window, Config: recorded(cmd.Flags(), nil)},
				OnStep: w.onStep(stderr),
			})
			if err != nil {
				return err
			}
			if w.out.json {
				return report.SweepJSON(cmd.OutOrStdout(), &result)
			}
			return report.SweepText(cmd.OutOrStdout(), &result)
		},
	}
	fs := cmd.Flags()
	w.register(fs, 1, 0, 10*time.Second)
	// The search sets the rate, and a sweep's outcome is its capacity.
	_ = fs.MarkHidden("rate")
	_ = fs.MarkHidden("fail-on")
	fs.Lookup("json").Usage = "print the tare.sweep/v1 JSON instead of the text"
	fs.Lookup("duration").Usage = "length of each step's arrival window (0: bounded by --jobs only; the default applies only without --jobs)"
	fs.Lookup("jobs").Usage = "number of arrivals of each step (0: bounded by --duration only)"
	fs.Lookup("label").Usage = "a name for the steps' runs, stored with each and its rate"
	bind(fs, sw.Fields())
	fs.Lookup("step").DefValue = "0" // printed as no default: the usage says what 0 means
	sf.registerNoStore(fs)
	return cmd
}

// onStep prints a line per step of a sweep on w, unless --quiet.
func (f *windowFlags) onStep(w io.Writer) func(n int, step tare.SweepStep) {
	if f.out.quiet {
		return nil
	}
	return func(n int, step tare.SweepStep) { fmt.Fprintln(w, report.SweepStep(n, step)) }
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
