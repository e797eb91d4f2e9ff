package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

const protocolLong = `The three-window protocol: the same load in a peak window (14:00–16:00), an
off-peak window (02:00–04:00) and a mid window (08:00–10:00), then a
comparison of the three (tare compare). If they diverge by more than 30%,
beyond noise and above the latency floor, the host is the variable and no
scaling decision is valid; on too few requests to tell, the comparison says
so and how many to run. Capacity is a range: the best, worst and typical
case as measured, with the window each came from (off-peak is expected to
be the best and peak the worst; where not, that is a finding about the
host), and what changed in the host between the windows.

A plan file (YAML) names the target and the load (everything tare run
takes), the SLO, the thresholds, the windows, the days and the time zone:

  url: http://127.0.0.1:8080/checkout
  rate: 2/s
  jobs: 500
  slo: p95<=2s
  thresholds: {steal: 10, divergence: 30}
  windows: {peak: 14:00-16:00, offpeak: 02:00-04:00, mid: 08:00-10:00}
  days: 1
  tz: Europe/Paris
  sweep: {from: 1/s, to: 40/s, step: 4/s}   # optional: a capacity sweep per window

With windows: auto the windows come from this host's calendar instead
(tare check --every keeps it, tare check history shows it): off-peak in
its quietest hours, peak in its busiest, mid in its most typical, each the
load's length rounded up to whole hours. offpeak: quietest, peak: busiest
or mid: typical chooses one and leaves the others to the clock. A protocol
chooses once, the first time it needs its windows, and keeps them; every
run records them with the calendar's evidence, and the comparison says
whether each window measured as quiet (or as busy) as predicted. With
fewer than 5 days in the calendar it refuses: too few days to tell.

Every window is stored as a run with the protocol id (the plan's id:, or
its file name) and the window's name, so tare protocol run survives a
restart: a window already done is not rerun, and one whose time passed
while tare was not running is reported missed, never faked.`

func newProtocolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "protocol",
		Short: "Run the same load at peak, off-peak and mid hours, and compare: capacity as a range",
		Long:  protocolLong,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newProtocolRunCmd(), newProtocolCronCmd(), newProtocolStatusCmd())
	return cmd
}

// planFlags override a plan on the command line.
type planFlags struct {
	days int
	tz   string
	id   string
}

func (f *planFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.days, "days", 0, "repeat the cycle on this many days (default: the plan's days, else 1)")
	fs.StringVar(&f.tz, "tz", "", "time zone of the windows, like Europe/Paris (default: the plan's tz, else local)")
	fs.StringVar(&f.id, "id", "", "protocol id (default: the plan's id, else its file name)")
}

// loadedPlan is a plan read into its spec and checked, ready to run.
type loadedPlan struct {
	*session.Plan
	window   windowFlags // the plan's spec, printed as the command asks
	schedule protocol.Schedule
	prep     *session.Prepared
}

// loadPlan reads the plan at path and checks it: every error names the
// plan's line and key; its warnings (a retired key) go to stderr.
func loadPlan(ctx context.Context, path string, over planFlags, stderr io.Writer) (*loadedPlan, error) {
	pl, err := session.ReadPlan(path)
	if err != nil {
		return nil, err
	}
	for _, w := range pl.Warnings {
		fmt.Fprintf(stderr, "tare: %s\n", w)
	}
	lp := &loadedPlan{Plan: pl, window: windowFlags{spec: pl.Spec}}
	if lp.schedule, err = pl.Schedule(over.id, over.tz, over.days); err != nil {
		return nil, err
	}
	if lp.prep, err = session.Prepare(ctx, pl.Spec, "the plan"); err != nil {
		return nil, pl.Error(err)
	}
	return lp, nil
}

// chooseWindows chooses the windows the plan takes from the host's
// calendar (windows: auto), or reads back those its protocol chose, and
// says so on stderr unless quiet; it returns them as crontab comments.
func (lp *loadedPlan) chooseWindows(ctx context.Context, st tare.Store, keep, quiet bool, stderr io.Writer) ([]string, error) {
	warnings, err := lp.ChooseWindows(ctx, st, &lp.schedule, host.Hostname(), time.Now(), keep)
	if err != nil {
		return nil, err
	}
	var comments []string
	for _, c := range lp.Chosen {
		comments = append(comments, "# from the calendar: "+c.Detail)
		if !quiet {
			fmt.Fprintf(stderr, "tare protocol %s: from the calendar: %s\n", lp.schedule.Protocol, c.Detail)
		}
	}
	for _, w := range warnings {
		comments = append(comments, "# warning: "+w)
		fmt.Fprintf(stderr, "tare protocol %s: warning: %s\n", lp.schedule.Protocol, w)
	}
	return comments, nil
}

