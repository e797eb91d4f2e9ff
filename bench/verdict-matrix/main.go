// Command verdict-matrix runs every scenario of the verdict matrix
// (internal/testkit/scenario) several times with a freshly built tare, with the
// scheduler probe on (--sched-probe auto: blame measured where it runs)
// and off (blame estimated from the CPU shares, the latency signal on
// its tick rule), and prints a table of both columns: each scenario's
// score, the levels given, which rule the latency signal used, where the
// blame came from and, for a scenario judged by its tail, the run's p99
// over that of its own requests without the hogs; then the confusion matrix of the level each was
// expected to get against the level tare gave, and the accuracy, per
// column. The goal is every run right. A run the hypervisor's steal
// moved where it had to be clean is run again, as CI's gate does (five
// attempts at most), and counted apart. Scenarios marked pending
// (scenario.Scenario.Pending) are counted apart: CI's gate leaves them
// out until tare can promise them, and runs the probe-on column only.
// It needs the machine to itself: anything else busy on it is a
// neighbour, and the right verdict on that is polluted.
//
//	go run ./bench/verdict-matrix              # every scenario 5 times, probe on and off
//	go run ./bench/verdict-matrix -n 1 -v      # once, each run explained
//	go run ./bench/verdict-matrix -run vCPU    # only the scenarios whose name matches
//	go run ./bench/verdict-matrix -probe off   # the probe-off column only
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/scenario"
	"github.com/tare-dev/tare/judge"
)

func main() {
	n := flag.Int("n", 5, "runs of every scenario, in each column")
	verbose := flag.Bool("v", false, "print each run: what was wrong with a miss, and the tail signal's figures")
	only := flag.String("run", "", "run only the scenarios whose name matches this regular expression")
	probe := flag.String("probe", "both", "the columns: auto (tare's --sched-probe auto: blame measured where the scheduler probe runs, as root on a kernel with BTF), off (estimated), or both")
	flag.Parse()
	match, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "verdict-matrix: -run %q: %v\n", *only, err)
		os.Exit(2)
	}
	probes := map[string][]string{"both": {"auto", "off"}, "auto": {"auto"}, "off": {"off"}}[*probe]
	if probes == nil {
		fmt.Fprintf(os.Stderr, "verdict-matrix: -probe %q: want auto, off or both\n", *probe)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *n, *verbose, match, probes); err != nil {
		fmt.Fprintln(os.Stderr, "verdict-matrix:", err)
		os.Exit(1)
	}
}

// column is one setting of the scheduler probe: how its runs went.
type column struct {
	probe     string // tare's --sched-probe
	env       scenario.Env
	confusion map[[2]tare.Level]int
	right, total,
	pendingRight, pendingTotal int
}

// cell is what a column's runs of one scenario gave.
type cell struct {
	right, stolen              int // stolen: attempts run again, the hypervisor's steal having moved them
	given, rules, blame, tails []string
}

