package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/settings"
)

const rootLong = `tare is a load tester that knows whose CPU it ran on.

Capacity tests on shared, burstable and free-tier VMs lie: the hypervisor
steals CPU, cgroups throttle, neighbours crowd the run queue. tare runs the
load with open-loop arrivals, records host interference during the very same
seconds, and says whether the numbers describe your code or your neighbours.

Definitions:
  scheduled time  when the arrival process said a request should start;
                  latency is measured from it (no coordinated omission)
  send lag        actual send − scheduled; a lagging generator is a symptom
  service         done − actual send: what a closed-loop tool would report
  steal           share of a tick's CPU time the hypervisor gave to others
  CPU busy        share of a tick the guest itself ran
  whose cpu       each tick's CPU time by owner: the system under test
                  (with what it calls on this host), tare, each other
                  process by name, the kernel, steal, idle
  polluted tick   a tick whose steal, throttled share or wait behind
                  other processes exceeds the threshold (default 10%)
  clean-tick percentiles
                  latency over the requests that lived entirely in clean
                  ticks: what the code does on a quiet host

Verdicts: clean, suspect, polluted; a service that uses up its own CPUs is
saturated, a finding about the code beside the verdict (docs/verdict.md); a
run in which no request succeeded (a wrong port) is suspect.
Secrets: a URL flag not given (--url, --model, --queue, --coordinate, --db)
reads TARE_<FLAG>, or the file TARE_<FLAG>_FILE names, so that a password
stays off the command line, which every process on the host may read.

Exit status: 0 unless asked; --fail-on polluted|suspect: 3 on that verdict
or worse (inconclusive: rerun); --fail-on slo: 1 when the SLO failed on a
run that is not polluted, 3 on one that is; 2 usage or runtime error.`

// run is the whole command line, testable in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	defer pprof.StopCPUProfile() // --cpuprofile's, if it started one
	// The help and completion commands are added as Execute would add
	// them, so that their argument errors are usage errors too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	typeArgErrors(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && cmd.CalledAs() == "" {
		// cobra returns an error without calling any command only when it
		// cannot find the command: an unknown command.
		err = &usageError{err}
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return tare.Errorf(tare.EINVALID, "%w\nRun '%s --help' for usage.", ue, cmd.CommandPath())
	}
	return err
}

// newRootCmd is tare's command tree: every command and its flags.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tare",
		Short:         "A load tester that knows whose CPU it ran on",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newRunCmd(), newDemoCmd(), newCheckCmd(), newWatchCmd(), newRunsCmd(), newModelCmd(), newWorkerCmd(), newCleanupCmd())
	root.AddCommand(newCompareCmd(), newSweepCmd(), newProtocolCmd(), newHogCmd(), newABCmd())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print tare's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "tare %s\n", version)
			return err
		},
	})
	root.AddCommand(newReportCmd())
	for _, f := range session.NewSpec(1, 0, 0).Fields() {
		if f.Retired != "" {
			deprecateEverywhere(root, f.Flag, f.Retired)
		}
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of tare itself to this file")
	root.PersistentFlags().MarkHidden("cpuprofile")
	sayURLEnv(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := urlsFromEnv(cmd); err != nil {
			return err
		}
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return tare.Errorf(tare.EINVALID, "--cpuprofile %s: %w", cpuProfile, err)
		}
		return pprof.StartCPUProfile(f)
	}
	return root
}

// usageError is a mistake in how tare was called: an unknown command or
// flag, a flag without its value, the wrong number of arguments. run adds
// how to get help to its message.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// typeArgErrors makes the errors of the Args validators of cmd and of every
// command below it usage errors.
func typeArgErrors(cmd *cobra.Command) {
	if validate := cmd.Args; validate != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := validate(c, args); err != nil {
				return &usageError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		typeArgErrors(c)
	}
}

// flagError turns pflag's parse errors into messages that name the flag,
// the value and the accepted form; any other parse error (an unknown flag,
// a flag without its value) is a usage error.
func flagError(_ *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		fl := invalid.GetFlag()
		return settings.Invalid(fl.Name, fl.Value, invalid.GetValue(), invalid.Unwrap())
	}
	return &usageError{err}
}

// deprecateEverywhere marks flag deprecated in every command that has it,
// its warning on stderr, so that --json keeps stdout to the JSON.
func deprecateEverywhere(cmd *cobra.Command, flag, use string) {
	if cmd.Flags().Lookup(flag) != nil {
		deprecate(cmd, flag, use)
	}
	for _, c := range cmd.Commands() {
		deprecateEverywhere(c, flag, use)
	}
}
