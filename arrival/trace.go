package arrival

import (
	"fmt"
	"math"
	"time"

	"github.com/tare-dev/tare"
)

// NewTrace replays recorded arrival times: the i-th arrival at at[i]/speed
// (speed 2 replays a trace twice as fast), then none. at must be
// non-decreasing from 0, as prompts.ReadTrace gives it. A speed that is
// not a positive finite number is a *tare.Error with code EINVALID.
func NewTrace(at []time.Duration, speed float64) (Process, error) {
	if !(speed > 0) || math.IsInf(speed, 0) {
		return nil, tare.Errorf(tare.EINVALID, "trace speed must be a positive number (1 replays the trace at its own pace, 2 twice as fast); got %v", speed)
	}
	return &trace{at: at, speed: speed}, nil
}

type trace struct {
	at    []time.Duration
	speed float64
	i     int
}

func (t *trace) Next() (time.Duration, bool) {
	if t.i >= len(t.at) {
		return 0, false
	}
	d := t.at[t.i]
	t.i++
	if t.speed != 1 {
		d = time.Duration(math.Round(float64(d) / t.speed))
	}
	return d, true
}

func (t *trace) String() string {
	if t.speed == 1 {
		return fmt.Sprintf("trace of %d", len(t.at))
	}
	return fmt.Sprintf("trace of %d at %gx", len(t.at), t.speed)
}

// Repeat gives each arrival of p count(i) times at once (i from 0, at
// least once): the turns of a conversation the i-th arrival starts, which
// the target then spaces by the answers and think times.
func Repeat(p Process, count func(i uint64) int) Process {
	return &repeat{p: p, count: count}
}

type repeat struct {
	p     Process
	count func(uint64) int
	i     uint64        // arrivals of p taken
	left  int           // copies of the current one still to give
	at    time.Duration // the current one
}

func (r *repeat) Next() (time.Duration, bool) {
	if r.left == 0 {
		at, ok := r.p.Next()
		if !ok {
			return 0, false
		}
		r.at, r.left = at, max(r.count(r.i), 1)
		r.i++
	}
	r.left--
	return r.at, true
}

func (r *repeat) String() string { return r.p.String() }
