// Command testsummary reads `go test -json` on its standard input and
// prints what `go test` prints without -v (each package's result, build
// errors, the output of the tests that failed), so that scripts/test can
// run the suite with -json and still be read as usual. With -skips FILE it
// appends a line for every test that skipped, "package Test: why", for
// scripts/test to list at its end: a skip can hide a failure, so none goes
// unsaid.
//
//	go test -json ./... | go run ./internal/testsummary -skips skips.txt
//
// It exits 0 whatever the tests did: the caller keeps go test's status.
package main

import (
	"bufio"
	"encoding/json"
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
	skipsFile := flag.String("skips", "", "append the skipped tests to this file")
	flag.Parse()
	var skips io.Writer = io.Discard
	if *skipsFile != "" {
		f, err := os.OpenFile(*skipsFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		skips = f
	}
	if err := summarise(os.Stdin, os.Stdout, skips); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
}

// summarise reads events from in, writes go test's usual output to out and
// a line for each skipped test to skips.
func summarise(in io.Reader, out, skips io.Writer) error {
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
			delete(held, e.Package+" "+e.Test)
		}
	}
	return sc.Err()
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
