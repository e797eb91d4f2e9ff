package stats

import (
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestPartsAddResultFrom: a result goes to the part its scheduled time
// falls in counted from the start given, the start of the generator that
// sent it, not the run's.
func TestPartsAddResultFrom(t *testing.T) {
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	spans := []Span{{From: 0, To: time.Second}, {From: time.Second, To: 2 * time.Second}}
	tests := []struct {
		name  string
		from  time.Duration // the generator's start after the run's
		at    time.Duration // the result's scheduled time after the run's start
		parts [2]int        // results in each part
	}{
		{"the run's own start", 0, time.Second + 2*time.Millisecond, [2]int{0, 1}},
		{"a generator started 3 ms later", 3 * time.Millisecond, time.Second + 2*time.Millisecond, [2]int{1, 0}},
		{"before its first part", 3 * time.Millisecond, 2 * time.Millisecond, [2]int{0, 0}},
		{"after its last part", 3 * time.Millisecond, 2*time.Second + 3*time.Millisecond, [2]int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewParts(Config{Start: start}, spans)
			if err != nil {
				t.Fatal(err)
			}
			at := start.Add(tt.at)
			p.AddResultFrom(start.Add(tt.from), &tare.Result{Scheduled: at, Sent: at, Done: at.Add(time.Millisecond)})
			for i, want := range tt.parts {
				if s, _ := p.Summary(i); s.Requests.Total != want {
					t.Errorf("part %d has %d results, want %d", i, s.Requests.Total, want)
				}
			}
		})
	}
}
