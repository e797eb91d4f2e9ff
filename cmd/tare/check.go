package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	jdg "github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/queue/queueurl"
	"github.com/tare-dev/tare/session"
)

func newCheckCmd() *cobra.Command {
	var (
		spec   = session.NewSpec(0, 0, 0)
		out    outputFlags
		mf     metricsFlags
		span   time.Duration
		q      queueFlags
		sf     storeFlags
		every  time.Duration
		record bool
	)
	cmd := &cobra.Command{
		Use:   "check [--for 10s] [--every 5m]",
		Short: "Say whether the host is quiet enough to measure now, or keep its calendar",
		Long: `Sample the host for a while, sending no load, and say whether now is quiet
enough to measure: steal, CPU pressure, throttling of tare's cgroup (or
--cgroup), run delay of --pid processes, and who is using the CPUs now, by
name (the busy signal: other processes above the steal threshold of the
host's CPU time make now suspect, above half of it polluted), with the same
thresholds and verdict as a run. Where the scheduler probe runs (as root on
a kernel with BTF; --sched-probe), it also says, for the three busiest
processes, how long each waited for a CPU and behind whom. Exit
status 3 with --fail-on polluted (or suspect) when it is not.

With --every, it keeps the host's calendar instead: a --for sample every
--every, until stopped, each stored (SQLite by default, PostgreSQL with
--db, keyed by host, so hosts share one store) and printed as one line
(with --json, one JSON object a line). --record stores a single sample
that way: what the line of tare check cron runs. tare check history reads
the calendar back: which hours of the day this host is quiet, which busy,
and who keeps it busy; a protocol plan's windows: auto chooses its windows
from it.

With --queue, it first checks the job queue a run would load and that a
worker serves it (exit 2 otherwise, saying how to start one), and, for
Celery on RabbitMQ, that the workers register the task (exit 2 otherwise,
naming those they do); the URL's scheme says which protocol its workers
speak:
  ` + strings.ReplaceAll(queue.URLForms, "\n", "\n  ") + ``,
		Example: `  tare check
  tare check --for 30s --json
  tare check --for 5s --fail-on polluted && tare run --url http://127.0.0.1:8080/ --rate 100/s
  tare check --queue 'celery+redis://127.0.0.1:6379/0?queue=celery&task=tasks.answer'
  tare check --queue 'bullmq+redis://127.0.0.1:6379/0?queue=agents&name=answer'
  tare check --every 5m --for 10s            # keep this host's calendar, until stopped
  tare check history --days 14`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if span <= 0 {
				return tare.Errorf(tare.EINVALID, "--for must be a positive duration, like 10s; got %s", span)
			}
			keep := every != 0 || record
			if err := checkCalendarFlags(every, span, keep, q.url, spec.Judge.FailOn, mf.listen); err != nil {
				return err
			}
			if keep && !cmd.Flags().Changed("sched-probe") {
				// A calendar sample has no system under test whose waits
				// the probe would explain, and loading it tripled a
				// sample's CPU (docs/calendar.md).
				spec.Host.SchedProbe = "off"
			}
			j, err := spec.Judge.Judging()
			if err != nil {
				return err
			}
			if err := spec.Judge.HostOnly("tare check"); err != nil {
				return err
			}
			if err := mf.check(); err != nil {
				return err
			}
			if q.url != "" {
				locate := func(ws []queue.WorkerInfo) { session.LocateWorkers("", ws) }
				line, err := queueurl.Probe(cmd.Context(), q.url, q.name, session.DefaultWaitWorkers, locate)
				if err != nil {
					return session.Flagged(err, "queue")
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "tare check: "+line)
			}
			// tare itself stands for the load to come, so throttling is
			// read from its cgroup too; --pid names the service.
			cfg, err := spec.Host.Checking(os.Getpid())
			if err != nil {
				return err
			}
			sutBy, err := spec.Host.FindSUT(&cfg, "", "")
			if err != nil {
				return err
			}
			window, err := session.Window{Run: tare.Run{Label: "check", Target: "host", Version: version}, Sampling: cfg, SUTFoundBy: sutBy, Judging: j}.Config()
			if err != nil {
				return err
			}
			if keep {
				return keepCalendar(cmd, window, j.Thresholds, span, every, sf, out)
			}
			newProgress(cmd.ErrOrStderr(), out.quiet, span, 0).hook(&window, nil)
			end := mf.attach(cmd.Context(), &window, cmd.ErrOrStderr())
			s, err := checkOnce(cmd.Context(), window, j.Thresholds, span)
			if err != nil {
				end(nil)
				return err
			}
			err = printSummary(cmd.OutOrStdout(), &s, out.json)
			end(&s.Verdict)
			if err != nil {
				return err
			}
			return verdictStatus(&s, j.FailOn)
		},
	}
	cmd.Flags().DurationVar(&span, "for", 10*time.Second, "how long to sample")
	cmd.Flags().DurationVar(&every, "every", 0, "keep the host's calendar: a --for sample this often (like 5m), each stored and printed as a line, until stopped")
	cmd.Flags().BoolVar(&record, "record", false, "store this one sample in the host's calendar and print it as a line (what a line of tare check cron runs)")
	sf.register(cmd.Flags())
	bind(cmd.Flags(), spec.Host.Fields(), spec.Judge.Fields())
	out.register(cmd.Flags())
	mf.register(cmd.Flags())
	q.register(cmd)
	cmd.AddCommand(newCheckHistoryCmd(), newCheckCronCmd())
	return cmd
}

// checkOnce samples the host for span with no load of tare's own and
// judges it as tare check does.
func checkOnce(ctx context.Context, window session.Config, th jdg.Thresholds, span time.Duration) (tare.Summary, error) {
	stop := make(chan struct{})
	timer := time.AfterFunc(span, func() { close(stop) })
	defer timer.Stop()
	s, _, _, err := session.Observe(ctx, window, stop)
	if err != nil {
		return s, err
	}
	s.Verdict = jdg.Check(&s, th)
	s.Verdict.Advice[0] = checkAdvice[s.Verdict.Level]
	return s, nil
}

// checkAdvice replaces a run's first line of advice: a check has no figures
// of its own to trust or not, only a moment to measure in or not.
var checkAdvice = map[tare.Level]string{
	tare.Clean:    "Quiet enough to measure now: no interference signal fired.",
	tare.Suspect:  "Measurable with care: something on this machine competes for its CPUs (see above); a run now may be slower than the code is.",
	tare.Polluted: "Not a good time to measure: a run now would describe the neighbours. Check again later, or measure on a dedicated host.",
}
