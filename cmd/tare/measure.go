package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

// Exit statuses of --fail-on: a failed SLO on a run that describes the
// code, and a measurement that cannot be trusted (rerun, do not file a
// regression).
const (
	exitSLO          = 1
	exitInconclusive = 3
)

// verdictStatus turns the verdict into the exit status --fail-on asks for.
func verdictStatus(s *tare.Summary, failOn string) error {
	v := s.Verdict
	switch failOn {
	case "polluted":
		if v.Level == tare.Polluted {
			return &exitError{code: exitInconclusive, reason: "verdict polluted (--fail-on polluted): the measurement is inconclusive, rerun it"}
		}
	case "suspect":
		switch {
		case v.Level == tare.Suspect && judge.NoService(v):
			return &exitError{code: exitInconclusive, reason: "verdict suspect (--fail-on suspect): no request succeeded, check the target before rerunning"}
		case v.Level != tare.Clean:
			return &exitError{code: exitInconclusive, reason: fmt.Sprintf("verdict %s (--fail-on suspect): the measurement is inconclusive, rerun it", v.Level)}
		}
	case "slo":
		switch {
		case judge.Met(v.SLO):
		case v.Level == tare.Polluted:
			return &exitError{code: exitInconclusive, reason: "SLO not met, on a polluted run (--fail-on slo): the measurement is inconclusive, rerun it before deciding"}
		default:
			return &exitError{code: exitSLO, reason: "SLO not met (--fail-on slo)"}
		}
	}
	return nil
}

// printSummary writes the summary as text or JSON; the text draws
// sparklines of the ticks, when given.
func printSummary(w io.Writer, s *tare.Summary, asJSON bool, ticks ...tare.Tick) error {
	if asJSON {
		return report.JSON(w, s)
	}
	return report.Text(w, s, ticks...)
}

// measureAndReport runs the measurement, prints its summary and returns the
// exit status: a store failure (exit 2) after the summary is printed, else
// what --fail-on asks of the verdict. With --metrics-listen the figures are
// served while it runs, and the verdict until Prometheus has scraped it
// (or --metrics-linger), after the summary is printed.
func measureAndReport(cmd *cobra.Command, cfg session.Config, mf *metricsFlags, failOn string, asJSON bool) error {
	end := mf.attach(cmd.Context(), &cfg, cmd.ErrOrStderr())
	s, ticks, storeErr, err := session.Measure(cmd.Context(), cfg)
	if err != nil {
		end(nil)
		return err
	}
	err = printSummary(cmd.OutOrStdout(), &s, asJSON, ticks...)
	end(&s.Verdict)
	if err != nil {
		return err
	}
	if storeErr != nil {
		return storeErr
	}
	return verdictStatus(&s, failOn)
}