func run(ctx context.Context, n int, verbose bool, match *regexp.Regexp, probes []string) error {
	dir, err := os.MkdirTemp("", "verdict-matrix")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "tare")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tare").CombinedOutput(); err != nil {
		return fmt.Errorf("build tare: %v\n%s", err, out)
	}
	var columns []*column
	for _, probe := range probes {
		columns = append(columns, &column{probe: probe, env: envOf(bin, probe), confusion: map[[2]tare.Level]int{}})
	}

	score := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	heads := []string{"scenario", "want"}
	for _, c := range columns {
		p := "probe " + map[string]string{"auto": "on", "off": "off"}[c.probe]
		heads = append(heads, p+": right", "given", "latency rule", "blame", "p99×without")
	}
	fmt.Fprintln(score, strings.Join(heads, "\t"))
	var pending []string
	for _, sc := range scenario.Matrix() {
		if !match.MatchString(sc.Name) {
			continue
		}
		name, want := sc.Name, string(sc.Want)
		if sc.Pending != "" {
			name += " [pending]"
			pending = append(pending, fmt.Sprintf("  %s: %s", sc.Name, sc.Pending))
		}
		if sc.Tail != nil {
			want = fmt.Sprintf("by p99: polluted ≥%g×, clean <%g×", sc.Tail.Polluted, sc.Tail.Clean)
		}
		row := []string{name, want}
		for _, c := range columns {
			got, err := c.runs(ctx, sc, n, verbose)
			if err != nil {
				return err
			}
			right := fmt.Sprintf("%d/%d", got.right, len(got.given))
			if got.stolen > 0 {
				right += fmt.Sprintf(" (%d stolen, run again)", got.stolen)
			}
			row = append(row, right, strings.Join(got.given, " "),
				strings.Join(slices.Compact(slices.Sorted(slices.Values(got.rules))), " "), strings.Join(got.blame, " "), strings.Join(got.tails, " "))
		}
		fmt.Fprintln(score, strings.Join(row, "\t"))
	}
	score.Flush()

	for _, c := range columns {
		fmt.Printf("\nprobe %s (--sched-probe %s):\n", map[string]string{"auto": "on", "off": "off"}[c.probe], c.probe)
		c.print()
	}
	if len(pending) > 0 {
		fmt.Printf("\npending, left out of CI's gate until tare can promise them:\n%s\n", strings.Join(pending, "\n"))
	}
	return nil
}

// envOf runs the tare at bin with --sched-probe probe.
func envOf(bin, probe string) scenario.Env {
	return scenario.Env{
		Tare: func(ctx context.Context, args ...string) ([]byte, error) {
			args = append(args, "--sched-probe", probe)
			var out, errb bytes.Buffer
			c := exec.CommandContext(ctx, bin, args...)
			c.Stdout, c.Stderr = &out, &errb
			var exit *exec.ExitError
			if err := c.Run(); err != nil && !(errors.As(err, &exit) && exit.ExitCode() != 2) {
				return nil, fmt.Errorf("tare %s: %v\n%s", strings.Join(args, " "), err, errb.String())
			}
			return out.Bytes(), nil
		},
		Command: func(ctx context.Context, args ...string) *exec.Cmd { return exec.CommandContext(ctx, bin, args...) },
		Stderr:  os.Stderr,
	}
}

// attempts is how many times a run is tried when the hypervisor's steal
// moved a run of it that had to be clean (scenario.Outcome.StealMoved), as
// CI's gate tries: polluted is right on such an attempt, and says nothing
// of the scenario's. The last attempt counts whatever it says.
const attempts = 5

// runs runs sc n times in the column and counts them in it.
func (c *column) runs(ctx context.Context, sc scenario.Scenario, n int, verbose bool) (cell, error) {
	var got cell
	th := judge.DefaultThresholds()
	for i := range n {
		o, err := c.env.Run(ctx, sc)
		for try := 1; err == nil && try < attempts && o.StealMoved(sc, th); try++ {
			got.stolen++
			if verbose {
				fmt.Fprintf(os.Stderr, "%s, --sched-probe %s, run %d: the hypervisor's steal moved a run that had to be clean; run again\n", sc.Name, c.probe, i+1)
			}
			o, err = c.env.Run(ctx, sc)
		}
		if errors.Is(err, scenario.ErrSkip) {
			fmt.Fprintf(os.Stderr, "%s: skipped: %v\n", sc.Name, err)
			break
		}
		if err != nil {
			return cell{}, fmt.Errorf("%s, --sched-probe %s: %w", sc.Name, c.probe, err)
		}
		s := o.Summary
		c.confusion[[2]tare.Level{expected(sc, o), s.Verdict.Level}]++
		got.given = append(got.given, string(s.Verdict.Level))
		got.rules = append(got.rules, latencyRule(s))
		got.blame = append(got.blame, blameOf(s))
		if r := o.TailRatio(); r > 0 {
			got.tails = append(got.tails, fmt.Sprintf("%.1f(%.1f-%.1f)", r, o.Own.Lo, o.Own.Hi))
		}
		wrong := scenario.Check(sc, o)
		if len(wrong) == 0 {
			got.right++
		}
		if verbose {
			said := "right"
			if len(wrong) > 0 {
				said = strings.Join(wrong, "; ")
			}
			fmt.Fprintf(os.Stderr, "%s, --sched-probe %s, run %d: %s, %s%s%s\n", sc.Name, c.probe, i+1, s.Verdict.Level, said, fired(s), tailFigures(s))
		}
	}
	if sc.Pending != "" {
		c.pendingRight += got.right
		c.pendingTotal += len(got.given)
	} else {
		c.right += got.right
		c.total += len(got.given)
	}
	return got, nil
}

