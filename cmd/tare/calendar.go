package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/calendar"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/internal/atomicfile"
	jdg "github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/store"
)

// checkCalendarFlags refuses what does not go with keeping a calendar
// (keep: --every or --record), before anything is sampled. --db without
// them is not refused: $TARE_DB sets it too, for every command.
func checkCalendarFlags(every, span time.Duration, keep bool, queueURL, failOn, metricsListen string) error {
	switch {
	case every < 0:
		return tare.Errorf(tare.EINVALID, "--every must be a positive duration, like 5m; got %s", every)
	case every > 0 && every <= span:
		return tare.Errorf(tare.EINVALID, "--every %s must be longer than --for %s: each sample needs its slot, like --every 5m --for 10s", every, span)
	case !keep:
		return nil
	case queueURL != "":
		return tare.Errorf(tare.EINVALID, "--queue checks a queue before a run; it does not go with --every or --record, which keep the host's calendar")
	case failOn != "":
		return tare.Errorf(tare.EINVALID, "--fail-on judges one check before a run; it does not go with --every or --record, which keep the host's calendar")
	case metricsListen != "":
		return tare.Errorf(tare.EINVALID, "--metrics-listen serves one run's figures; it does not go with --every or --record")
	}
	return nil
}

// keepCalendar samples the host every every (once, with 0), stores each
// sample in the host's calendar and prints it as a line.
func keepCalendar(cmd *cobra.Command, window session.Config, th jdg.Thresholds, span, every time.Duration, sf storeFlags, out outputFlags) error {
	ctx := cmd.Context()
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	name := host.Hostname()
	if every > 0 && !out.quiet {
		fmt.Fprintf(stderr, "tare check: keeping the calendar of host %s in %s: a %s sample every %s, until stopped (tare check history shows it)\n",
			name, tare.RedactText(storeName(sf.db)), span, every)
	}
	var lineErr error
	k := &session.Keeper{
		Every: every, Store: st, Host: name, Once: every == 0,
		Sample: func(ctx context.Context) (tare.Summary, error) { return checkOnce(ctx, window, th, span) },
		OnSample: func(s tare.CalendarSample) {
			if lineErr == nil {
				lineErr = sampleLine(stdout, s, out.json)
			}
		},
		OnError: func(s tare.CalendarSample, err error) {
			fmt.Fprintf(stderr, "tare check: the sample of %s was not stored: %s\n", s.Start.Local().Format("2006-01-02 15:04:05"), tare.ErrorMessage(err))
		},
	}
	if err := k.Loop(ctx); err != nil {
		return err
	}
	return lineErr
}

// storeName is where the store is, as a person reads it.
func storeName(db string) string {
	if db == "" {
		return store.DefaultPath()
	}
	return db
}

// sampleLine prints one calendar sample: a line of text, or of JSON.
func sampleLine(w io.Writer, s tare.CalendarSample, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encode calendar sample: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, report.CalendarLine(&s))
	return err
}

