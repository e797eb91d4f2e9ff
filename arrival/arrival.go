package arrival

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Process yields arrival times as offsets from the start of the run, in
// non-decreasing order.
type Process interface {
	// Next returns the offset of the next arrival, or ok false once the
	// process is exhausted; after that it keeps returning ok false.
	Next() (at time.Duration, ok bool)
	// String describes the process for people and for tare.Run.Arrival:
	// "poisson 200/s", "gamma(0.5) 200/s", "constant 100/s".
	String() string
}

// The kinds of process New accepts.
const (
	KindPoisson  = "poisson"
	KindGamma    = "gamma"
	KindConstant = "constant"
)

// New returns the process of the given kind with mean rate per second.
// An empty kind is poisson. Burstiness is the gamma shape k; 0 means 1. It
// only applies to gamma, so any other kind rejects a burstiness other than
// 0 or 1 rather than ignoring it. Bad input is a *tare.Error with code
// tare.EINVALID whose message names the value and what would be accepted.
func New(kind string, rate, burstiness float64, seed uint64) (Process, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	if burstiness < 0 || math.IsNaN(burstiness) || math.IsInf(burstiness, 0) {
		return nil, tare.Errorf(tare.EINVALID, "burstiness must be a positive number (1 is poisson, below 1 burstier, above 1 smoother); got %v", burstiness)
	}
	k := strings.ToLower(strings.TrimSpace(kind))
	if k != KindGamma && burstiness != 0 && burstiness != 1 {
		return nil, tare.Errorf(tare.EINVALID, "burstiness %v only applies to gamma arrivals; got arrival %q", burstiness, kind)
	}
	switch k {
	case "", KindPoisson:
		return NewPoisson(rate, seed), nil
	case KindGamma:
		if burstiness == 0 {
			burstiness = 1
		}
		return NewGamma(rate, burstiness, seed), nil
	case KindConstant:
		return NewConstant(rate), nil
	}
	return nil, tare.Errorf(tare.EINVALID, "arrival must be poisson, gamma or constant; got %q", kind)
}

// checkRate rejects a rate no process can follow.
func checkRate(rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) || rate > MaxRate {
		return tare.Errorf(tare.EINVALID, "rate must be positive and at most %v/s; got %v/s", MaxRate, rate)
	}
	return nil
}

// mustRate panics on a rate checkRate rejects: the constructors are for
// callers that validated their input already (New and ParseRate do).
func mustRate(rate float64) {
	if checkRate(rate) != nil {
		panic(fmt.Sprintf("arrival: invalid rate %v/s", rate))
	}
}

// NewPoisson returns a Poisson process of the given rate per second: gaps
// are exponential with mean 1/rate. It panics if rate is not in (0, MaxRate].
func NewPoisson(rate float64, seed uint64) Process {
	mustRate(rate)
	return &poisson{src: newSource(seed), rate: rate}
}

type poisson struct {
	src  source
	rate float64
	sum  offset
}

func (p *poisson) Next() (time.Duration, bool) {
	return p.sum.add(p.src.exp() / p.rate)
}

func (p *poisson) String() string { return KindPoisson + " " + Rate(p.rate).String() }

// NewGamma returns a renewal process whose gaps are gamma distributed with
// shape k = burstiness and scale 1/(rate·k): the mean gap is 1/rate and the
// squared coefficient of variation is 1/k. Burstiness 1 is Poisson, below 1
// is burstier, above 1 smoother. It panics if rate is not in (0, MaxRate]
// or burstiness is not a positive finite number.
func NewGamma(rate, burstiness float64, seed uint64) Process {
	mustRate(rate)
	if !(burstiness > 0) || math.IsInf(burstiness, 0) {
		panic(fmt.Sprintf("arrival: invalid burstiness %v", burstiness))
	}
	return &gamma{src: newSource(seed), rate: rate, k: burstiness, scale: 1 / (rate * burstiness)}
}

type gamma struct {
	src   source
	rate  float64
	k     float64
	scale float64
	sum   offset
}

func (g *gamma) Next() (time.Duration, bool) {
	return g.sum.add(g.src.gamma(g.k) * g.scale)
}

func (g *gamma) String() string {
	return fmt.Sprintf("%s(%s) %s", KindGamma, formatNumber(g.k), Rate(g.rate))
}

// NewConstant returns arrivals exactly 1/rate apart, the first at 0. It
// panics if rate is not in (0, MaxRate].
func NewConstant(rate float64) Process {
	mustRate(rate)
	return &constant{rate: rate}
}

type constant struct {
	rate float64
	i    uint64
	done bool
}

