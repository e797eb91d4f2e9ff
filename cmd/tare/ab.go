package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/session"
	"github.com/tare-dev/tare/settings"
)

const abLong = `Did my change make it slower? Two runs one after the other cannot say on a
shared host: the host changes between them. tare ab loads two variants of
one service, A and B (two URLs: the old and the new build on two ports;
each with its own headers or Unix socket if need be; two model endpoints
with --as model), in short trials, and judges B against A over pairs of
them.

Interleaved (the default): each pair runs a trial of A and one of B, one
after the other, in a random order (--seed), A first in one of every two
pairs and B first in the other; both trials of a pair send the same
arrival schedule. A neighbour that slows both trials of a pair leaves
their ratio alone: pairing cancels the noise that falls on both alike.
--mode duet runs A and B at once, each at half the rate, so that they
share every second of the host's noise (the other variant's service is
then part of the system under test, not a neighbour). Reach for it when
the noise comes and goes faster than a pair: beside a CPU hog switched at
random every 0.2-3 s, 12 duet pairs on the p50 found a 10 % cost 9 times
in 10, where 36 interleaved pairs found it once in 4 (docs/verdict.md).

Each trial is a run of --trial (by default long enough for 300 requests
at --rate, at least 2s), measured and judged like tare run, and stored
unless --no-store. The pairs run until --trials, or, with --precision,
until the interval on the deciding metric is within ±precision. The A/B
run itself is stored too: tare runs list shows it (kind ab), tare runs
show ID prints it again, tare report ID draws its pairs.

The answer: B against A for p50, p95 and p99 (and a model's TTFT and TPOT
p95), each the geometric mean of the pairs' ratios B/A with the 95% interval
of a randomisation test over the pairs (the order within each pair is drawn
at random; 6 pairs at least bound it); and the result, decided on --on (p95):

  b_slower      the interval lies above 1: "B is slower: p95 +8.2 % (95 % CI
                +4.9 to +11.6 %)"
  b_faster      the interval lies below 1
  same          the interval lies within ±--tolerance: "no difference larger
                than 3 % at this noise"
  inconclusive  the interval holds 1 and reaches past the tolerance: it says
                about how many more pairs would resolve it

The summary says how many trials interference polluted on each side, and
in how many pairs it hit one side only (the noise pairing cannot cancel).

Exit status: 0 unless asked; --fail-on regression: 1 when the whole
interval of B/A lies above 1 + --tolerance, 3 when it reaches past it but
not wholly (inconclusive: run more pairs); 2 usage or runtime error.`

// abFlags are tare ab's own flags; the run's flags (the load, the host,
// the thresholds) are windowFlags'.
type abFlags struct {
	window         windowFlags
	store          storeFlags
	a, b           string
	aHeader        []string
	bHeader        []string
	aUnix, bUnix   string
	mode, on, as   string
	failOn         string
	trials         int
	trial          time.Duration
	precision, tol float64
}

// abOwnFlags are the run's flags tare ab takes in its own way, so it does
// not take them from windowFlags: --url (--a and --b), --fail-on
// (regression), --duration and --jobs (--trial), --stages.
var abOwnFlags = []string{"url", "fail-on", "duration", "jobs", "stages", "targets", "targets-order", "model", "queue"}

