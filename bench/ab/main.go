// Command ab measures tare ab on this machine against the method it
// replaces, two back-to-back runs judged by tare compare, on the same
// noise: a CPU hog beside the services, switched on and off at random.
// It prints:
//
//   - the false-difference rate: A and B two identical services, the
//     share of repetitions in which tare ab says B differs (b_slower or
//     b_faster), and in which tare compare says back-to-back runs of them
//     differ (host-variable), or that their percentile (-on, p95 by default) differs beyond its
//     interval;
//   - the detection rate: B with about 10 % more work per request than A,
//     the share in which tare ab finds B slower, and in which its
//     interval covers the added work's ratio, 1.10;
//   - the interval width on the same noise: how much the estimate of B/A
//     on it spreads over the repetitions, back-to-back against
//     interleaved, as a ratio (and the median widths of the intervals each
//     method reports).
//
// Run it from the repository's root:
//
//	go run ./bench/ab                    # 40 repetitions: a minute or two each on a quiet machine
//	go run ./bench/ab -reps 5 -pairs 4
//
// The services are loopback HTTP servers in this process whose every
// answer costs a fixed amount of CPU work (internal/testkit/abservice);
// tare runs as a separate process, built from this checkout.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/abservice"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
	"gonum.org/v1/gonum/stat"
)

// config is one benchmark's settings.
type config struct {
	reps, pairs int
	trial       time.Duration
	rate        int     // per second
	serviceMS   float64 // A's CPU work per request
	addedPct    float64 // B's extra work, % of A's
	seed        uint64
	hogs        int    // CPU hogs switched on and off together
	mode        string // tare ab's --mode: interleaved or duet
	on          string // tare ab's --on: the percentile it decides on
}

// outcome is what one repetition measured.
type outcome struct {
	abSame, abAdded    tare.AB
	compareLevel       string   // tare compare's verdict on the back-to-back runs of A and A′
	compareSignificant bool     // its test on requests: the interval of the percentile excludes 1
	compareRatio       *float64 // B/A on the percentile, back-to-back
	compareWidth       *float64 // the width of its interval (of B/A)
}

func main() {
	var c config
	flag.IntVar(&c.reps, "reps", 40, "repetitions")
	flag.IntVar(&c.pairs, "pairs", 6, "trial pairs of each tare ab")
	flag.DurationVar(&c.trial, "trial", time.Second, "each trial's length; a back-to-back run lasts pairs × trial")
	flag.IntVar(&c.rate, "rate", 100, "requests per second")
	flag.Float64Var(&c.serviceMS, "service", 2, "A's CPU work per request, ms on a quiet CPU")
	flag.Float64Var(&c.addedPct, "added", 10, "B's added cost, % of A's work")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the hog's switching and of tare ab")
	flag.IntVar(&c.hogs, "hogs", 1, "CPU hogs beside the services, switched on and off together at random")
	flag.StringVar(&c.on, "on", "p95", "tare ab's --on: the percentile it decides on and the rates are of (p50, p95 or p99)")
	flag.StringVar(&c.mode, "mode", "interleaved", "tare ab's --mode: interleaved (A and B in turn) or duet (at once, half the rate each)")
	flag.Parse()
	if err := benchmark(context.Background(), c); err != nil {
		log.Fatal(err)
	}
}

// benchmark runs c and prints its rates.
func benchmark(ctx context.Context, c config) error {
	tareBin, err := buildTare()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(tareBin))
	res, err := run(ctx, c, tareBin, func(i int, o outcome) {
		fmt.Fprintf(os.Stderr, "rep %d: identical %s (%s), added %s (%s), back-to-back %s\n", i+1,
			o.abSame.Result, o.abSame.Verdict, o.abAdded.Result, o.abAdded.Verdict, o.compareLevel)
	})
	if err != nil {
		return err
	}
	res.print(os.Stdout, c)
	return nil
}

// results sums the repetitions.
type results struct {
	outcomes []outcome
	trueCost float64 // B's work over A's: what B/A on the metric tends to, a little under it
	metric   string  // the percentile judged: p50, p95 or p99
}

