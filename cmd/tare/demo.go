package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/worker"
)

type demoFlags struct {
	spec  *session.Spec
	out   outputFlags
	store storeFlags
	mf    metricsFlags

	redis       string
	workers     int
	concurrency int
	tokenCost   time.Duration
	meanTokens  int
	maxTokens   int
	neighbour   bool
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
what a noisy neighbour does to a capacity test. The hogs are named ` + hogName + `,
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
	fs.StringVar(&f.redis, "queue", "", "use a queue of its own in this Redis, like redis://127.0.0.1:6379/0 (default: an in-memory queue)")
	fs.StringVar(&f.redis, "redis", "", "the old spelling of --queue")
	deprecate(cmd, "redis", "use --queue redis://…, as tare run, worker and cleanup do")
	fs.IntVar(&f.workers, "workers", 1, "agent workers")
	fs.IntVar(&f.concurrency, "concurrency", 2, "jobs each worker runs at once")
	fs.DurationVar(&f.tokenCost, "token-cost", modelsim.DefaultTokenCost, "CPU work per generated token of the simulated model")
	fs.IntVar(&f.meanTokens, "mean-tokens", modelsim.DefaultMeanTokens, "mean output tokens of the simulated model")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "max_tokens of each job (0: the model's own draw)")
	fs.BoolVar(&f.neighbour, "neighbour", false, "start CPU hogs on every core halfway through the run")
	f.spec = session.NewSpec(arrival.Rate(4), 120, 0)
	bind(fs, f.spec.Load.Fields(), f.spec.Host.Fields(), f.spec.Judge.Fields(), f.spec.Target.PromptFields())
	f.out.register(fs)
	f.store.registerNoStore(fs)
	f.mf.register(fs)
	return cmd
}

func runDemo(cmd *cobra.Command, f *demoFlags) error {
	switch {
	case f.workers < 1:
		return tare.Errorf(tare.EINVALID, "--workers must be at least 1; got %d", f.workers)
	case f.concurrency < 1:
		return tare.Errorf(tare.EINVALID, "--concurrency must be at least 1; got %d", f.concurrency)
	case f.tokenCost <= 0:
		return tare.Errorf(tare.EINVALID, "--token-cost must be positive, like 2ms; got %s", f.tokenCost)
	case f.meanTokens < 1:
		return tare.Errorf(tare.EINVALID, "--mean-tokens must be at least 1; got %d", f.meanTokens)
	case f.maxTokens < 0:
		return tare.Errorf(tare.EINVALID, "--max-tokens must be 0 or more; got %d", f.maxTokens)
	}
	if err := f.mf.check(); err != nil {
		return err
	}
	f.spec.Load.DurationDefault = !cmd.Flags().Changed("duration")
	f.spec.Load.RateDefault = !cmd.Flags().Changed("rate")
	l := &f.spec.Load
	sched, err := l.Schedule()
	if err != nil {
		return err
	}
	ps, err := f.spec.Target.PromptSource(true, l.Seed)
	if err != nil {
		return err
	}
	j, err := f.spec.Judge.Judging()
	if err != nil {
		return err
	}
	if err := j.SLO.ForTarget(false); err != nil { // the demo's jobs call a model
		return session.Flagged(err, "slo")
	}
	sampling, err := f.spec.Host.Sampling(os.Getpid())
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	st, err := f.store.open(ctx)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}

	// The model: a simulated endpoint on loopback, in a process of its own,
	// so that the system under test and the generator are told apart.
	model, err := startDemoModel(ctx, cmd.ErrOrStderr(), f.tokenCost, f.meanTokens, l.Seed)
	if err != nil {
		return err
	}
	defer model.Stop()
	sampling.SUT = []int{model.PID}
	client, err := openai.New(openai.Config{URL: model.URL, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer client.Close()

	// The queue: in memory, or a queue of its own in the given Redis,
	// deleted afterwards.
	var b queue.Broker = queue.NewMemory(queue.MemoryConfig{Queue: "demo"})
	where := "an in-memory queue"
	if f.redis != "" {
		name := fmt.Sprintf("demo-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
		rb, err := queue.OpenRedis(ctx, f.redis, name)
		if err != nil {
			return session.Flagged(err, "queue")
		}
		b, where = rb, fmt.Sprintf("queue %q in Redis at %s", name, queue.RedactURL(f.redis))
	}
	t, err := session.QueueTarget(b, queue.TargetConfig{MaxTokens: f.maxTokens, Timeout: 5 * time.Minute, Prompts: ps})
	if err != nil {
		return err
	}

	// The workers, stopped and the queue cleaned up before the target
	// (which closes the broker) is released.
	workCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	for i := range f.workers {
		w := worker.New(b, modelOf(client, nil), worker.Config{Name: fmt.Sprintf("demo-worker-%d", i+1), Concurrency: f.concurrency, ClaimIdle: 10 * time.Second})
		workers.Add(1)
		go func() {
			defer workers.Done()
			w.Run(workCtx)
		}()
	}
	defer func() {
		stopWorkers()
		workers.Wait()
		if f.redis != "" {
			cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			b.Cleanup(cleanCtx)
			cancel()
		}
		t.Release()
	}()

	if !f.out.quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "tare demo: %s → %s → %d worker(s) × %d → simulated model at %s (pid %d, %s a token)\n",
			sched, where, f.workers, f.concurrency, model.URL, model.PID, f.tokenCost)
	}
	if f.neighbour {
		stop := startNeighbour(ctx, cmd, l.Length()/2, f.out.quiet)
		defer stop()
	}
	cfg, err := session.Window{
		Run:  tare.Run{Label: cmp.Or(l.Label, "demo"), Window: l.Window, Target: "demo " + t.Name, Version: version, Config: recorded(cmd.Flags(), nil)},
		Load: l, Target: t.Target, Depth: t.Depth(),
		Sampling: sampling, SUTFoundBy: "started by tare demo: the simulated model", Judging: j, Store: st,
	}.Config()
	if err != nil {
		return err
	}
	newProgress(cmd.ErrOrStderr(), f.out.quiet, l.Planned(), l.Jobs).hook(&cfg, t.Target)
	return measureAndReport(cmd, cfg, &f.mf, j.FailOn, f.out.json)
}