func newABCmd() *cobra.Command {
	var f abFlags
	cmd := &cobra.Command{
		Use:   "ab --a URL --b URL [flags]",
		Short: "A/B on a noisy host: two variants in interleaved trials, B against A with an interval",
		Long:  abLong,
		Example: `  # is the new build (port 8081) slower than the old (8080)? 20 pairs at 50/s
  tare ab --a http://127.0.0.1:8080/ --b http://127.0.0.1:8081/ --rate 50/s

  # a feature flag in a header; until p99 is known to ±3%, at most 60 pairs
  tare ab --a http://127.0.0.1:8080/ --b http://127.0.0.1:8080/ --b-header 'X-Feature: on' \
      --on p99 --precision 3 --trials 60

  # in CI: fail (exit 1) when B is slower than A by more than 5% beyond doubt
  tare ab --a http://127.0.0.1:8080/ --b http://127.0.0.1:8081/ --fail-on regression --tolerance 5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAB(cmd, &f) },
	}
	fs := cmd.Flags()
	all := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.window.register(all, arrival.Rate(50), 0, 0)
	all.VisitAll(func(fl *pflag.Flag) {
		if !slices.Contains(abOwnFlags, fl.Name) {
			fs.AddFlag(fl)
		}
	})
	f.window.fs = fs
	fs.Lookup("json").Usage = "print the " + tare.ABSchema + " JSON instead of the text"
	fs.Lookup("label").Usage = "a name for the A/B run: each trial is stored as LABEL/a1, LABEL/b1, …"
	fs.StringVar(&f.a, "a", "", "variant A: an HTTP target, like http://127.0.0.1:8080/path")
	fs.StringVar(&f.b, "b", "", "variant B: an HTTP target, like http://127.0.0.1:8081/path")
	fs.StringArrayVar(&f.aHeader, "a-header", nil, `a request header "Name: value" of A's requests only, after --header (repeatable)`)
	fs.StringArrayVar(&f.bHeader, "b-header", nil, `a request header "Name: value" of B's requests only, after --header (repeatable)`)
	fs.StringVar(&f.aUnix, "a-unix-socket", "", "the Unix socket A's connections go to, instead of --unix-socket")
	fs.StringVar(&f.bUnix, "b-unix-socket", "", "the Unix socket B's connections go to, instead of --unix-socket")
	fs.StringVar(&f.as, "as", "url", "what --a and --b are: url (HTTP targets) or model (OpenAI-compatible endpoints, like http://127.0.0.1:8089/v1: TTFT and TPOT compared too)")
	fs.StringVar(&f.mode, "mode", tare.ABInterleaved, "interleaved (A and B in turn, in short trials) or duet (both at once, each at half the rate)")
	fs.StringVar(&f.on, "on", "p95", "the metric that decides the result: p50, p95, p99, ttft_p95, tpot_p95, or unwaited_p50, unwaited_p95, unwaited_p99 (each request's latency less the waits behind other processes it overlapped, by the scheduler probe)")
	fs.IntVar(&f.trials, "trials", session.DefaultABPairs, "pairs of trials to run, at most")
	fs.DurationVar(&f.trial, "trial", 0, "each trial's arrival window (default: long enough for 300 requests at --rate, at least 2s)")
	fs.Float64Var(&f.precision, "precision", 0, "stop once the interval of B/A on --on is within ±this %, like 3 (0: run every pair of --trials)")
	fs.Float64Var(&f.tol, "tolerance", judge.DefaultABTolerance, "a difference of B against A, in %, within which they are the same, and beyond which --fail-on regression fails")
	fs.StringVar(&f.failOn, "fail-on", "", "regression: exit 1 when B is slower than A by more than --tolerance beyond doubt, 3 when the trials cannot tell")
	f.store.registerNoStore(fs)
	return cmd
}

func runAB(cmd *cobra.Command, f *abFlags) error {
	switch {
	case f.as != "url" && f.as != "model":
		return settings.Errorf("as", "must be url or model; got %q", f.as)
	case f.a == "" || f.b == "":
		return settings.Errorf("", "tare ab needs both variants: --a URL and --b URL, like --a http://127.0.0.1:8080/ --b http://127.0.0.1:8081/")
	case f.failOn != "" && f.failOn != "regression":
		return settings.Errorf("fail-on", "must be regression (tare ab fails on B slower than A); got %q", f.failOn)
	case f.trial < 0:
		return settings.Errorf("trial", "must be 0 (chosen from --rate) or more, like 5s; got %s", f.trial)
	case f.tol <= 0:
		return settings.Errorf("tolerance", "must be a percentage above 0, like 5; got %g", f.tol)
	}
	spec := f.window.spec
	spec.Load.RateDefault = !cmd.Flags().Changed("rate")
	spec.Load.Duration, spec.Load.DurationDefault, spec.Load.Jobs = f.trial, false, 0
	if f.trial == 0 {
		spec.Load.Duration = session.ABTrialLength(float64(spec.Load.Rate))
	}
	variant := func(url string, headers []string, unix string) *session.Spec {
		s := *spec
		s.Target.Headers = slices.Concat(spec.Target.Headers, headers)
		if f.as == "model" {
			s.Target.Model = url
		} else {
			s.Target.URL = url
		}
		if unix != "" {
			s.Target.UnixSocket = unix
		}
		return &s
	}
	ctx := cmd.Context()
	pa, err := session.Prepare(ctx, variant(f.a, f.aHeader, f.aUnix), "tare ab")
	if err != nil {
		return variantError(err, "a")
	}
	defer pa.Release()
	pb, err := session.Prepare(ctx, variant(f.b, f.bHeader, f.bUnix), "tare ab")
	if err != nil {
		return variantError(err, "b")
	}
	defer pb.Release()
	st, err := f.store.open(ctx)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	ab := session.AB{
		A: &session.Driver{Prepared: pa, Store: st, Version: version}, B: &session.Driver{Prepared: pb, Store: st, Version: version},
		Mode: f.mode, Pairs: f.trials, Precision: f.precision, On: f.on, Tolerance: f.tol, Seed: spec.Load.Seed,
		Run: tare.Run{Label: spec.Load.Label, Window: spec.Load.Window, Config: recorded(cmd.Flags(), nil)},
	}
	if !f.window.out.quiet {
		stderr := cmd.ErrOrStderr()
		ab.OnPair = func(p tare.ABPair, sofar *tare.AB) { fmt.Fprintln(stderr, report.ABPair(p, sofar)) }
	}
	result, err := ab.Measure(ctx)
	if err != nil {
		return err
	}
	if f.window.out.json {
		err = report.ABJSON(cmd.OutOrStdout(), &result)
	} else {
		err = report.ABText(cmd.OutOrStdout(), &result)
	}
	if err != nil || f.failOn == "" {
		return err
	}
	switch regressed, unsure := judge.ABRegression(&result, f.tol); {
	case regressed:
		return &exitError{code: exitSLO, reason: fmt.Sprintf("B is slower than A by more than %g %% (--fail-on regression): %s", f.tol, result.Verdict)}
	case unsure:
		return &exitError{code: exitInconclusive, reason: fmt.Sprintf("the trials cannot tell whether B is slower than A by more than %g %% (--fail-on regression): %s", f.tol, result.Verdict)}
	}
	return nil
}

// variantError is err, from preparing variant v's target, in tare ab's
// words: the variant named, and its URL's flag --a or --b, not --url or
// --model.
func variantError(err error, v string) error {
	msg := tare.ErrorMessage(err)
	for _, flag := range []string{"--url", "--model"} {
		if rest, ok := strings.CutPrefix(msg, flag); ok {
			msg = "--" + v + rest
		}
	}
	return &tare.Error{Code: tare.ErrorCode(err), Message: "variant " + strings.ToUpper(v) + ": " + msg, Err: err}
}
