package arrival

import (
	"slices"
	"testing"
	"time"
)

func drain(p Process, limit int) []time.Duration {
	var out []time.Duration
	for range limit {
		at, ok := p.Next()
		if !ok {
			break
		}
		out = append(out, at)
	}
	return out
}

func TestTrace(t *testing.T) {
	ms := time.Millisecond
	at := []time.Duration{0, 250 * ms, 250 * ms, time.Second}
	tests := []struct {
		speed float64
		want  []time.Duration
	}{
		{1, at},
		{2, []time.Duration{0, 125 * ms, 125 * ms, 500 * ms}},
		{0.5, []time.Duration{0, 500 * ms, 500 * ms, 2 * time.Second}},
	}
	for _, tt := range tests {
		p, err := NewTrace(at, tt.speed)
		if err != nil {
			t.Fatal(err)
		}
		if got := drain(p, 10); !slices.Equal(got, tt.want) {
			t.Errorf("speed %v: %v, want %v", tt.speed, got, tt.want)
		}
		if _, ok := p.Next(); ok {
			t.Errorf("speed %v: an arrival after the trace's end", tt.speed)
		}
	}
	for _, speed := range []float64{0, -1} {
		if _, err := NewTrace(at, speed); err == nil {
			t.Errorf("speed %v accepted", speed)
		}
	}
}

func TestRepeat(t *testing.T) {
	p, err := NewTrace([]time.Duration{0, 10, 20}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(Repeat(p, func(i uint64) int { return []int{2, 0, 3}[i] }), 10)
	if want := []time.Duration{0, 0, 10, 20, 20, 20}; !slices.Equal(got, want) {
		t.Errorf("Repeat: %v, want %v", got, want)
	}
}