// run runs c.reps repetitions with the hog switching beside them, each
// reported to each.
func run(ctx context.Context, c config, tareBin string, each func(int, outcome)) (*results, error) {
	units := abservice.UnitsFor(time.Duration(c.serviceMS * float64(time.Millisecond)))
	added := int(float64(units) * (1 + c.addedPct/100))
	a, a2, b := abservice.Start(units), abservice.Start(units), abservice.Start(added)
	defer a.Close()
	defer a2.Close()
	defer b.Close()
	db := filepath.Join(os.TempDir(), fmt.Sprintf("tare-bench-ab-%d.db", os.Getpid()))
	defer os.Remove(db)
	env := append(os.Environ(), "TARE_DB="+db)
	res := &results{trueCost: 1 + c.addedPct/100, metric: c.metric()}
	stop, err := switchHogs(c.hogs, c.seed)
	if err != nil {
		return nil, err
	}
	defer stop()
	for i := range c.reps {
		var o outcome
		var err error
		seed := c.seed + uint64(i)*1000
		if o.abSame, err = tareAB(ctx, tareBin, env, c, url(a), url(a2), seed); err != nil {
			return nil, err
		}
		if o.abAdded, err = tareAB(ctx, tareBin, env, c, url(a), url(b), seed); err != nil {
			return nil, err
		}
		if err := backToBack(ctx, tareBin, env, c, url(a), url(a2), &o); err != nil {
			return nil, err
		}
		res.outcomes = append(res.outcomes, o)
		if each != nil {
			each(i, o)
		}
	}
	return res, nil
}

func url(s *httptest.Server) string { return s.URL + "/" }

// tareAB runs tare ab between a and b and reads its JSON.
func tareAB(ctx context.Context, tareBin string, env []string, c config, a, b string, seed uint64) (tare.AB, error) {
	var ab tare.AB
	out, err := tareJSON(ctx, tareBin, env, "ab", "--a", a, "--b", b, "--rate", fmt.Sprintf("%d/s", c.rate),
		"--trial", c.trial.String(), "--trials", strconv.Itoa(c.pairs), "--mode", cmp.Or(c.mode, "interleaved"), "--on", c.metric(), "--seed", strconv.FormatUint(seed, 10), "--no-store", "--quiet")
	if err != nil {
		return ab, err
	}
	if err := json.Unmarshal(out, &ab); err != nil {
		return ab, fmt.Errorf("read tare ab's json: %w", err)
	}
	return ab, nil
}

// backToBack runs a, then b, each for as long as a tare ab's pairs of
// trials of one side, stored, and judges them with tare compare.
func backToBack(ctx context.Context, tareBin string, env []string, c config, a, b string, o *outcome) error {
	length := time.Duration(c.pairs) * c.trial
	var ids []string
	for _, u := range []string{a, b} {
		out, err := tareJSON(ctx, tareBin, env, "run", "--url", u, "--rate", fmt.Sprintf("%d/s", c.rate), "--duration", length.String(), "--quiet")
		if err != nil {
			return err
		}
		var s tare.Summary
		if err := json.Unmarshal(out, &s); err != nil {
			return fmt.Errorf("read tare run's json: %w", err)
		}
		ids = append(ids, s.Run.ID)
	}
	out, err := tareJSON(ctx, tareBin, env, "compare", ids[0], ids[1])
	if err != nil {
		return err
	}
	var comparison tare.Comparison
	if err := json.Unmarshal(out, &comparison); err != nil {
		return fmt.Errorf("read tare compare's json: %w", err)
	}
	o.compareLevel = string(comparison.Verdict.Level)
	for _, t := range comparison.Tests {
		if t.Requests == nil {
			continue
		}
		for _, m := range t.Requests.Metrics {
			if m.Metric != c.metric() || m.Ratio == nil || m.RatioLow == nil || m.RatioHigh == nil {
				continue
			}
			// compare's ratio is a/b, its a the first run: B/A is its inverse.
			inv, width := 1 / *m.Ratio, 1 / *m.RatioLow - 1 / *m.RatioHigh
			o.compareRatio, o.compareWidth, o.compareSignificant = &inv, &width, m.Significant
		}
	}
	return nil
}

// tareJSON runs tare with args and --json, and returns its stdout; an
// exit status other than 0 is an error, with its stderr.
func tareJSON(ctx context.Context, tareBin string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tareBin, append(args, "--json")...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tare %v: %w", args, err)
	}
	return out, nil
}

// buildTare builds tare from this checkout into a temporary directory.
func buildTare() (string, error) {
	dir, err := os.MkdirTemp("", "tare-bench-ab")
	if err != nil {
		return "", fmt.Errorf("make a directory for tare: %w", err)
	}
	return buildTareIn(dir)
}

