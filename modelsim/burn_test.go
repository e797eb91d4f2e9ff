package modelsim

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestCalibrate(t *testing.T) {
	tests := []struct {
		name      string
		intervals []time.Duration // what each successive trial measures
		want      float64
	}{
		{
			name:      "first trial long enough",
			intervals: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond},
			want:      4096,
		},
		{
			name:      "doubles until a millisecond",
			intervals: []time.Duration{300 * time.Microsecond, 600 * time.Microsecond, 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
			want:      16384 / 2,
		},
		{
			name:      "fastest trial wins",
			intervals: []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond, 2 * time.Millisecond},
			want:      4096,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				clock time.Time
				calls int
			)
			now := func() time.Time {
				// Calls come in pairs, start then end of a trial.
				if calls%2 == 1 {
					clock = clock.Add(tt.intervals[calls/2])
				}
				calls++
				return clock
			}
			if got := calibrate(now); got != tt.want {
				t.Errorf("calibrate = %g rounds/ms, want %g", got, tt.want)
			}
			if calls != 2*len(tt.intervals) {
				t.Errorf("calibrate read the clock %d times, want %d", calls, 2*len(tt.intervals))
			}
		})
	}
}

func TestCalibrateReal(t *testing.T) {
	a := Calibrate()
	if a <= 0 {
		t.Fatalf("Calibrate = %g, want a positive rate", a)
	}
	if b := Calibrate(); b != a {
		t.Errorf("second Calibrate = %g, want the cached %g", b, a)
	}
}

func TestBurnRounds(t *testing.T) {
	b := burner{perMS: 1000}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {-time.Second, 0}, {time.Millisecond, 1000}, {2500 * time.Microsecond, 2500}, {time.Second, 1_000_000}} {
		if got := b.rounds(tc.d); got != tc.want {
			t.Errorf("rounds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestBurnStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour of work at any plausible rate: only cancellation ends it.
	b := burner{perMS: Calibrate()}
	if _, err := b.burn(ctx, 1, time.Hour); err != context.Canceled {
		t.Fatalf("burn after cancel = %v, want context.Canceled", err)
	}
}

func TestBurnIsDeterministic(t *testing.T) {
	b := burner{perMS: 100}
	x, err := b.burn(context.Background(), 7, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := spin(7, 10_000); x != want {
		t.Errorf("burn result %x, want spin(7, 10000) = %x", x, want)
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCostIsCPU proves the simulated cost is work, not sleep: the process
// CPU time a request uses grows with TokenCost × tokens, and is most of its
// wall time. Only ratios are checked, never an absolute time.
func TestCostIsCPU(t *testing.T) {
	s, err := New(Config{TokenCost: time.Millisecond, PromptCost: time.Nanosecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	measure := func(tokens int) (cpu, wall time.Duration) {
		t.Helper()
		body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":` + itoa(tokens) + `}`
		// Best of three: a neighbour can only inflate the wall time.
		for range 3 {
			c0, w0 := cpuTime(t), time.Now()
			rec := post(t, s, body)
			c, w := cpuTime(t)-c0, time.Since(w0)
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if cpu == 0 || c < cpu {
				cpu = c
			}
			if wall == 0 || w < wall {
				wall = w
			}
		}
		return cpu, wall
	}
	cpu1, wall1 := measure(16)
	cpu4, _ := measure(64)
	ratio := float64(cpu4) / float64(cpu1)
	t.Logf("16 tokens: cpu %v wall %v; 64 tokens: cpu %v; ratio %.2f", cpu1, wall1, cpu4, ratio)
	if ratio < 2 || ratio > 8 {
		t.Errorf("CPU time for 4× the tokens grew %.2f×, want about 4×", ratio)
	}
	if share := float64(cpu1) / float64(wall1); share < 0.2 {
		t.Errorf("request used CPU for %.0f%% of its wall time, want most of it (is it sleeping?)", 100*share)
	}
}
