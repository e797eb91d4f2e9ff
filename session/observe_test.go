package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/peer"
)

// TestObserveSaysRecorderWarnings: a watched window's results go through
// the recorder as a live run's do, and what the recorder warns of (here a
// result stamped before the window started) is in the verdict, as tare
// watch --results must say it.
func TestObserveSaysRecorderWarnings(t *testing.T) {
	jsonl, err := peer.Lookup("jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "results.jsonl")
	cfg := window(nil, 0, 0)
	cfg.Results = &peer.Spec{Format: jsonl, Path: path}
	stop := make(chan struct{})
	cfg.OnStart = func(*host.Sampler) {
		now := time.Now()
		var lines []string
		for i, at := range []time.Time{now.Add(-time.Minute), now.Add(10 * time.Millisecond), now.Add(20 * time.Millisecond)} {
			lines = append(lines, fmt.Sprintf(`{"timestamp": %q, "latency_ms": %d, "status": 200}`, at.Format(time.RFC3339Nano), 5+i))
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Error(err)
		}
		time.AfterFunc(250*time.Millisecond, func() { close(stop) })
	}
	s, _, _, err := Observe(context.Background(), cfg, stop)
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests.Total != 3 {
		t.Fatalf("%d requests, want the 3 of the results file", s.Requests.Total)
	}
	want := "instants fell before the run start"
	if !slices.ContainsFunc(s.Verdict.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("warnings %q\nwant one that says %q", s.Verdict.Warnings, want)
	}
}