// buildTareIn builds tare from this checkout into dir.
func buildTareIn(dir string) (string, error) {
	bin := filepath.Join(dir, "tare")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tare-dev/tare/cmd/tare").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tare: %w\n%s", err, out)
	}
	return bin, nil
}

// switchHogs starts n CPU hogs and stops and continues them together at
// random (on and off for 0.2 to 3 s each, seeded); stop kills them and
// waits until they are gone.
func switchHogs(n int, seed uint64) (stop func(), err error) {
	var hogs []*exec.Cmd
	signal := func(s syscall.Signal) {
		for _, h := range hogs {
			_ = h.Process.Signal(s)
		}
	}
	kill := func() {
		signal(syscall.SIGKILL)
		for _, h := range hogs {
			_ = h.Wait()
		}
	}
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			kill()
			return nil, fmt.Errorf("start a CPU hog: %w", err)
		}
		hogs = append(hogs, cmd)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer kill()
		rng := rand.New(rand.NewPCG(seed, 0x686f67)) // "hog"
		for on := true; ; on = !on {
			select {
			case <-quit:
				return
			case <-time.After(time.Duration((0.2 + 2.8*rng.Float64()) * float64(time.Second))):
			}
			if on {
				signal(syscall.SIGSTOP)
			} else {
				signal(syscall.SIGCONT)
			}
		}
	}()
	return func() { close(quit); <-done }, nil
}

// metric is the percentile tare ab decides on, and the rates are of.
func (c config) metric() string { return cmp.Or(c.on, "p95") }

// rates are the figures the benchmark prints.
type rates struct {
	reps                                 int
	abFalse, compareFalse, compareMetric float64 // shares of repetitions, identical services
	abDetected, abCovered                float64 // shares, B with the added cost
	spreadAB, spreadBackToBack           float64 // sd of log B/A on the percentile over the repetitions, identical services
	widthAB, widthBackToBack             float64 // median interval widths as reported
}

func (res *results) rates() rates {
	var out rates
	var logsAB, logsB2B, widthsAB, widthsB2B []float64
	for _, o := range res.outcomes {
		out.reps++
		if o.abSame.Result == tare.ABSlower || o.abSame.Result == tare.ABFaster {
			out.abFalse++
		}
		if o.compareLevel == string(tare.HostVariable) {
			out.compareFalse++
		}
		if o.compareSignificant {
			out.compareMetric++
		}
		if o.abAdded.Result == tare.ABSlower {
			out.abDetected++
		}
		// The true cost is what B adds to a request's work; the latency
		// holds a little more than the work (the HTTP round trip), so the
		// latencies' ratio is a little under it.
		if r := judge.ABRatioOn(&o.abAdded, res.metric); r != nil && r.RatioLow != nil && *r.RatioLow <= res.trueCost && res.trueCost <= *r.RatioHigh {
			out.abCovered++
		}
		if r := judge.ABRatioOn(&o.abSame, res.metric); r != nil && r.Ratio != nil {
			logsAB = append(logsAB, math.Log(*r.Ratio))
			if r.RatioLow != nil {
				widthsAB = append(widthsAB, *r.RatioHigh-*r.RatioLow)
			}
		}
		if o.compareRatio != nil {
			logsB2B = append(logsB2B, math.Log(*o.compareRatio))
			widthsB2B = append(widthsB2B, *o.compareWidth)
		}
	}
	n := float64(max(out.reps, 1))
	out.abFalse, out.compareFalse, out.compareMetric = out.abFalse/n, out.compareFalse/n, out.compareMetric/n
	out.abDetected, out.abCovered = out.abDetected/n, out.abCovered/n
	out.spreadAB, out.spreadBackToBack = sd(logsAB), sd(logsB2B)
	out.widthAB, out.widthBackToBack = stats.Median(widthsAB), stats.Median(widthsB2B)
	return out
}

// sd is the sample standard deviation of v; NaN with fewer than 2.
func sd(v []float64) float64 {
	if len(v) < 2 {
		return math.NaN()
	}
	return stat.StdDev(v, nil)
}

