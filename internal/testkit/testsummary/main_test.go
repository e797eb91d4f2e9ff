package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// TestSummarise reads the go test -json of a module with a passing, a
// skipped, a failing and a panicking test, subtests that skip and fail, and
// a package that does not build (testdata/suite.jsonl): it prints what go
// test prints without -v, and lists the skips with their reasons.
func TestSummarise(t *testing.T) {
	in, err := os.Open("testdata/suite.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out, skips bytes.Buffer
	if _, err := summarise(in, &out, &skips); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "suite.golden.txt", out.Bytes())
	goldenfile.Check(t, "skips.golden.txt", skips.Bytes())
}

// TestSkipsOfEarlierPasses: scripts/test runs the suite, in which the
// scenario matrix skips on purpose, then the matrix alone. The skips file
// keeps what skipped and never ran: not the matrix, nor a subtest of a
// test that ran since; a skip of the second pass is added.
func TestSkipsOfEarlierPasses(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	event := func(action, pkg, test, output string) string {
		return `{"Action":"` + action + `","Package":"` + pkg + `","Test":"` + test + `","Output":"` + output + `"}` + "\n"
	}
	suite := event("output", "m/cmd", "TestMatrix", "    x_test.go:3: needs the machine to itself\\n") +
		event("skip", "m/cmd", "TestMatrix", "") +
		event("output", "m/cmd", "TestSweep/model", "    x_test.go:9: run alone\\n") +
		event("skip", "m/cmd", "TestSweep/model", "") +
		event("pass", "m/cmd", "TestSweep", "") +
		event("output", "m/queue", "TestRedis", "    q_test.go:5: no redis-server\\n") +
		event("skip", "m/queue", "TestRedis", "") +
		event("output", "m/cmd", "TestMatrixDocs", "    x_test.go:7: no chromium\\n") +
		event("skip", "m/cmd", "TestMatrixDocs", "")
	alone := event("pass", "m/cmd", "TestMatrix", "") +
		event("output", "m/cmd", "TestSweepTLS", "    x_test.go:11: no openssl\\n") +
		event("skip", "m/cmd", "TestSweepTLS", "")
	for _, pass := range []string{suite, alone} {
		if err := run(strings.NewReader(pass), io.Discard, skips); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(skips)
	if err != nil {
		t.Fatal(err)
	}
	want := "m/cmd TestSweep/model: x_test.go:9: run alone\n" +
		"m/queue TestRedis: q_test.go:5: no redis-server\n" +
		"m/cmd TestMatrixDocs: x_test.go:7: no chromium\n" +
		"m/cmd TestSweepTLS: x_test.go:11: no openssl\n"
	if string(got) != want {
		t.Errorf("skips after both passes:\n%s\nwant:\n%s", got, want)
	}
}
