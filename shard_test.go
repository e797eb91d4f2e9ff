package tare

import (
	"testing"
	"time"
)

func TestClockOffset(t *testing.T) {
	tests := []struct {
		name        string
		config      map[string]string
		mean, worst time.Duration
		ok          bool
	}{
		{name: "not coordinated", config: nil},
		{name: "start and end", config: map[string]string{ConfigClockStart: "-10.000", ConfigClockEnd: "30.000"},
			mean: 10 * time.Millisecond, worst: 30 * time.Millisecond, ok: true},
		{name: "start only", config: map[string]string{ConfigClockStart: "-2.500"},
			mean: -2500 * time.Microsecond, worst: 2500 * time.Microsecond, ok: true},
		{name: "unreadable end", config: map[string]string{ConfigClockStart: "4.000", ConfigClockEnd: "n/a"},
			mean: 4 * time.Millisecond, worst: 4 * time.Millisecond, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, worst, ok := Run{Config: tt.config}.ClockOffset()
			if mean != tt.mean || worst != tt.worst || ok != tt.ok {
				t.Errorf("ClockOffset = %v, %v, %v; want %v, %v, %v", mean, worst, ok, tt.mean, tt.worst, tt.ok)
			}
		})
	}
}
