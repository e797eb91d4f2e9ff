package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
)

const compareLong = `Put runs side by side: the same load at another hour should give the same
curve. Each argument is a stored run id (or a unique prefix of one), a
protocol id (all the complete runs of that protocol), a tare.summary/v1
JSON file that tare run --json wrote, or a file of the raw JSONL records
that tare runs export wrote.

For each run: requests, latency avg/p50/p95/p99, achieved rate, tokens/s, CPU
busy, steal, the run's own verdict, and its side of the whose-CPU ledger:
tare's send lag, the neighbours' CPU and the busiest of them, how long the
service waited behind them, the service's CPU per request.

Then the divergence of each metric between the two runs furthest apart,
|a − b| / min(a, b), and whether it counts. A divergence above the
threshold (30% by default) counts only beyond noise and above the latency
floor: the runs' requests are tested (Mann-Whitney U on every latency, and
the ratio of avg, p50, p95 and p99 with a bootstrap interval, all the
intervals holding together at 95%), the interval must exclude no
difference, and the figures must differ by more than the floor (the runs'
own --latency-floor, 1ms by default): 300% between 0.2ms and 0.8ms is
scheduler noise. The protocol verdict:

  host-variable   a divergence counts: no scaling decision is valid
  inconclusive    one is above the threshold and the floor, but on too few
                  requests to tell: it says how many to run a window
  reproducible    the figures describe the code

Summary files keep no records: their divergences are not tested, and count
on the threshold and the floor alone (compare exported records instead).

The capacity range gives the best, worst and typical figure as measured,
each with the window it came from, for p50, p95 and p99, and the gap
between best and worst: the cost of shared infrastructure. Off-peak is
expected to be the best and peak the worst; where they were not, beyond
noise, that is a finding about the host, and it is said. What changed sets
each window's whose-CPU ledger against the quietest window's and names the
difference: a neighbour present in one window and not the other, steal,
throttling, the wait behind neighbours, tare's own lateness, the service's
CPU per request (more of it is the code or its data, not the host).

With --slo the decision rules apply: peak over the SLO while off-peak meets
it → add headroom or move the workload; off-peak over it too → the problem
is the code.

Stored runs carry their per-tick timeline too: between every two windows a
Mann-Whitney test on per-tick p95, with a bootstrap interval for the
difference of median tick p95.`

func newCompareCmd() *cobra.Command {
	var (
		sf        storeFlags
		slo       string
		threshold float64
		floor     time.Duration
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "compare RUN|PROTOCOL|FILE.json …",
		Short: "Compare runs or protocol windows: divergence, verdict, decision rules, capacity range",
		Long:  compareLong,
		Example: `  tare compare checkout                      # every window of protocol checkout
  tare compare 0193a1b2-4c01 0193a4f7-9d22   # two stored runs
  tare compare peak.json offpeak.json --slo 'p95<=2s'
  tare compare main.jsonl branch.jsonl       # records from tare runs export: tested
  tare compare checkout --threshold 20 --json
  tare compare checkout --latency-floor 5ms    # differences under 5ms are noise here`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rules := judge.ProtocolRules{DivergencePct: threshold, LatencyFloor: floor}
			if !(threshold > 0) {
				return tare.Errorf(tare.EINVALID, "--threshold must be a percentage above 0, like 30; got %g", threshold)
			}
			if floor < 0 {
				return tare.Errorf(tare.EINVALID, "--latency-floor must be 0 (the runs' own) or a duration, like 1ms; got %s", floor)
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
	cmd.Flags().DurationVar(&floor, "latency-floor", 0, "smallest difference of latency between windows that can be a host effect, like 1ms (default: the largest the runs' verdicts used, else 1ms)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tare.compare/v1 JSON")
	return cmd
}

func printComparison(w io.Writer, c *tare.Comparison, asJSON bool) error {
	if asJSON {
		return report.CompareJSON(w, c)
	}
	return report.CompareText(w, c)
}