func newCheckHistoryCmd() *cobra.Command {
	var (
		sf     storeFlags
		days   int
		name   string
		tz     string
		asJSON bool
		html   string
	)
	cmd := &cobra.Command{
		Use:   "history [--days N] [--json] [--html FILE]",
		Short: "When is this host quiet? Its calendar, hour by hour, from tare check --every",
		Long: `Read the host's calendar (the samples tare check --every or --record stored)
over the last --days days and show it by the hour of the day: the
interference of each hour (steal plus the CPU of other processes, in % of
the host's CPU time) with its spread (10th to 90th percentile) and sample
count, steal, CPU pressure and run delay, the busiest neighbours of each
hour by name, and the quietest and the busiest hour with how sure that is:
an interval from resampling the days, and the share of resamples that
agree. With fewer than 5 days of samples it says there are too few days
to tell, rather than name an hour by chance. Once every weekday has been
seen twice, the hours are split by weekday too.

--html writes a page with a heatmap, day by hour, coloured by
interference. --host reads another host's calendar from a shared store.`,
		Example: `  tare check history
  tare check history --days 14 --json
  tare check history --html calendar.html
  tare check history --db postgres://tare@db.internal/tare --host node-3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if days < 1 || days > protocol.MaxDays {
				return tare.Errorf(tare.EINVALID, "--days must be from 1 to %d; got %d", protocol.MaxDays, days)
			}
			loc := time.Local
			if tz != "" {
				var err error
				if loc, err = protocol.LoadTZ(tz); err != nil {
					return session.Flagged(err, "tz")
				}
			}
			if name == "" {
				name = host.Hostname()
			}
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			now := time.Now()
			cfg := calendar.Config{Host: name, Loc: loc, Now: now, Days: days}
			samples, err := st.FindCalendarSamples(ctx, tare.CalendarFilter{Host: name, Since: cfg.From(), Until: now})
			if err != nil {
				return err
			}
			hosts, err := st.FindCalendarHosts(ctx)
			if err != nil {
				return err
			}
			if len(samples) == 0 {
				return noHistory(name, days, storeName(sf.db), hosts)
			}
			c := calendar.Build(samples, cfg)
			for _, h := range hosts {
				if h.Host != name {
					c.OtherHosts = append(c.OtherHosts, h)
				}
			}
			if html != "" {
				page := report.Page{Calendar: c, Generated: now, Version: version}
				size, err := atomicfile.Write(html, cmd.OutOrStdout(), "--html", func(w io.Writer) error { return report.HTML(w, page) })
				if err != nil {
					return err
				}
				if html != "-" {
					fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%s): open it in any browser, offline\n", html, kilobytes(size))
				}
				if html == "-" {
					return nil
				}
			}
			if asJSON {
				return report.CalendarJSON(cmd.OutOrStdout(), c)
			}
			return report.CalendarText(cmd.OutOrStdout(), c)
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().IntVar(&days, "days", calendar.DefaultDays, "read the samples of the last N days")
	cmd.Flags().StringVar(&name, "host", "", "the host whose calendar to read (default: this one, $TARE_HOSTNAME or the kernel's host name)")
	cmd.Flags().StringVar(&tz, "tz", "", "time zone of the hours, like Europe/Paris (default: local)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tare.calendar/v1 JSON instead of the text")
	cmd.Flags().StringVar(&html, "html", "", "also write an HTML page with the heatmap (day by hour) to this file (- for stdout, instead of the text)")
	return cmd
}

// noHistory is the error of a host without samples: how to start its
// calendar, and which hosts of the store have one.
func noHistory(name string, days int, where string, hosts []tare.CalendarHost) error {
	msg := fmt.Sprintf("no calendar samples of host %s in the last %d days in %s: start its calendar with tare check --every 5m --for 10s (or tare check cron)",
		name, days, tare.RedactText(where))
	if len(hosts) > 0 {
		var names []string
		for _, h := range hosts {
			names = append(names, fmt.Sprintf("%s (%d samples, last %s)", h.Host, h.Samples, h.Last.Local().Format("2006-01-02 15:04")))
		}
		msg += "; hosts with a calendar in this store (--host): " + strings.Join(names, ", ")
	}
	return tare.Errorf(tare.ENOTFOUND, "%s", msg)
}

func newCheckCronCmd() *cobra.Command {
	var (
		spec  = session.NewSpec(0, 0, 0)
		sf    storeFlags
		span  time.Duration
		every time.Duration
		log   string
	)
	cmd := &cobra.Command{
		Use:   "cron [--every 5m] [--for 10s]",
		Short: "Print a crontab line that keeps the host's calendar instead of a running tare check --every",
		Long: `Print a crontab line that runs tare check --record --for D every --every:
one sample of the host, stored in its calendar, the line appended to --log.
It keeps the same calendar as tare check --every, for those who would
rather cron start tare than keep it running. Add it with crontab -e. The
flags given here (--db, thresholds, --sched-probe) are passed on.

cron counts in minutes of the hour and hours of the day, so --every must
divide one of them: 1m to 30m (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30) or
1h to 24h (1, 2, 3, 4, 6, 8, 12, 24).`,
		Example: `  tare check cron --every 5m --for 10s >> my.crontab
  tare check cron --every 15m --db postgres://tare@db.internal/tare`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if span <= 0 {
				return tare.Errorf(tare.EINVALID, "--for must be a positive duration, like 10s; got %s", span)
			}
			if err := checkCalendarFlags(every, span, true, "", "", ""); err != nil {
				return err
			}
			when, err := cronEvery(every)
			if err != nil {
				return err
			}
			if _, err := spec.Judge.Judging(); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				exe = "tare"
			}
			args := []string{exe, "check", "--record", "--for", span.String()}
			cmd.Flags().Visit(func(f *pflag.Flag) {
				switch f.Name {
				case "every", "log", "for":
				default:
					if sv, ok := f.Value.(pflag.SliceValue); ok {
						for _, v := range sv.GetSlice() {
							args = append(args, "--"+f.Name, v)
						}
						return
					}
					args = append(args, "--"+f.Name, f.Value.String())
				}
			})
			if log == "" {
				log = filepath.Join(filepath.Dir(store.DefaultPath()), "check.log")
			}
			lines := []string{
				fmt.Sprintf("# tare check: the calendar of this host, a %s sample every %s (tare check history shows it)", span, every),
				when + " " + protocol.CronCommand(args, log),
			}
			for _, l := range lines {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), l); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&every, "every", 5*time.Minute, "how often to sample: minutes that divide an hour, or hours that divide a day")
	cmd.Flags().DurationVar(&span, "for", 10*time.Second, "how long each sample lasts")
	cmd.Flags().StringVar(&log, "log", "", "file the samples' lines are appended to (default: check.log beside the default store)")
	sf.register(cmd.Flags())
	bind(cmd.Flags(), spec.Host.Fields(), spec.Judge.Fields())
	return cmd
}

// cronEvery is the crontab schedule of a sample every every.
func cronEvery(every time.Duration) (string, error) {
	mins, hours := every/time.Minute, every/time.Hour
	switch {
	case every%time.Minute != 0:
	case every == time.Minute:
		return "* * * * *", nil
	case every < time.Hour && 60%mins == 0:
		return fmt.Sprintf("*/%d * * * *", mins), nil
	case every%time.Hour != 0:
	case every == 24*time.Hour:
		return "0 0 * * *", nil
	case every < 24*time.Hour && 24%hours == 0:
		return fmt.Sprintf("0 */%d * * *", hours), nil
	}
	return "", tare.Errorf(tare.EINVALID, "--every %s cannot be a crontab line: give minutes that divide an hour (1m, 2m, 3m, 4m, 5m, 6m, 10m, 12m, 15m, 20m, 30m) or hours that divide a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h)", every)
}