func (c *constant) Next() (time.Duration, bool) {
	if c.done {
		return 0, false
	}
	// i/rate from scratch each time, never a sum of rounded gaps: at 3/s a
	// summed 333333333ns gap would be a millisecond late after 10⁶ s.
	at, ok := toDuration(float64(c.i) / c.rate)
	if !ok {
		c.done = true
		return 0, false
	}
	c.i++
	return at, true
}

func (c *constant) String() string { return KindConstant + " " + Rate(c.rate).String() }

// offset is the running time of a random process, in seconds from the start.
// A float64 keeps sub-nanosecond precision for over a hundred days, and the
// rounding to time.Duration happens on the way out, so it never accumulates.
type offset struct {
	s    float64
	done bool
}

func (o *offset) add(gap float64) (time.Duration, bool) {
	if o.done {
		return 0, false
	}
	o.s += gap
	at, ok := toDuration(o.s)
	if !ok {
		o.done = true
	}
	return at, ok
}

// toDuration rounds seconds to the nearest nanosecond; ok is false past what
// a time.Duration holds (292 years), where a process ends.
func toDuration(s float64) (time.Duration, bool) {
	ns := math.Round(s * 1e9)
	if !(ns < math.MaxInt64) { // MaxInt64 rounds up to 2⁶³ as a float64
		return 0, false
	}
	return time.Duration(ns), true
}

// Bound stops p after jobs arrivals or at the first arrival at or past
// duration, whichever comes first: the arrivals are those in [0, duration).
// A bound of 0 means no bound on that axis. It panics on a negative bound.
func Bound(p Process, jobs int, duration time.Duration) Process {
	if jobs < 0 || duration < 0 {
		panic(fmt.Sprintf("arrival: negative bound (jobs %d, duration %v)", jobs, duration))
	}
	return &bounded{p: p, jobs: jobs, duration: duration}
}

type bounded struct {
	p        Process
	jobs     int
	duration time.Duration
	n        int // arrivals yielded so far
	done     bool
}

func (b *bounded) Next() (time.Duration, bool) {
	if b.done || (b.jobs > 0 && b.n >= b.jobs) {
		b.done = true
		return 0, false
	}
	at, ok := b.p.Next()
	if !ok || (b.duration > 0 && at >= b.duration) {
		b.done = true
		return 0, false
	}
	b.n++
	return at, true
}

func (b *bounded) String() string {
	s := b.p.String()
	switch {
	case b.jobs > 0 && b.duration > 0:
		return fmt.Sprintf("%s for %d jobs or %v", s, b.jobs, b.duration)
	case b.jobs > 0:
		return fmt.Sprintf("%s for %d jobs", s, b.jobs)
	case b.duration > 0:
		return fmt.Sprintf("%s for %v", s, b.duration)
	}
	return s
}

// source turns a PCG stream into variates with this package's own
// arithmetic, so a seed means the same arrivals on every Go release.
type source struct {
	pcg      *rand.PCG
	spare    float64 // second normal of the last Box–Muller pair
	hasSpare bool
}

// seedStream is PCG's second seed word: fixed, so the seed alone picks the
// stream. Changing it changes every seeded schedule.
const seedStream = 0x9e3779b97f4a7c15

func newSource(seed uint64) source {
	return source{pcg: rand.NewPCG(seed, seedStream)}
}

// uniform is in [0, 1), with the 53 high bits of one PCG output.
func (s *source) uniform() float64 {
	return float64(s.pcg.Uint64()>>11) * 0x1p-53
}

// exp is Exp(1) by inversion; 1−u is in (0, 1], so the log is finite.
func (s *source) exp() float64 {
	return -math.Log1p(-s.uniform())
}

// normal is N(0, 1) by Box–Muller, using both values of each pair.
func (s *source) normal() float64 {
	if s.hasSpare {
		s.hasSpare = false
		return s.spare
	}
	r := math.Sqrt(-2 * math.Log(1-s.uniform()))
	sin, cos := math.Sincos(2 * math.Pi * s.uniform())
	s.spare, s.hasSpare = r*sin, true
	return r * cos
}

// gamma is Gamma(k, 1), by Marsaglia and Tsang's squeeze method
// (ACM TOMS 26(3), 2000) for k ≥ 1, and for k < 1 by the boost
// Gamma(k) = Gamma(k+1) · U^(1/k).
func (s *source) gamma(k float64) float64 {
	if k < 1 {
		u := 1 - s.uniform() // (0, 1]: U^(1/k) is never NaN
		return s.gamma(k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := s.normal()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := s.uniform()
		x2 := x * x
		if u < 1-0.0331*x2*x2 {
			return d * v
		}
		if math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
