package arrival

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Stage is one step of a ramping schedule, as k6's ramping-arrival-rate
// has them: over Duration the rate moves linearly from the previous
// stage's Target (0 before the first stage) to its own. A stage of
// duration 0 is a jump: the next stage starts from its Target.
type Stage struct {
	Duration time.Duration
	Target   Rate // per second; 0 is allowed, a ramp down to nothing
}

// Stages is a ramping schedule: its text form is DURATION:RATE items
// separated by commas, "30s:10/s,2m:50/s,1m:50/s", and it implements
// pflag.Value and encoding.TextUnmarshaler, as Rate does.
type Stages []Stage

// MaxStages bounds a schedule: more steps than this is a data file, not a
// ramp.
const MaxStages = 1000

// stagesForm is the accepted form, for messages.
const stagesForm = "stages must look like 30s:10/s,2m:50/s (each DURATION:RATE; the rate ramps linearly from the previous stage's target, from 0 before the first; 0s:RATE jumps)"

// ParseStages parses a ramping schedule. Bad input is a *tare.Error with
// code tare.EINVALID that names the stage at fault and the accepted form.
func ParseStages(s string) (Stages, error) {
	if strings.TrimSpace(s) == "" {
		return nil, tare.Errorf(tare.EINVALID, "%s; got an empty value", stagesForm)
	}
	items := strings.Split(s, ",")
	if len(items) > MaxStages {
		return nil, tare.Errorf(tare.EINVALID, "%s; got %d stages, more than %d", stagesForm, len(items), MaxStages)
	}
	st := make(Stages, 0, len(items))
	for i, item := range items {
		bad := func(why string) error {
			return tare.Errorf(tare.EINVALID, "%s; stage %d %q %s", stagesForm, i+1, strings.TrimSpace(item), why)
		}
		ds, rs, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, bad("has no colon between the duration and the rate")
		}
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil || d < 0 {
			return nil, bad("does not start with a duration like 30s or 2m")
		}
		r, err := parseStageRate(rs)
		if err != nil {
			return nil, bad("does not end with a rate like 10/s or 0/s")
		}
		st = append(st, Stage{Duration: d, Target: r})
	}
	switch {
	case st.Duration() <= 0:
		return nil, tare.Errorf(tare.EINVALID, "%s; got %q, which lasts no time", stagesForm, s)
	case st.Expected() <= 0:
		return nil, tare.Errorf(tare.EINVALID, "%s; got %q, whose rate is 0 throughout", stagesForm, s)
	}
	return st, nil
}

// parseStageRate is ParseRate that also takes a rate of 0.
func parseStageRate(s string) (Rate, error) {
	num, unit, hasUnit := strings.Cut(strings.TrimSpace(s), "/")
	if v, err := strconv.ParseFloat(strings.TrimSpace(num), 64); err == nil && v == 0 {
		if _, ok := parseUnit(unit); ok || !hasUnit {
			return 0, nil
		}
	}
	return ParseRate(s)
}

// Duration is the schedule's length: the sum of its stages'.
func (st Stages) Duration() time.Duration {
	var d time.Duration
	for _, s := range st {
		d += s.Duration
	}
	return d
}

// From is the rate stage i starts at: the previous stage's target, 0 for
// the first.
func (st Stages) From(i int) Rate {
	if i == 0 {
		return 0
	}
	return st[i-1].Target
}

// Start is the offset at which stage i begins.
func (st Stages) Start(i int) time.Duration {
	var d time.Duration
	for _, s := range st[:i] {
		d += s.Duration
	}
	return d
}

// area is the expected number of arrivals in stage i: ∫λ over it.
func (st Stages) area(i int) float64 {
	return (float64(st.From(i)) + float64(st[i].Target)) / 2 * st[i].Duration.Seconds()
}

// Expected is the expected number of arrivals of the whole schedule.
func (st Stages) Expected() float64 {
	var n float64
	for i := range st {
		n += st.area(i)
	}
	return n
}

// Cumulative is Λ(t) = ∫₀ᵗ λ(s) ds, the expected number of arrivals
// before offset t: the clock the time-rescaling theorem runs arrivals on.
func (st Stages) Cumulative(t time.Duration) float64 {
	var n float64
	var start time.Duration
	for i, s := range st {
		if t >= start+s.Duration {
			n += st.area(i)
			start += s.Duration
			continue
		}
		x := (t - start).Seconds()
		r0 := float64(st.From(i))
		slope := (float64(s.Target) - r0) / s.Duration.Seconds()
		return n + r0*x + slope*x*x/2
	}
	return n
}

// RateAt is the rate λ(t) at offset t; 0 past the end.
func (st Stages) RateAt(t time.Duration) float64 {
	var start time.Duration
	for i, s := range st {
		if t < start+s.Duration {
			r0 := float64(st.From(i))
			return r0 + (float64(s.Target)-r0)*(t-start).Seconds()/s.Duration.Seconds()
		}
		start += s.Duration
	}
	return 0
}