// selfCommand runs this executable with args: the demo's model is a tare
// model process. Tests replace it, to run their binary as tare.
var selfCommand = func(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "find the tare executable to start the simulated model: %w", err)
	}
	return exec.CommandContext(ctx, exe, args...), nil
}

// startDemoModel starts tare model on a free loopback port.
func startDemoModel(ctx context.Context, stderr io.Writer, tokenCost time.Duration, meanTokens int, seed uint64) (*modelsim.Process, error) {
	// Not cancelled with ctx: the model serves the drain after Ctrl-C, and
	// stops when the demo stops it.
	c, err := selfCommand(context.WithoutCancel(ctx), "model", "--listen", "127.0.0.1:0", "--token-cost", tokenCost.String(),
		"--mean-tokens", strconv.Itoa(meanTokens), "--token-spread", "0.5", "--seed", strconv.FormatUint(seed, 10))
	if err != nil {
		return nil, err
	}
	p, err := modelsim.Start(c, 30*time.Second, stderr)
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "%w", err)
	}
	return p, nil
}

// startNeighbour starts one CPU hog per core after the delay, as a noisy
// neighbour would, and returns the function that stops them. The hogs are
// separate processes named hogName, bounded by a deadline of their own in
// case tare is killed before it stops them.
func startNeighbour(ctx context.Context, cmd *cobra.Command, after time.Duration, quiet bool) (stop func()) {
	hogCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), after+10*time.Minute)
	var hogs []*exec.Cmd
	var mu sync.Mutex // guards hogs, filled by the timer's goroutine
	timer := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		for range runtime.NumCPU() {
			// tare itself, as the hidden hog command: it names itself
			// hogName, so the verdict says whose hog it was.
			h, err := selfCommand(hogCtx, hogCommand, "--for", (after + 10*time.Minute).String())
			if err == nil && h.Start() == nil {
				hogs = append(hogs, h)
			}
		}
		if !quiet {
			fmt.Fprintf(cmd.ErrOrStderr(), "\ntare demo: a neighbour moved in: %d CPU hogs (%s) on the same cores\n", len(hogs), hogName)
		}
	})
	return func() {
		timer.Stop()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hogs {
			h.Wait()
		}
	}
}
