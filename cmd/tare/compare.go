package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

const compareLong = `Put runs side by side: the same load at another hour should give the same
curve. Each argument is a stored run id (or a unique prefix of one), a
protocol id (all the complete runs of that protocol), or a tare.summary/v1
JSON file that tare run --json wrote.

For each run: requests, latency avg/p50/p95/p99, achieved rate, tokens/s, CPU
busy, steal mean and max, and the run's own verdict. Then the divergence of
each metric between the two runs furthest apart, |a − b| / min(a, b), and
the protocol verdict: above the threshold (30% by default) the host is the
variable and no scaling decision is valid from these runs.

With --slo the decision rules apply: peak over the SLO while off-peak meets
it → add headroom or move the workload; off-peak over it too → the problem
is the code. The capacity range gives the best case (off-peak), the worst
case (peak) and the typical case (mid), and the gap between best and worst:
the cost of shared infrastructure.

Stored runs carry their per-tick timeline: between every two windows a
Mann-Whitney test on per-tick p95 says whether the difference is beyond
chance, with a bootstrap interval for the difference of median tick p95.
Summary files keep no timeline, so they get no test.`

func newCompareCmd() *cobra.Command {
	var (
		sf        storeFlags
		slo       string
		threshold float64
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "compare RUN|PROTOCOL|FILE.json …",
		Short: "Compare runs or protocol windows: divergence, verdict, decision rules, capacity range",
		Long:  compareLong,
		Example: `  tare compare checkout                      # every window of protocol checkout
  tare compare 0193a1b2-4c01 0193a4f7-9d22   # two stored runs
  tare compare peak.json offpeak.json --slo 'p95<=2s'
  tare compare checkout --threshold 20 --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rules := judge.ProtocolRules{DivergencePct: threshold}
			if !(threshold > 0) {
				return tare.Errorf(tare.EINVALID, "--threshold must be a percentage above 0, like 30; got %g", threshold)
			}
			if slo != "" {
				s, err := judge.ParseSLO(slo)
				if err != nil {
					return session.Flagged(err, "slo")
				}
				rules.SLO = s
			}
			src := &session.Sources{Open: sf.open}
			defer src.Close()
			c, err := src.Compare(cmd.Context(), args, rules)
			if err != nil {
				return err
			}
			return printComparison(cmd.OutOrStdout(), c, asJSON)
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&slo, "slo", "", "check every window against this SLO, like p95<=2s, and apply the decision rules")
	cmd.Flags().Float64Var(&threshold, "threshold", judge.DefaultDivergencePct, "divergence (%) between windows above which the host is the variable")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tare.compare/v1 JSON")
	return cmd
}

func printComparison(w io.Writer, c *tare.Comparison, asJSON bool) error {
	if asJSON {
		return report.CompareJSON(w, c)
	}
	return report.CompareText(w, c)
}
