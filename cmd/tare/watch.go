package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/store"
)

func newWatchCmd() *cobra.Command {
	var (
		hs            = session.NewSpec(0, 0, 0)
		out           outputFlags
		sf            storeFlags
		mf            metricsFlags
		label, window string
		results       string
	)
	cmd := &cobra.Command{
		Use:   "watch [flags] -- COMMAND [ARG...]",
		Short: "Judge the host's interference around any other load tool",
		Long: `Run any command (k6, vegeta, wrk, locust, a benchmark) and sample the host
from just before it starts to just after it ends: steal, CPU pressure,
throttling, and the run delay of the command and everything it starts (plus
--pid processes or a --container, such as the server under test). Then
print the host summary and the verdict for that window.

The window is stored like a run, its ticks with it (--no-store does not), and
its run id printed: tare runs show, tare compare and tare report take it.
With --results, the tool's results are stored as its raw records: tare runs
export gives them back, and tare report draws every request.

With --results FORMAT:PATH, tare reads the command's per-request results
once it has exited and puts them on the window's timeline as if tare had
sent the load: latency per tick, percentiles, clean-tick percentiles, the
verdict, and --slo. Formats: vegeta (vegeta attack's binary -output),
vegeta-json (vegeta encode), hey-csv (hey -o csv, whose offsets count from
the command's start) and jsonl, one JSON object per line for any other tool:

  {"timestamp": "2026-01-02T15:04:05.123Z", "latency_ms": 12.5, "status": 200}

(timestamp: RFC 3339 or seconds since the Unix epoch; status 0 when there
was none; an optional "error" marks a failure). No other tool gives tare
its schedule, so latencies start at the tool's own timestamp, and the
summary says where that hides queueing: hey is a closed loop (coordinated
omission), vegeta an open loop that hides it where its workers ran out
(stalls of its sends are found and reported). With one instant per
request, send lag and service time are not measured: they are null.

The command's own output passes through (to stderr when --json is given, so
stdout holds only the JSON). tare exits with the command's status, unless
--fail-on asks to fail on the verdict and the verdict fails.`,
		Example: `  tare watch -- wrk -t2 -c32 -d30s http://127.0.0.1:8080/
  tare watch --pid "$(pgrep -f my-server)" --json -- k6 run script.js > window.json
  tare watch --label checkout --window peak -- vegeta attack -duration 60s -targets t.txt
  tare watch --fail-on polluted -- go test -bench . ./...
  tare watch --results vegeta:r.bin --slo 'p99<=50ms' -- vegeta attack -rate 100 -duration 30s -targets t.txt -output r.bin
  tare watch --results hey-csv:r.csv -- sh -c 'hey -z 30s -o csv http://127.0.0.1:8080/ > r.csv'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := hs.Judge.Judging()
			if err != nil {
				return err
			}
			var spec *peer.Spec
			if results == "" {
				if err := hs.Judge.HostOnly("tare watch"); err != nil {
					return err
				}
			} else {
				sp, err := peer.ParseSpec(results)
				if err != nil {
					return session.Flagged(err, "results")
				}
				spec = &sp
			}
			if err := mf.check(); err != nil {
				return err
			}
			sampling, err := hs.Host.Sampling(os.Getpid())
			if err != nil {
				return err
			}
			if err := session.CheckWindow(window); err != nil {
				return err
			}
			// The store opens before the command starts: one that cannot be
			// written is an error before any load is sent.
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			if st != nil {
				defer st.Close()
			}
			child := exec.Command(args[0], args[1:]...)
			child.Stdin = cmd.InOrStdin()
			child.Stdout = cmd.OutOrStdout()
			if out.json {
				child.Stdout = cmd.ErrOrStderr()
			}
			child.Stderr = cmd.ErrOrStderr()
			if _, err := exec.LookPath(args[0]); err != nil {
				return tare.Errorf(tare.EINVALID, "cannot run %q: %w (is it installed and on PATH?)", args[0], errors.Unwrap(err))
			}

			proc := session.NewChild(child)
			run := tare.Run{Label: cmp.Or(label, "watch"), Window: window, Target: tare.RedactText(strings.Join(args, " ")),
				Version: version, Config: recorded(cmd.Flags(), nil)}
			if st != nil {
				run.ID = store.NewRunID()
			}
			sutBy, err := hs.Host.FindSUT(&sampling, "", "")
			if err != nil {
				return err
			}
			cfg, err := session.Window{Run: run, Sampling: sampling, SUTFoundBy: sutBy, Judging: j}.Config()
			if err != nil {
				return err
			}
			cfg.OnStart, cfg.Store = proc.OnStart(cmd.Context()), st
			if spec != nil {
				cfg.Run.Arrival, cfg.Results = spec.Arrival(), spec
			}
			end := mf.attach(cmd.Context(), &cfg, cmd.ErrOrStderr())
			s, ticks, storeErr, err := session.Observe(cmd.Context(), cfg, proc.Exited())
			status, waitErr := proc.Status()
			if err != nil {
				end(nil)
				return err
			}
			if waitErr != nil {
				return tare.Errorf(tare.EINVALID, "cannot run %q: %w", args[0], waitErr)
			}
			err = printSummary(cmd.OutOrStdout(), &s, out.json, ticks...)
			end(&s.Verdict)
			if err != nil {
				return err
			}
			if storeErr != nil {
				return storeErr
			}
			if err := verdictStatus(&s, j.FailOn); err != nil {
				return err
			}
			if status != 0 {
				return &exitError{code: status, reason: fmt.Sprintf("%s exited with status %d", args[0], status)}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	bind(cmd.Flags(), hs.Host.Fields(), hs.Judge.Fields())
	out.register(cmd.Flags())
	sf.registerNoStore(cmd.Flags())
	mf.register(cmd.Flags())
	cmd.Flags().StringVar(&label, "label", "", `a name for this window, stored and shown with it (default "watch")`)
	cmd.Flags().StringVar(&window, "window", "", "protocol window of this run: peak, offpeak or mid")
	cmd.Flags().StringVar(&results, "results", "", "FORMAT:PATH: the command's per-request results to judge, once it exits ("+peer.FormatNames()+"); makes --slo valid")
	return cmd
}
