// Command testsummary reads `go test -json` on its standard input and
// prints what `go test` prints without -v (each package's result, build
// errors, the output of the tests that failed), so that scripts/test can
// run the suite with -json and still be read as usual. With -skips FILE it
// adds a line for every test that skipped, "package Test: why", for
// scripts/test to list at its end: a skip can hide a failure, so none goes
// unsaid. FILE keeps the skips of earlier passes, less those of the tests
// that ran in this one: a test the suite skips on purpose to run it alone
// afterwards (the scenario matrix) is not missing once it ran.
//
//	go test -json ./... | go run ./internal/testkit/testsummary -skips skips.txt
//
// It exits 0 whatever the tests did: the caller keeps go test's status.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// event is one line of go test -json (cmd/test2json's TestEvent, and the
// build events of go test -json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output
}

func main() {
	skipsFile := flag.String("skips", "", "add the skipped tests to this file, less the earlier skips of tests that ran")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *skipsFile); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
}

// run summarises in to out and, when skipsFile is not "", adds this pass's
// skips to it, less the earlier skips of the tests that ran in this pass.
func run(in io.Reader, out io.Writer, skipsFile string) error {
	if skipsFile == "" {
		_, err := summarise(in, out, io.Discard)
		return err
	}
	earlier, err := os.ReadFile(skipsFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the skips of earlier passes: %w", err)
	}
	var skips bytes.Buffer
	ran, err := summarise(in, out, &skips)
	if err != nil {
		return err
	}
	kept := keepSkips(string(earlier), ran)
	if err := os.WriteFile(skipsFile, []byte(kept+skips.String()), 0o644); err != nil {
		return fmt.Errorf("write the skips: %w", err)
	}
	return nil
}

// keepSkips are the lines of skips ("package Test: why") whose test did not
// run since, nor any test it is a subtest of (ran holds "package Test").
func keepSkips(skips string, ran map[string]bool) string {
	var kept strings.Builder
	for _, line := range strings.SplitAfter(skips, "\n") {
		pkg, rest, _ := strings.Cut(line, " ")
		name, _, _ := strings.Cut(rest, ": ")
		if line == "" || hasRun(ran, pkg, name) {
			continue
		}
		kept.WriteString(line)
	}
	return kept.String()
}

// hasRun reports whether test name of pkg, or a test it is a subtest of,
// ran.
func hasRun(ran map[string]bool, pkg, name string) bool {
	for {
		if ran[pkg+" "+name] {
			return true
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// summarise reads events from in, writes go test's usual output to out and
// a line for each skipped test to skips, and returns the tests that ran
// (passed or failed), "package Test" each.
func summarise(in io.Reader, out, skips io.Writer) (map[string]bool, error) {
	ran := map[string]bool{}
	held := map[string]*test{} // each running test, by package and name
	get := func(pkg, name string) *test {
		k := pkg + " " + name
		if held[k] == nil {
			held[k] = &test{}
		}
		return held[k]
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: go test's own words
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			// Tests that never ended (a panic, a timeout) are the reason.
			for _, k := range slices.Sorted(maps.Keys(held)) {
				if name, ok := strings.CutPrefix(k, e.Package+" "); ok {
					fmt.Fprint(out, held[k].render(strings.Count(name, "/")))
					delete(held, k)
				}
			}
		case e.Test == "":
		case e.Action == "output":
			t := get(e.Package, e.Test)
			t.lines = append(t.lines, e.Output)
		case e.Action == "fail":
			ran[e.Package+" "+e.Test] = true
			// A subtest's failure is shown inside its parent's, as go
			// test shows it.
			text := get(e.Package, e.Test).render(strings.Count(e.Test, "/"))
			if i := strings.LastIndex(e.Test, "/"); i >= 0 {
				parent := get(e.Package, e.Test[:i])
				parent.children = append(parent.children, text)
			} else {
				fmt.Fprint(out, text)
			}
			delete(held, e.Package+" "+e.Test)
		case e.Action == "skip":
			fmt.Fprintf(skips, "%s %s: %s\n", e.Package, e.Test, get(e.Package, e.Test).reason())
			delete(held, e.Package+" "+e.Test)
		case e.Action == "pass":
			ran[e.Package+" "+e.Test] = true
			delete(held, e.Package+" "+e.Test)
		}
	}
	return ran, sc.Err()
}

// test is the output of one test so far: its own lines, and the failures
// of its subtests as they are to be shown.
type test struct {
	lines    []string
	children []string
}

// render is the test's output as go test shows a failure: the --- line
// first, without -v's === lines, indented by depth (of subtests), then its
// subtests' failures.
func (t *test) render(depth int) string {
	var head, body strings.Builder
	indent := strings.Repeat("    ", depth)
	for _, l := range t.lines {
		switch {
		case strings.HasPrefix(l, "=== "):
		case strings.HasPrefix(l, "--- "):
			head.WriteString(indent + l)
		default:
			body.WriteString(indent + l)
		}
	}
	return head.String() + body.String() + strings.Join(t.children, "")
}

// reason is why a test skipped: what it logged, on one line.
func (t *test) reason() string {
	var words []string
	for _, l := range t.lines {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			words = append(words, l)
		}
	}
	r := strings.Join(words, " / ")
	if len(r) > 400 {
		r = r[:400] + "…"
	}
	if r == "" {
		r = "(no reason given)"
	}
	return r
}