// Scaled is the schedule with every rate times f: one shard's part of it.
func (st Stages) Scaled(f float64) Stages {
	out := make(Stages, len(st))
	for i, s := range st {
		out[i] = Stage{Duration: s.Duration, Target: Rate(float64(s.Target) * f)}
	}
	return out
}

// String is the form ParseStages reads.
func (st Stages) String() string {
	parts := make([]string, len(st))
	for i, s := range st {
		parts[i] = s.Duration.String() + ":" + s.Target.String()
	}
	return strings.Join(parts, ",")
}

// Set parses s into st, for pflag.Value.
func (st *Stages) Set(s string) error {
	v, err := ParseStages(s)
	if err != nil {
		return err
	}
	*st = v
	return nil
}

// Type names the value in pflag's usage text.
func (st *Stages) Type() string { return "stages" }

// UnmarshalText parses text as ParseStages does, for plan files.
func (st *Stages) UnmarshalText(text []byte) error { return st.Set(string(text)) }

// NewStaged returns the process of the given kind (as New takes it) whose
// rate follows the stages, ending with the last stage.
//
// It runs the unit-rate process of that kind on the clock Λ(t) (see
// Cumulative) and maps each arrival back with t = Λ⁻¹(u): the
// time-rescaling theorem, by which a Poisson process of rate 1 on that
// clock is exactly the non-homogeneous Poisson process of rate λ(t). For
// gamma and constant it is the same map applied to their unit-rate gaps,
// so their shape (burstiness, evenness) holds at every instant's rate.
// Within a stage λ is linear, Λ quadratic, and its inverse has a closed
// form:
//
//	Δ = u − Λ(start),  x = 2Δ / (r₀ + √(r₀² + 2·slope·Δ)),  t = start + x
func NewStaged(kind string, stages Stages, burstiness float64, seed uint64) (Process, error) {
	if _, err := New(kind, 1, burstiness, seed); err != nil {
		return nil, err
	}
	if stages.Duration() <= 0 || stages.Expected() <= 0 {
		return nil, tare.Errorf(tare.EINVALID, "%s; got %q", stagesForm, stages.String())
	}
	k := strings.ToLower(strings.TrimSpace(kind))
	if k == "" {
		k = KindPoisson
	}
	if burstiness == 0 {
		burstiness = 1
	}
	return &staged{kind: k, k: burstiness, src: newSource(seed), st: stages}, nil
}

type staged struct {
	kind string
	k    float64 // gamma shape
	src  source
	st   Stages

	u    float64 // the operational clock: expected arrivals so far
	i    uint64  // constant: arrivals so far
	seg  int     // the stage u is in
	segU float64 // Λ at the start of seg
	segT float64 // the start of seg, in seconds
	done bool
}

func (s *staged) Next() (time.Duration, bool) {
	if s.done {
		return 0, false
	}
	switch s.kind {
	case KindConstant:
		s.u = float64(s.i)
		s.i++
	case KindGamma:
		s.u += s.src.gamma(s.k) / s.k
	default:
		s.u += s.src.exp()
	}
	for s.seg < len(s.st) && s.u >= s.segU+s.st.area(s.seg) {
		s.segU += s.st.area(s.seg)
		s.segT += s.st[s.seg].Duration.Seconds()
		s.seg++
	}
	if s.seg == len(s.st) {
		s.done = true
		return 0, false
	}
	d := s.u - s.segU
	r0 := float64(s.st.From(s.seg))
	slope := (float64(s.st[s.seg].Target) - r0) / s.st[s.seg].Duration.Seconds()
	var x float64
	if d > 0 {
		x = 2 * d / (r0 + math.Sqrt(max(r0*r0+2*slope*d, 0)))
	}
	at, ok := toDuration(s.segT + x)
	if !ok {
		s.done = true
	}
	return at, ok
}

func (s *staged) String() string {
	name := s.kind
	if s.kind == KindGamma {
		name = fmt.Sprintf("%s(%s)", KindGamma, formatNumber(s.k))
	}
	return name + " stages " + s.st.String()
}

// SplitStaged is Split for a staged schedule: shard sh's part of
// NewStaged(kind, stages, burstiness, seed) limited to jobs arrivals.
// Poisson splits into independent staged streams at 1/N of every rate;
// gamma and constant are dealt round-robin from the one full schedule.
func SplitStaged(kind string, stages Stages, burstiness float64, seed uint64, jobs int, sh Shard) (Process, error) {
	return split(kind, sh, jobs, 0, func(scale float64, seed2 uint64) (Process, error) {
		return NewStaged(kind, stages.Scaled(scale), burstiness, seed2)
	}, seed)
}
