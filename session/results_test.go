package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/stats"
)

// TestResultsTail: another tool's results, read once the window is over
// and so after its every host sample (tare watch --results), get the
// per-request blame a run's own requests get: the ticks keep the probe's
// waits until the results come.
func TestResultsTail(t *testing.T) {
	const tick = time.Second
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	rec, err := stats.NewRecorder(stats.Config{Start: start, Tick: tick, Grace: resultsGrace})
	if err != nil {
		t.Fatal(err)
	}
	// Ten measured ticks; in ticks 3 to 6 the service waits 50 ms behind
	// `nightly-batch` from 200 ms into the tick.
	const wait = 50 * time.Millisecond
	for i := range 10 {
		from := start.Add(time.Duration(i) * tick)
		b := &tare.Blame{Source: tare.BlameMeasured}
		if i >= 3 && i < 7 {
			w := from.Add(200 * time.Millisecond)
			b.Waits = []tare.Wait{{Start: w, End: w.Add(wait), Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "nightly-batch", PID: 812, Waited: wait}}
		}
		rec.AddHost(tare.HostSample{Start: from, End: from.Add(tick), CPU: tare.CPUShares{CPU: -1, User: 20, Idle: 80}, Blame: b})
	}
	// Ten requests a second, each 5 ms; the one sent as the wait begins
	// is 55 ms.
	var lines strings.Builder
	for i := range 100 {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		ms := 5.0
		if tk := i / 10; i%10 == 2 && tk >= 3 && tk < 7 {
			ms += float64(wait / time.Millisecond)
		}
		fmt.Fprintf(&lines, "{\"timestamp\": %q, \"latency_ms\": %g, \"status\": 200}\n", at.Format(time.RFC3339Nano), ms)
	}
	path := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := peer.ParseSpec("jsonl:" + path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := readResults(spec, start, rec); err != nil {
		t.Fatal(err)
	}
	s := rec.Summary(start.Add(10*tick), 10*tick)
	tl := s.Tail
	if tl == nil {
		t.Fatalf("no tail: the results got no per-request blame")
	}
	if tl.Requests != 100 || tl.Overlapped != 4 {
		t.Errorf("tail of %d requests, %d overlapped; want 100, 4 (the ones sent as the neighbour held the CPU)", tl.Requests, tl.Overlapped)
	}
	for _, sl := range tl.Slowest {
		if sl.Overlapped == 0 || len(sl.Behind) == 0 || sl.Behind[0].Name != "nightly-batch" {
			t.Errorf("slowest %g %%: %d of %d overlapped, behind %+v; want `nightly-batch` named", sl.Pct, sl.Overlapped, sl.Requests, sl.Behind)
		}
	}
	if q := tl.Quiet.P99; q == nil || *q > 5.01 {
		t.Errorf("quiet p99 %v, want 5 ms: the requests nothing overlapped", q)
	}
}
