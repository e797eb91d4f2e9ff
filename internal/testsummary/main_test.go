package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/tare-dev/tare/internal/goldenfile"
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
	if err := summarise(in, &out, &skips); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "suite.golden.txt", out.Bytes())
	goldenfile.Check(t, "skips.golden.txt", skips.Bytes())
}
