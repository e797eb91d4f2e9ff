package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/demo"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/worker"
)

type demoFlags struct {
	demo.Config
	out       outputFlags
	store     storeFlags
	mf        metricsFlags
	neighbour bool
}

const demoLong = `Run the reference topology on this machine and measure it:

  [Poisson arrivals] --enqueue--> [queue] --> [agent workers] --> [simulated model]
        tare                    in memory,      pop a job,       OpenAI-compatible on
                                or Redis        call the model   loopback; every token
                                with --queue    (inside tare)    burns real CPU; its own
                                                                 process: the system
                                                                 under test

The host is sampled during the very same seconds; the summary shows queue
wait, end-to-end latency, TTFT, tokens/s, CPU and steal, then the verdict.
Nothing to install or start. --neighbour starts CPU hogs on the same cores
halfway through, so you watch the figures and the verdict change: that is
what a noisy neighbour does to a capacity test. The hogs are named ` + demo.HogName + `,
and the verdict names them so.

The seed's setup, 500 jobs at a mean 2/s: tare demo --jobs 500 --rate 2/s`

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Measure the reference topology (queue, workers, model) with no setup",
		Long:  demoLong,
		Example: `  tare demo
  tare demo --neighbour
  tare demo --queue redis://127.0.0.1:6379/0 --workers 2
  tare demo --jobs 500 --rate 2/s --json > demo.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, &f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Queue, "queue", "", "use a queue of its own in this Redis, like redis://127.0.0.1:6379/0 (default: an in-memory queue)")
	fs.StringVar(&f.Queue, "redis", "", "the old spelling of --queue")
	deprecate(cmd, "redis", "use --queue redis://…, as tare run, worker and cleanup do")
	fs.IntVar(&f.Workers, "workers", 1, "agent workers")
	fs.IntVar(&f.Concurrency, "concurrency", 2, "jobs each worker runs at once")
	fs.DurationVar(&f.TokenCost, "token-cost", modelsim.DefaultTokenCost, "CPU work per generated token of the simulated model")
	fs.IntVar(&f.MeanTokens, "mean-tokens", modelsim.DefaultMeanTokens, "mean output tokens of the simulated model")
	fs.IntVar(&f.MaxTokens, "max-tokens", 0, "max_tokens of each job (0: the model's own draw)")
	fs.BoolVar(&f.neighbour, "neighbour", false, "start CPU hogs on every core halfway through the run")
	f.Spec = session.NewSpec(arrival.Rate(4), 120, 0)
	bind(fs, f.Spec.Load.Fields(), f.Spec.Host.Fields(), f.Spec.Judge.Fields(), f.Spec.Target.PromptFields())
	f.out.register(fs)
	f.store.registerNoStore(fs)
	f.mf.register(fs)
	return cmd
}

func runDemo(cmd *cobra.Command, f *demoFlags) error {
	if err := f.Check(); err != nil {
		return err
	}
	if err := f.mf.check(); err != nil {
		return err
	}
	l := &f.Spec.Load
	l.DurationDefault = !cmd.Flags().Changed("duration")
	l.RateDefault = !cmd.Flags().Changed("rate")
	f.Version, f.Recorded, f.Self = version, recorded(cmd.Flags(), nil), selfCommand
	f.Model = func(c *openai.Client) worker.Model { return modelOf(c, nil) }
	d, err := demo.New(f.Config)
	if err != nil {
		return err
	}
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	st, err := f.store.open(ctx)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	if err := d.Start(ctx, stderr); err != nil {
		return err
	}
	defer d.Stop()
	if !f.out.quiet {
		fmt.Fprintf(stderr, "tare demo: %s → %s → %d worker(s) × %d → simulated model at %s (pid %d, %s a token)\n",
			d.Schedule, d.Where, f.Workers, f.Concurrency, d.Model.URL, d.Model.PID, f.TokenCost)
	}
	if f.neighbour {
		stop := demo.StartNeighbour(ctx, selfCommand, l.Length()/2, f.neighbourMoved(stderr))
		defer stop()
	}
	cfg, err := d.Config(st)
	if err != nil {
		return err
	}
	newProgress(stderr, f.out.quiet, l.Planned(), l.Jobs).hook(&cfg, d.Target())
	return measureAndReport(cmd, cfg, &f.mf, d.Judging.FailOn, f.out.json)
}

// neighbourMoved says that the neighbour's hogs started, unless --quiet.
func (f *demoFlags) neighbourMoved(w io.Writer) func(hogs int) {
	if f.out.quiet {
		return nil
	}
	return func(hogs int) {
		fmt.Fprintf(w, "\ntare demo: a neighbour moved in: %d CPU hogs (%s) on the same cores\n", hogs, demo.HogName)
	}
}

// selfCommand runs this executable with args: the demo's model and hogs
// are tare processes. Tests replace it, to run their binary as tare.
var selfCommand = func(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "find the tare executable to start the simulated model: %w", err)
	}
	return exec.CommandContext(ctx, exe, args...), nil
}
