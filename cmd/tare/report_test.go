package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestReport measures a run, then reports it from the store (by a prefix
// of its id), from its summary JSON and from its exported records.
func TestReport(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "report.db"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()

	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "100/s", "--jobs", "60", "--quiet", "--json",
		"--tick", "100ms", "--label", "<script>alert(1)</script>")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(summary, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "run.jsonl")
	if code, _, stderr := tareCmd(t, "runs", "export", s.Run.ID, "-o", records); code != 0 {
		t.Fatalf("runs export: exit %d: %s", code, stderr)
	}

	tests := []struct {
		name   string
		args   []string
		runs   int
		charts int // charts of the first run
	}{
		{"stored run by prefix", []string{s.Run.ID[:13]}, 1, 6}, // with the whose-CPU and waited-behind-whom charts
		{"summary file", []string{summary}, 1, 1},
		{"records file", []string{records}, 1, 4},
		{"three at once", []string{s.Run.ID, summary, records}, 3, 6},
	}
	if s.Tail != nil {
		// The probe measured the requests: every request is drawn too.
		tests[0].charts, tests[3].charts = 7, 7
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.html")
			code, stdout, stderr := tareCmd(t, append([]string{"report", "-o", out}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "wrote "+out) {
				t.Errorf("stdout %q does not say where the report went", stdout)
			}
			html, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(html), "<script>alert") {
				t.Error("the label became markup")
			}
			data := html[strings.Index(string(html), `id="tare-data">`)+len(`id="tare-data">`):]
			data = data[:strings.Index(string(data), "</script>")]
			var page struct {
				Schema string `json:"schema"`
				Runs   []struct {
					Summary tare.Summary      `json:"summary"`
					Charts  []json.RawMessage `json:"charts"`
				} `json:"runs"`
			}
			if err := json.Unmarshal(data, &page); err != nil {
				t.Fatalf("data part: %v", err)
			}
			if page.Schema != "tare.report/v1" || len(page.Runs) != tt.runs {
				t.Fatalf("data part: schema %q, %d runs; want tare.report/v1, %d", page.Schema, len(page.Runs), tt.runs)
			}
			if got := page.Runs[0].Summary.Requests.Total; got != 60 {
				t.Errorf("first run has %d requests, want 60", got)
			}
			if got := len(page.Runs[0].Charts); got != tt.charts {
				t.Errorf("first run has %d charts, want %d", got, tt.charts)
			}
		})
	}

	t.Run("png", func(t *testing.T) {
		out, chart := filepath.Join(t.TempDir(), "r.html"), filepath.Join(t.TempDir(), "chart.png")
		if code, _, stderr := tareCmd(t, "report", s.Run.ID, "-o", out, "--png", chart); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		f, err := os.Open(chart)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := png.Decode(f); err != nil {
			t.Errorf("--png wrote no PNG: %v", err)
		}
	})
	t.Run("protocol", func(t *testing.T) {
		// Two windows of one protocol, imported from their summaries.
		for _, w := range []string{"peak", "offpeak"} {
			var win tare.Summary
			json.Unmarshal([]byte(stdout), &win)
			win.Run.Window, win.Run.Protocol, win.Run.Label = w, "proto-report-test", w
			b, _ := json.Marshal(win)
			path := filepath.Join(t.TempDir(), w+".json")
			os.WriteFile(path, b, 0o644)
			if code, _, stderr := tareCmd(t, "runs", "import", path); code != 0 {
				t.Fatalf("runs import: exit %d: %s", code, stderr)
			}
		}
		code, out, stderr := tareCmd(t, "report", "proto-report-test", "-o", filepath.Join(t.TempDir(), "p.html"))
		if code != 0 || !strings.Contains(out, "(2 runs,") {
			t.Errorf("report of a protocol: exit %d, %q: %s", code, out, stderr)
		}
	})
	t.Run("stdout", func(t *testing.T) {
		code, stdout, stderr := tareCmd(t, "report", summary, "-o", "-")
		if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
			t.Errorf("exit %d, stdout starts %.40q: %s", code, stdout, stderr)
		}
	})
}

// TestReportBadInput: every bad argument exits 2 naming what was wrong,
// and leaves no report behind.
func TestReportBadInput(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "empty.db"))
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.txt")
	empty := filepath.Join(dir, "empty.jsonl")
	summary := filepath.Join(dir, "summary.json")
	os.WriteFile(garbage, []byte("this is not a run\n"), 0o644)
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(summary, []byte(`{"schema": "tare.summary/v1", "run": {"label": "s"}}`), 0o644)
	out := filepath.Join(dir, "report.html")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no run", []string{"report"}, "requires at least 1 arg"},
		{"unknown id", []string{"report", "0193ffff"}, `report 0193ffff: no stored run or protocol has that id`},
		{"missing file", []string{"report", "missing.json"}, "report missing.json: no such file"},
		{"missing path", []string{"report", "/nonexistent/run.jsonl"}, "report /nonexistent/run.jsonl: no such file"},
		{"not a run", []string{"report", garbage}, "neither a tare.summary/v1 JSON (tare run --json) nor raw JSONL records"},
		{"no records", []string{"report", empty}, "no records in it"},
		{"output dir", []string{"report", summary, "-o", "/nonexistent/dir/report.html"}, "-o /nonexistent/dir/report.html"},
		{"empty output", []string{"report", summary, "-o", ""}, "-o must name a file"},
		{"png of a summary", []string{"report", summary, "--png", filepath.Join(dir, "c.png")}, "--png: nothing to draw"},
		{"both to stdout", []string{"report", summary, "-o", "-", "--png", "-"}, "cannot both be stdout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if !strings.Contains(strings.Join(args, " "), " -o ") {
				args = append(args, "-o", out)
			}
			code, _, stderr := tareCmd(t, args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a report was written despite the error")
			}
		})
	}
}

// TestReportComparesWindows: a report of several runs carries the
// comparison: divergence per metric and the protocol verdict.
func TestReportComparesWindows(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, delay := range []time.Duration{time.Millisecond, 5 * time.Millisecond} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(delay) }))
		code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--rate", "50/s", "--jobs", "40", "--quiet", "--json", "--no-store", "--tick", "100ms")
		srv.Close()
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, stderr)
		}
		f := filepath.Join(dir, fmt.Sprintf("w%d.json", i))
		os.WriteFile(f, []byte(stdout), 0o644)
		files = append(files, f)
	}
	out := filepath.Join(dir, "cmp.html")
	if code, _, stderr := tareCmd(t, append([]string{"report", "-o", out}, files...)...); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"host is the variable", "p95_ms"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the report of two diverging runs lacks %q", want)
		}
	}
}