func newProtocolRunCmd() *cobra.Command {
	var (
		over   planFlags
		sf     storeFlags
		mf     metricsFlags
		now    bool
		only   string
		asJSON bool
		quiet  bool
	)
	cmd := &cobra.Command{
		Use:   "run PLAN [--now] [--days N] [--tz ZONE] [--window W]",
		Short: "Wait for each window, run the plan's load in it, store it; then compare",
		Long: `Wait for each window of the plan (a countdown on a terminal), run the same
load at a seeded offset inside it, store the run with the protocol id and
the window, and when every window has run (or was missed), print the
comparison.

Run it again after a restart and it carries on: windows already done are
not rerun; a window that passed while tare was not running is reported
missed, never faked. Ctrl-C while waiting stops cleanly.

--now runs the windows back to back at once, as a dry run of the plan: its
runs are stored under a protocol id of their own, labelled dry run, and say
nothing about the hours. --window runs only that window's next slot and
exits: what the lines of tare protocol cron do.`,
		Example: `  tare protocol run checkout.yaml --now      # try the plan: three windows back to back
  tare protocol run checkout.yaml            # the real thing: waits for each window
  tare protocol run checkout.yaml --days 3 --tz Europe/Paris`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := session.CheckWindow(only); err != nil {
				return err
			}
			if now && only != "" {
				return tare.Errorf(tare.EINVALID, "--now runs every window at once; it does not go with --window")
			}
			if err := mf.check(); err != nil {
				return err
			}
			lp, err := loadPlan(cmd.Context(), args[0], over, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer lp.prep.Release()
			if only != "" && !slices.ContainsFunc(lp.schedule.Windows, func(w tare.Window) bool { return w.Name == only }) {
				return tare.Errorf(tare.EINVALID, "--window %s: the plan has no %s window", only, only)
			}
			lp.window.out.quiet = quiet
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := lp.chooseWindows(cmd.Context(), st, !now, quiet, cmd.ErrOrStderr()); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			pr := &session.ProtocolRun{
				Plan: lp.Plan, Schedule: lp.schedule, Driver: lp.window.driver(lp.prep, st, stderr),
				Wait:  protocol.Countdown(stderr, isTerminal(stderr), quiet, lp.schedule.Location),
				Watch: func(cfg *session.Config) func(*tare.Verdict) { return mf.attach(cmd.Context(), cfg, stderr) },
				Show:  &protocolShow{plan: lp.Plan, stdout: cmd.OutOrStdout(), stderr: stderr, json: asJSON, quiet: quiet},
			}
			if now {
				return pr.DryRun(cmd.Context())
			}
			return pr.Loop(cmd.Context(), only)
		},
	}
	fs := cmd.Flags()
	over.register(fs)
	sf.register(fs)
	mf.register(fs)
	fs.BoolVar(&now, "now", false, "dry run: the windows back to back now, under a protocol id of their own")
	fs.StringVar(&only, "window", "", "run only this window's next slot (peak, offpeak or mid), then exit")
	fs.BoolVar(&asJSON, "json", false, "print only the tare.compare/v1 JSON at the end")
	fs.BoolVar(&quiet, "quiet", false, "no countdown and no progress line")
	return cmd
}

// protocolShow prints a protocol run as it goes: its summaries and its
// comparison on stdout (only the comparison's JSON with --json), the rest
// on stderr (with --quiet only what went wrong or was missed).
type protocolShow struct {
	plan           *session.Plan
	stdout, stderr io.Writer
	json, quiet    bool
}

func (p *protocolShow) DryRun(s protocol.Schedule) {
	fmt.Fprintf(p.stderr, "tare protocol: dry run of %s as protocol %s: the %d windows back to back now, not at their hours\n",
		p.plan.File, s.Protocol, len(s.Windows))
}

func (p *protocolShow) Start(s protocol.Schedule) {
	if !p.quiet {
		fmt.Fprintf(p.stderr, "tare protocol %s: %s, %d %s, each window %s of load (%s)\n", s.Protocol, protocol.WindowList(s.Windows),
			max(s.Days, 1), plural(max(s.Days, 1), "day", "days"), p.plan.Spec.Load.Length(), s.Location)
	}
}

func (p *protocolShow) Slot(s protocol.Schedule, slot protocol.Slot) {
	if !p.quiet {
		fmt.Fprintf(p.stderr, "tare protocol %s: %s window (%s), day %d of %d\n", s.Protocol, slot.Window.Name,
			protocol.FormatWindow(slot.Window), slot.Day, max(s.Days, 1))
	}
}

