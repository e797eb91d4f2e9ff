// Package goldenfile compares test output with files under testdata/, and
// rewrites them when the tests run with -update, saying what changed (go
// test -v shows it): a line diff of each file rewritten.
//
// A golden file that holds a verdict (a "verdict: LEVEL" line of text
// output, a "level": "…" key of JSON) is a claim about a run, not only
// about its layout: -update refuses to change its level unless it is also
// given -update-verdict (or TARE_UPDATE_VERDICT=1), and the failure names
// the file and the old and new levels.
package goldenfile

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	update        = flag.Bool("update", false, "rewrite the golden files in testdata/ (-v shows what changed in each)")
	updateVerdict = flag.Bool("update-verdict", false, "with -update, also rewrite golden files whose verdict level changed")
)

// verdictEnv, set to 1, is -update-verdict for a whole go test ./... run.
const verdictEnv = "TARE_UPDATE_VERDICT"

// errVerdictChanged is the error of a rewrite refused because the file's
// verdict level changed.
var errVerdictChanged = errors.New("the verdict changed")

// Check compares got with testdata/name, showing the line diff when they
// differ; with -update it writes got there instead, logging the diff of
// what it changed, unless the verdict level changed (see the package doc),
// which fails the test.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		changes, err := rewrite(path, got, *updateVerdict || os.Getenv(verdictEnv) == "1")
		switch {
		case err != nil:
			t.Error(err)
		case changes != "":
			t.Logf("rewrote %s:\n%s", path, changes)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update accepts it); - golden, + got:\n%s", path, diff(want, got))
	}
}

// rewrite writes got to path and returns the line diff of what it
// changed ("" when nothing did; the whole file, added, when it is new).
// It refuses, with errVerdictChanged, to change the file's verdict levels
// unless acceptVerdict.
func rewrite(path string, got []byte, acceptVerdict bool) (string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read golden file %s: %w", path, err)
	}
	if err == nil && bytes.Equal(old, got) {
		return "", nil
	}
	changes := diff(old, got)
	if was, now := levels(old), levels(got); err == nil && !slices.Equal(was, now) && !acceptVerdict {
		return "", fmt.Errorf("%s: %w from %s to %s: not rewritten; if that is meant, run again with -update -update-verdict (or %s=1); - golden, + got:\n%s",
			path, errVerdictChanged, levelList(was), levelList(now), verdictEnv, changes)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		return "", fmt.Errorf("write golden file %s: %w", path, err)
	}
	return changes, nil
}

// verdictLevel is a verdict's level as text output prints it (a line
// "verdict: POLLUTED") or JSON holds it ("level": "polluted").
var verdictLevel = regexp.MustCompile(`(?m)^verdict: (\S+)|"level": *"([^"]*)"`)

// levels are the verdict levels in b, in order, lower-case.
func levels(b []byte) []string {
	var out []string
	for _, m := range verdictLevel.FindAllSubmatch(b, -1) {
		out = append(out, strings.ToLower(string(m[1])+string(m[2])))
	}
	return out
}

// levelList is levels as the refusal names them: "suspect", "polluted".
func levelList(levels []string) string {
	if len(levels) == 0 {
		return "none"
	}
	quoted := make([]string, len(levels))
	for i, l := range levels {
		quoted[i] = strconv.Quote(l)
	}
	return strings.Join(quoted, ", ")
}