// print writes the rates.
func (res *results) print(w *os.File, c config) {
	r := res.rates()
	fmt.Fprintf(w, "tare ab against back-to-back runs, %d repetitions, a CPU hog (%d) switched on and off at random beside\n", r.reps, c.hogs)
	fmt.Fprintf(w, "each tare ab: %d pairs of %s trials at %d/s, %s; each back-to-back run %s at %d/s; service %.1fms of CPU\n\n",
		c.pairs, c.trial, c.rate, cmp.Or(c.mode, "interleaved"), time.Duration(c.pairs)*c.trial, c.rate, c.serviceMS)
	fmt.Fprintf(w, "identical A and B, says B differs:\n")
	fmt.Fprintf(w, "  tare ab (b_slower or b_faster on %s)         %5.1f %%\n", res.metric, 100*r.abFalse)
	fmt.Fprintf(w, "  tare compare, back-to-back (host-variable)    %5.1f %%\n", 100*r.compareFalse)
	fmt.Fprintf(w, "  tare compare, back-to-back (%s interval)     %5.1f %%\n", res.metric, 100*r.compareMetric)
	fmt.Fprintf(w, "B with %.0f %% added work:\n", c.addedPct)
	fmt.Fprintf(w, "  tare ab finds B slower                        %5.1f %%\n", 100*r.abDetected)
	fmt.Fprintf(w, "  its %s interval covers %.2f                  %5.1f %%\n", res.metric, res.trueCost, 100*r.abCovered)
	fmt.Fprintf(w, "spread of the %s estimate of B/A over repetitions (sd of log), identical A and B:\n", res.metric)
	mode := cmp.Or(c.mode, "interleaved")
	fmt.Fprintf(w, "  tare ab %s %.4f, back-to-back %.4f: back-to-back %.1fx wider\n",
		mode, r.spreadAB, r.spreadBackToBack, r.spreadBackToBack/r.spreadAB)
	fmt.Fprintf(w, "median width of the reported %s interval of B/A: tare ab %s %.3f, back-to-back (on requests) %.3f\n",
		res.metric, mode, r.widthAB, r.widthBackToBack)
	fmt.Fprintf(w, "\ntare ab on each metric, as if decided on it (--on):\n")
	fmt.Fprintf(w, "  %-13s %6s %13s %9s %8s %14s %14s\n", "metric", "reps", "identical:", "added:", "covers", "median B/A,", "median width,")
	fmt.Fprintf(w, "  %-13s %6s %13s %9s %8s %14s %14s\n", "", "", "differs", "slower", fmt.Sprintf("%.2f", res.trueCost), "added", "identical")
	for _, m := range res.metrics() {
		fmt.Fprintf(w, "  %-13s %6d %11.1f %% %7.1f %% %6.1f %% %14.3f %14.3f\n",
			m.metric, m.reps, 100*m.differs, 100*m.slower, 100*m.covers, m.ratioAdded, m.widthSame)
	}
}

// metricRates are the rates of tare ab on one metric, as if it had been
// decided on it: the result is the interval's side of 1.
type metricRates struct {
	metric                  string
	reps                    int     // repetitions with the metric's interval on both runs
	differs, slower, covers float64 // shares of them
	ratioAdded, widthSame   float64 // medians
}

// metrics are the rates of every metric the runs of tare ab gave an
// interval for.
func (res *results) metrics() []metricRates {
	var out []metricRates
	for _, m := range tare.ABMetrics {
		mr := metricRates{metric: m}
		var ratios, widths []float64
		for _, o := range res.outcomes {
			same, added := judge.ABRatioOn(&o.abSame, m), judge.ABRatioOn(&o.abAdded, m)
			if same == nil || added == nil || same.RatioLow == nil || added.RatioLow == nil {
				continue
			}
			mr.reps++
			if *same.RatioLow > 1 || *same.RatioHigh < 1 {
				mr.differs++
			}
			if *added.RatioLow > 1 {
				mr.slower++
			}
			if *added.RatioLow <= res.trueCost && res.trueCost <= *added.RatioHigh {
				mr.covers++
			}
			ratios, widths = append(ratios, *added.Ratio), append(widths, *same.RatioHigh-*same.RatioLow)
		}
		if mr.reps == 0 {
			continue
		}
		n := float64(mr.reps)
		mr.differs, mr.slower, mr.covers = mr.differs/n, mr.slower/n, mr.covers/n
		mr.ratioAdded, mr.widthSame = stats.Median(ratios), stats.Median(widths)
		out = append(out, mr)
	}
	return out
}
