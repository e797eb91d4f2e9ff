package session

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare/queue"
)

func TestQueueWarnings(t *testing.T) {
	tests := []struct {
		name string
		st   queue.TargetStats
		want string
	}{
		{"quiet", queue.TargetStats{Enqueued: 10, Matched: 10}, ""},
		{"one job", queue.TargetStats{Unavailable: 1, ReadErrors: 1},
			"1 job was touched by a queue outage (queue unavailable): counted as errors; 1 failed read of results, retried with backoff"},
		{"restart", queue.TargetStats{Unavailable: 7, ReadErrors: 12, Lost: 1},
			"7 jobs were touched by a queue outage (queue unavailable): counted as errors; the queue's state was lost 1 time (a restart without persistence), failing the jobs it held, 12 failed reads of results, retried with backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(queueWarnings(tt.st), "\n")
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
