package queue

import (
	"strings"
	"testing"
)

func TestQueueWarnings(t *testing.T) {
	tests := []struct {
		name string
		st   TargetStats
		want string
	}{
		{"quiet", TargetStats{Enqueued: 10, Matched: 10}, ""},
		{"one job", TargetStats{Unavailable: 1, ReadErrors: 1},
			"1 job was touched by a queue outage (queue unavailable): counted as errors; 1 failed read of results, retried with backoff"},
		{"restart", TargetStats{Unavailable: 7, ReadErrors: 12, Lost: 1},
			"7 jobs were touched by a queue outage (queue unavailable): counted as errors; the queue's state was lost 1 time (a restart without persistence), failing the jobs it held, 12 failed reads of results, retried with backoff"},
		{"broker crash", TargetStats{Unavailable: 46, Unconfirmed: 4},
			"the broker did not confirm the message of 4 jobs (publish not confirmed: refused, or its connection closed first): counted as errors; they may still have run, and a late result is not counted\n" +
				"46 jobs were touched by a queue outage (queue unavailable): counted as errors"},
		{"one refused", TargetStats{Unconfirmed: 1},
			"the broker did not confirm the message of 1 job (publish not confirmed: refused, or its connection closed first): counted as errors; it may still have run, and a late result is not counted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(targetWarnings(tt.st), "\n")
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