// expected is the level the run o of sc is counted as expected to get:
// of the levels it accepts (a scenario judged by its tail may accept
// two), the one given if it is one of them.
func expected(sc scenario.Scenario, o scenario.Outcome) tare.Level {
	levels := sc.Levels(o)
	switch {
	case slices.Contains(levels, o.Summary.Verdict.Level):
		return o.Summary.Verdict.Level
	case len(levels) > 0:
		return levels[0]
	}
	return sc.Want
}

// print prints the column's confusion matrix and accuracy.
func (c *column) print() {
	levels := []tare.Level{tare.Clean, tare.Suspect, tare.Polluted}
	m := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(m, "expected \\ given\tclean\tsuspect\tpolluted\t")
	for _, want := range levels {
		fmt.Fprintf(m, "%s\t", want)
		for _, got := range levels {
			fmt.Fprintf(m, "%d\t", c.confusion[[2]tare.Level{want, got}])
		}
		fmt.Fprintln(m)
	}
	m.Flush()
	if c.total > 0 {
		fmt.Printf("accuracy: %d of %d runs right (%.0f%%): level, signals, the neighbour named, the finding\n", c.right, c.total, 100*float64(c.right)/float64(c.total))
	}
	if c.pendingTotal > 0 {
		fmt.Printf("pending: %d of %d runs right\n", c.pendingRight, c.pendingTotal)
	}
}

// blameOf is where the run's blame came from, and the share of it behind
// other processes: "measured 51.2" or "estimated 3.1".
func blameOf(s tare.Summary) string {
	if s.Blame == nil {
		return "none"
	}
	return fmt.Sprintf("%s:%.1f", s.Blame.Source[:4], s.Blame.Others())
}

// tickRule is how the latency signal's tick rule begins its detail.
var tickRule = regexp.MustCompile(`^\d+ of \d+ ticks had a p95`)

// latencyRule is the rule the latency-without-queue signal used, as its
// detail says: "ticks" (the tick-level rule: a tick's p95 against the
// work in flight), "requests" (what each slow request overlapped), "-"
// when the run has no such signal.
func latencyRule(s tare.Summary) string {
	for _, sig := range s.Verdict.Signals {
		if sig.Name != judge.SignalLatencyAlone {
			continue
		}
		if tickRule.MatchString(sig.Detail) {
			return "ticks"
		}
		return "requests"
	}
	return "-"
}

// tailFigures is what the tail signal weighed in s, for a run's line:
// each slice's overlapped requests and their chance, and how many times
// the outside waits moved its percentile; "" where the probe did not run.
// fired names the signals that fired on s, findings marked: " (fired:
// tail finding, latency_without_queue)".
func fired(s tare.Summary) string {
	var names []string
	for _, sig := range s.Verdict.Signals {
		switch {
		case sig.Fired && sig.Finding:
			names = append(names, sig.Name+" finding")
		case sig.Fired:
			names = append(names, sig.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (fired: " + strings.Join(names, ", ") + ")"
}

func tailFigures(s tare.Summary) string {
	t := s.Tail
	if t == nil {
		return ""
	}
	var out []string
	for _, sl := range t.Slowest {
		moved := judge.MovedBy(&s, t, sl)
		if moved == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s %d/%d overlapped (of all %d/%d) p %.3g, ×%.2f without the waits",
			sl.Quantile(), sl.Overlapped, sl.Requests, t.Overlapped, t.Requests, sl.P, moved))
	}
	if len(out) == 0 {
		return ""
	}
	return " [tail: " + strings.Join(out, "; ") + "]"
}
