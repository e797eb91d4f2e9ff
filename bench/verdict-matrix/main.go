// Command verdict-matrix runs every scenario of the verdict matrix
// (internal/testkit/scenario) several times with a freshly built tare, and prints
// the confusion matrix of the level each was expected to get against the
// level tare gave, each scenario's score, and the accuracy. The goal is
// every run right. Scenarios marked pending (scenario.Scenario.Pending)
// are counted apart: CI's gate leaves them out until tare can promise
// them. It needs the machine to itself: anything else busy on
// it is a neighbour, and the right verdict on that is polluted.
//
//	go run ./bench/verdict-matrix              # every scenario 5 times
//	go run ./bench/verdict-matrix -n 1 -v      # once, with every miss explained
//	go run ./bench/verdict-matrix -run vCPU    # only the scenarios whose name matches
//	go run ./bench/verdict-matrix -probe off   # blame estimated, never measured
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
	"strings"
	"text/tabwriter"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/scenario"
)

func main() {
	n := flag.Int("n", 5, "runs of every scenario")
	verbose := flag.Bool("v", false, "print what was wrong with every miss")
	only := flag.String("run", "", "run only the scenarios whose name matches this regular expression")
	probe := flag.String("probe", "auto", "tare's --sched-probe: auto measures blame where the scheduler probe runs (root, a kernel with BTF), off estimates it")
	flag.Parse()
	match, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "verdict-matrix: -run %q: %v\n", *only, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *n, *verbose, match, *probe); err != nil {
		fmt.Fprintln(os.Stderr, "verdict-matrix:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, verbose bool, match *regexp.Regexp, probe string) error {
	dir, err := os.MkdirTemp("", "verdict-matrix")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "tare")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tare").CombinedOutput(); err != nil {
		return fmt.Errorf("build tare: %v\n%s", err, out)
	}
	env := scenario.Env{
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

	levels := []tare.Level{tare.Clean, tare.Suspect, tare.Polluted}
	confusion := map[[2]tare.Level]int{}
	score := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(score, "scenario\twant\tright\tgiven\tblame")
	var right, total, pendingRight, pendingTotal int
	var pending []string
	for _, sc := range scenario.Matrix() {
		if !match.MatchString(sc.Name) {
			continue
		}
		ok := 0
		var given, blame []string
		for i := range n {
			s, err := env.Run(ctx, sc)
			if errors.Is(err, scenario.ErrSkip) {
				fmt.Fprintf(os.Stderr, "%s: skipped: %v\n", sc.Name, err)
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", sc.Name, err)
			}
			confusion[[2]tare.Level{sc.Want, s.Verdict.Level}]++
			given = append(given, string(s.Verdict.Level))
			blame = append(blame, blameOf(s))
			wrong := scenario.Check(sc, s)
			if len(wrong) == 0 {
				ok++
			} else if verbose {
				fmt.Fprintf(os.Stderr, "%s, run %d: %s\n", sc.Name, i+1, strings.Join(wrong, "; "))
			}
		}
		name := sc.Name
		if sc.Pending != "" {
			name += " [pending]"
			pending = append(pending, fmt.Sprintf("  %s: %s", sc.Name, sc.Pending))
			pendingRight += ok
			pendingTotal += len(given)
		} else {
			right += ok
			total += len(given)
		}
		fmt.Fprintf(score, "%s\t%s\t%d/%d\t%s\t%s\n", name, sc.Want, ok, len(given), strings.Join(given, " "), strings.Join(blame, " "))
	}
	score.Flush()

	fmt.Println()
	m := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(m, "expected \\ given\tclean\tsuspect\tpolluted\t")
	for _, want := range levels {
		fmt.Fprintf(m, "%s\t", want)
		for _, got := range levels {
			fmt.Fprintf(m, "%d\t", confusion[[2]tare.Level{want, got}])
		}
		fmt.Fprintln(m)
	}
	m.Flush()
	if total > 0 {
		fmt.Printf("\naccuracy: %d of %d runs right (%.0f%%): level, signals, the neighbour named (CI's gate, TestVerdictMatrix)\n", right, total, 100*float64(right)/float64(total))
	}
	if pendingTotal > 0 {
		fmt.Printf("pending: %d of %d runs right, of scenarios CI's gate leaves out until tare can promise them:\n%s\n", pendingRight, pendingTotal, strings.Join(pending, "\n"))
	}
	return nil
}

// blameOf is where the run's blame came from, and the share of it behind
// other processes: "measured 51.2" or "estimated 3.1".
func blameOf(s tare.Summary) string {
	if s.Blame == nil {
		return "none"
	}
	return fmt.Sprintf("%s:%.1f", s.Blame.Source[:4], s.Blame.Others())
}