func (p *protocolShow) Missed(slot protocol.Slot) {
	fmt.Fprintf(p.stderr, "tare protocol: missed the %s window of %s (%s): %s\n", slot.Window.Name,
		slot.Opens.Format("2006-01-02"), protocol.FormatWindow(slot.Window), slot.Why)
}

func (p *protocolShow) Summary(sum *tare.Summary) error {
	return p.window(func(w io.Writer) error { return report.Text(w, sum) })
}

func (p *protocolShow) Sweep(result *tare.Sweep) error {
	return p.window(func(w io.Writer) error { return report.SweepText(w, result) })
}

// window prints a window's outcome with text, and a blank line after it;
// nothing with --json, which prints only the comparison.
func (p *protocolShow) window(text func(io.Writer) error) error {
	if p.json {
		return nil
	}
	if err := text(p.stdout); err != nil {
		return err
	}
	fmt.Fprintln(p.stdout)
	return nil
}

func (p *protocolShow) Step(n int, step tare.SweepStep) {
	if !p.quiet {
		fmt.Fprintln(p.stderr, report.SweepStep(n, step))
	}
}

func (p *protocolShow) Stopped(window string) {
	if window != "" {
		fmt.Fprintf(p.stderr, "tare protocol: dry run stopped during the %s window\n", window)
		return
	}
	fmt.Fprintf(p.stderr, "tare protocol: stopped. Run the same command again to carry on: windows already done are not rerun.\n")
}

func (p *protocolShow) Ran(s protocol.Schedule, window string) {
	if !p.quiet {
		fmt.Fprintf(p.stderr, "tare protocol: %s window done; tare protocol status %s shows what is next\n", window, s.Protocol)
	}
}

func (p *protocolShow) Compared(id string, c *tare.Comparison, n int) error {
	if c == nil {
		fmt.Fprintf(p.stderr, "tare protocol %s: %d complete %s: nothing to compare\n", id, n, plural(n, "window", "windows"))
		return nil
	}
	return printComparison(p.stdout, c, p.json)
}

func newProtocolCronCmd() *cobra.Command {
	var (
		over planFlags
		sf   storeFlags
		log  string
	)
	cmd := &cobra.Command{
		Use:   "cron PLAN",
		Short: "Print crontab lines that run each window of the plan instead of a waiting tare",
		Long: `Print crontab lines, one per window, that start tare protocol run PLAN
--window W at each window's opening; that run waits for the seeded start
inside the window, runs it, stores it and exits. Add them with crontab -e.
The output of each run is appended to --log.`,
		Example: `  tare protocol cron checkout.yaml >> my.crontab`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lp, err := loadPlan(cmd.Context(), args[0], over, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			lp.prep.Release()
			var chosen []string
			if len(lp.Auto) > 0 {
				st, err := sf.open(cmd.Context())
				if err != nil {
					return err
				}
				defer st.Close()
				if chosen, err = lp.chooseWindows(cmd.Context(), st, true, true, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			exe, err := os.Executable()
			if err != nil {
				exe = "tare"
			}
			run := []string{exe, "protocol", "run", lp.Path, "--quiet"}
			for _, f := range []struct{ name, value string }{{"db", sf.db}, {"id", over.id}, {"tz", over.tz}} {
				if f.value != "" {
					run = append(run, "--"+f.name, f.value)
				}
			}
			if over.days != 0 {
				run = append(run, "--days", fmt.Sprint(over.days))
			}
			if log == "" {
				log = filepath.Join(filepath.Dir(lp.Path), lp.schedule.Protocol+".log")
			}
			for _, line := range append(chosen, lp.schedule.Cron(run, log)...) {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), line); err != nil {
					return err
				}
			}
			return nil
		},
	}
	over.register(cmd.Flags())
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&log, "log", "", "file the runs' output is appended to (default: PROTOCOL.log beside the plan)")
	return cmd
}

func newProtocolStatusCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "status [ID]",
		Short: "Show what ran, what is next and what was missed, from the store",
		Long: `Without an id, list the protocols in the store. With one, show each window's
slot: done (with its run), waiting (with its seeded start), running in
another tare, or missed (and why). The schedule is read back from the runs
themselves, so status works from any host that shares the store.`,
		Example: `  tare protocol status
  tare protocol status checkout`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if len(args) == 0 {
				runs, err := st.FindRuns(ctx, tare.RunFilter{})
				if err != nil {
					return err
				}
				return protocol.List(cmd.OutOrStdout(), runs)
			}
			runs, err := st.FindRuns(ctx, tare.RunFilter{Protocol: args[0]})
			if err != nil {
				return err
			}
			return protocol.Status(cmd.OutOrStdout(), args[0], runs, time.Now())
		},
	}
	sf.register(cmd.Flags())
	return cmd
}
