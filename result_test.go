package tare

import (
	"testing"
	"time"
)

// TestResultClocks: a queue job's service is the worker's own time, Done −
// Started, never Done − Sent, which counts its queue wait too; a request's
// is Done − Sent.
func TestResultClocks(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1700000000, 0).Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name                   string
		res                    Result
		latency, service, wait time.Duration
	}{
		{"request", Result{Scheduled: at(0), Sent: at(2), Done: at(50)}, 50 * time.Millisecond, 48 * time.Millisecond, 0},
		{"queue job", Result{Scheduled: at(0), Sent: at(2), Started: at(302), Done: at(400)}, 400 * time.Millisecond, 98 * time.Millisecond, 300 * time.Millisecond},
		{"queue job no worker reported", Result{Scheduled: at(0), Sent: at(2), Done: at(1000), Err: "timeout"}, time.Second, 998 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.res.Latency(); got != tt.latency {
				t.Errorf("latency %v, want %v", got, tt.latency)
			}
			if got := tt.res.Service(); got != tt.service {
				t.Errorf("service %v, want %v", got, tt.service)
			}
			if got := tt.res.QueueWait(); got != tt.wait {
				t.Errorf("queue wait %v, want %v", got, tt.wait)
			}
		})
	}
}
