package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/session"
)

// FuzzSummaryFile: any file given to tare compare or tare runs import is
// either refused with a message or read into a summary that the text and
// JSON reports print without panicking.
func FuzzSummaryFile(f *testing.F) {
	for _, name := range []string{"testdata/seed-peak.json", "testdata/seed-offpeak.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"schema": "tare.summary/v1"}`,
		`{"schema": "tare.summary/v1", "run": {"label": `,
		`{"schema": "tare.summary/v1", "requests": {"total": "many"}}`,
		`{"schema": "tare.summary/v1", "latency_ms": {"p99": -1e308}, "verdict": {"level": "polluted", "signals": [{}]}}`,
		`{"schema": "tare.summary/v1", "model": {}, "queue": {}, "goodput": {}, "clean_latency_ms": {}}`,
		`{"schema": "tare.summary/v2"}`,
		`{"schema": "tare.summary/v1"} {"schema": "tare.summary/v1"}`,
		"null", "[]", "",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "summary.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := session.ReadSummary(path)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("error %v: want EINVALID", err)
			}
		} else {
			if s.Schema != tare.SummarySchema {
				t.Fatalf("read a summary of schema %q", s.Schema)
			}
			for _, asJSON := range []bool{false, true} {
				if err := printSummary(io.Discard, &s, asJSON); err != nil {
					t.Fatalf("print a summary read back: %v", err)
				}
			}
		}
	})
}
