package prompts

import (
	"strings"
	"testing"
	"time"
)

func TestParseThink(t *testing.T) {
	for in, want := range map[string]Think{
		"2s":             {"fixed", 2 * time.Second, 2 * time.Second},
		"0s":             {"fixed", 0, 0},
		"exp:500ms":      {"exp", 500 * time.Millisecond, 500 * time.Millisecond},
		"uniform:1s..3s": {"uniform", time.Second, 3 * time.Second},
	} {
		got, err := ParseThink(in)
		if err != nil || got != want {
			t.Errorf("ParseThink(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, _ := ParseThink(got.String()); again != got {
			t.Errorf("ParseThink(%q).String() = %q does not read back", in, got.String())
		}
	}
	for _, in := range []string{"", "2", "-1s", "exp:", "uniform:3s..1s", "uniform:1s", "gauss:1s", "2h"} {
		if _, err := ParseThink(in); err == nil || !strings.Contains(err.Error(), "exp:MEAN") {
			t.Errorf("ParseThink(%q): %v", in, err)
		}
	}
}

// TestThinkDraw: draws stay in range, repeat for the same seed and
// place, and an exponential's mean is its mean.
func TestThinkDraw(t *testing.T) {
	u, _ := ParseThink("uniform:1s..2s")
	e, _ := ParseThink("exp:1s")
	var sum time.Duration
	const n = 4000
	for conv := range uint64(n) {
		d := u.Draw(3, conv, 2)
		if d < time.Second || d > 2*time.Second || d != u.Draw(3, conv, 2) {
			t.Fatalf("uniform draw %v for conversation %d", d, conv)
		}
		sum += e.Draw(3, conv, 2)
	}
	// The standard error of the mean is 1s/√4000 ≈ 16ms; the cut at 10 s
	// takes 0.5 ms off.
	if mean := sum / n; mean < 920*time.Millisecond || mean > 1080*time.Millisecond {
		t.Errorf("exponential mean %v, want about 1s", mean)
	}
	if e.Draw(3, 1, 2) == e.Draw(3, 1, 3) && e.Draw(3, 1, 3) == e.Draw(3, 1, 4) {
		t.Error("the turns of one conversation draw the same think time")
	}
}
