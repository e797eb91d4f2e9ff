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

// TestPartsAchieved: a part's achieved rate counts the completions in its
// own seconds, whenever their arrivals were scheduled; its offered rate
// the arrivals scheduled in it. Dropped arrivals complete nowhere, and
// completions after the last part are in no part's rate.
func TestPartsAchieved(t *testing.T) {
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	p, err := NewParts(Config{Start: start}, []Span{{From: 0, To: 2 * time.Second}, {From: 2 * time.Second, To: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	add := func(n int, scheduled, done time.Duration, dropped bool) {
		for range n {
			at := start.Add(scheduled)
			res := tare.Result{Scheduled: at, Dropped: dropped}
			if !dropped {
				res.Sent, res.Done = at, start.Add(done)
			}
			p.AddResult(&res)
		}
	}
	add(6, 500*time.Millisecond, time.Second, false)    // part 1, done in part 1
	add(4, time.Second, 3*time.Second, false)           // part 1, done late, in part 2
	add(2, 1500*time.Millisecond, 0, true)              // part 1, dropped
	add(2, 3*time.Second, 3500*time.Millisecond, false) // part 2, done in it
	add(2, 3*time.Second, 5*time.Second, false)         // part 2, done after the last part
	show := func(v *float64) any {
		if v == nil {
			return "none"
		}
		return *v
	}
	for i, want := range []struct{ offered, achieved float64 }{
		{12.0 / 2, 6.0 / 2}, // 12 arrivals; 6 completions in its seconds
		{4.0 / 2, 6.0 / 2},  // 4 arrivals; 4 late ones of part 1 and 2 of its own
	} {
		s, _ := p.Summary(i)
		if s.Rate.Offered == nil || *s.Rate.Offered != want.offered || s.Rate.Achieved == nil || *s.Rate.Achieved != want.achieved {
			t.Errorf("part %d: offered %v/s achieved %v/s, want %v/s and %v/s", i+1, show(s.Rate.Offered), show(s.Rate.Achieved), want.offered, want.achieved)
		}
	}
}
