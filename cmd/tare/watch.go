package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	hostpkg "github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/store"
)

func newWatchCmd() *cobra.Command {
	var (
		host          hostFlags
		judge         judgeFlags
		sf            storeFlags
		label, window string
	)
	cmd := &cobra.Command{
		Use:   "watch [flags] -- COMMAND [ARG...]",
		Short: "Judge the host's interference around any other load tool",
		Long: `Run any command (k6, vegeta, wrk, locust, a benchmark) and sample the host
from just before it starts to just after it ends: steal, CPU pressure,
throttling, and the run delay of the command and everything it starts (plus
--pid processes, such as the server under test). Then print the host
summary and the verdict for that window.

The window is stored like a run, its ticks with it (--no-store does not), and
its run id printed: tare runs show, tare compare and tare report take it.

The command's own output passes through (to stderr when --json is given, so
stdout holds only the JSON). tare exits with the command's status, unless
--fail-on asks to fail on the verdict and the verdict fails.`,
		Example: `  tare watch -- wrk -t2 -c32 -d30s http://127.0.0.1:8080/
  tare watch --pid "$(pgrep -f my-server)" --json -- k6 run script.js > window.json
  tare watch --label checkout --window peak -- vegeta attack -duration 60s -targets t.txt
  tare watch --fail-on polluted -- go test -bench . ./...`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := judge.judging()
			if err != nil {
				return err
			}
			if err := judge.hostOnly("tare watch"); err != nil {
				return err
			}
			sampling, err := host.config(os.Getpid())
			if err != nil {
				return err
			}
			if err := checkWindow(window); err != nil {
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
			if judge.json {
				child.Stdout = cmd.ErrOrStderr()
			}
			child.Stderr = cmd.ErrOrStderr()
			if _, err := exec.LookPath(args[0]); err != nil {
				return tare.Errorf(tare.EINVALID, "cannot run %q: %w (is it installed and on PATH?)", args[0], errors.Unwrap(err))
			}

			exited := make(chan struct{})
			var waitErr error
			start := func(sampler *hostpkg.Sampler) {
				if err := child.Start(); err != nil {
					waitErr = err
					close(exited)
					return
				}
				// The load tool and what it starts are tare's side of the test.
				sampler.AddTareTree(child.Process.Pid)
				go func() {
					waitErr = child.Wait()
					close(exited)
				}()
				go func() {
					// Ctrl-C reaches the command from the terminal too; a
					// SIGTERM to tare is passed on. Either way we wait for it.
					select {
					case <-cmd.Context().Done():
						child.Process.Signal(syscall.SIGTERM)
					case <-exited:
					}
				}()
			}
			run := tare.Run{Label: orDefault(label, "watch"), Window: window, Target: tare.RedactText(strings.Join(args, " ")),
				Version: version, Config: redactedConfig(cmd)}
			if st != nil {
				run.ID = store.NewRunID()
			}
			sutBy, err := host.findSUT(&sampling, "")
			if err != nil {
				return err
			}
			s, ticks, err := observe(cmd.Context(), sampling, sutBy, j, run, exited, nil, start)
			<-exited
			if err != nil {
				return err
			}
			status := 0
			var exitErr *exec.ExitError
			switch {
			case errors.As(waitErr, &exitErr):
				status = exitErr.ExitCode()
				if status < 0 {
					status = 128 + int(exitErr.Sys().(syscall.WaitStatus).Signal())
				}
			case waitErr != nil:
				return tare.Errorf(tare.EINVALID, "cannot run %q: %w", args[0], waitErr)
			}
			out := newSink(cmd.Context(), st, s.Run, s.Env)
			out.addTicks(ticks)
			storeErr := out.finish(&s)
			if err := printSummary(cmd.OutOrStdout(), &s, judge.json, ticks...); err != nil {
				return err
			}
			if storeErr != nil {
				return storeErr
			}
			if err := verdictStatus(&s, j.failOn); err != nil {
				return err
			}
			if status != 0 {
				return &exitError{code: status, reason: fmt.Sprintf("%s exited with status %d", args[0], status)}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	host.register(cmd.Flags())
	judge.register(cmd.Flags())
	sf.registerNoStore(cmd.Flags())
	cmd.Flags().StringVar(&label, "label", "", `a name for this window, stored and shown with it (default "watch")`)
	cmd.Flags().StringVar(&window, "window", "", "protocol window of this run: peak, offpeak or mid")
	return cmd
}
