package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// queueRun is a seeded synthetic run of the reference topology: Poisson jobs
// at 10/s for 30 s through a queue to a model, with the host stolen from in
// seconds 12–17, when the jobs slow down and the queue backs up. Events are
// fed in time order, as the consumer goroutine would.
func queueRun(t testing.TB) *Recorder {
	r := newRecorder(t, Config{})
	rng := rand.New(rand.NewPCG(2025, 3))
	// Products are converted before they are added, so no architecture
	// fuses them into a multiply-add and the golden file stays the same.
	stealAt := func(s float64) float64 {
		if s >= 12 && s < 18 {
			return math.Round(float64(1000*rng.Float64())+3500) / 100
		}
		return math.Round(200*rng.Float64()) / 100
	}

	type event struct {
		at  time.Time
		res *tare.Result
		h   *tare.HostSample
		d   float64
	}
	var events []event
	for s := 0.0; ; s += rng.ExpFloat64() / 10 {
		if s >= 30 {
			break
		}
		res := &tare.Result{Scheduled: sec(s), Sent: sec(s).Add(time.Duration(rng.IntN(2000)) * time.Microsecond), Worker: "w1", Deliveries: 1}
		slow := 1.0
		if s >= 12 && s < 18 {
			slow = 2.5
		}
		res.Started = res.Sent.Add(time.Duration(slow * rng.ExpFloat64() * float64(80*time.Millisecond)))
		res.FirstByte = res.Started.Add(time.Duration(slow * (float64(30*rng.Float64()) + 50) * float64(time.Millisecond)))
		res.OutputTokens, res.TokenSource = 20+rng.IntN(100), "usage"
		res.Done = res.FirstByte.Add(time.Duration(slow*float64(res.OutputTokens-1)*(4+rng.Float64())) * time.Millisecond)
		switch n := rng.IntN(100); {
		case n < 2:
			res.Err = "timeout"
		case n < 3:
			res.Err, res.Status = "http 503", 503
		case n < 4:
			res = &tare.Result{Scheduled: res.Scheduled, Dropped: true}
		}
		at := res.Done
		if res.Dropped {
			at = res.Scheduled
		}
		events = append(events, event{at: at, res: res})
	}
	for k := range 30 {
		// The sampler wakes a little after each boundary.
		jitter := time.Duration(rng.IntN(40)) * time.Millisecond
		h := sample(float64(k), float64(k+1), stealAt(float64(k)))
		h.Start, h.End = h.Start.Add(jitter), h.End.Add(jitter)
		h.PSISome = tare.Float(math.Round(float64(300*rng.Float64())+100) / 100)
		h.RunDelay = tare.Float(math.Round(float64(100*rng.Float64())+50) / 100)
		events = append(events, event{at: h.End, h: &h})
		for q := range 4 {
			d := float64(rng.IntN(3))
			if k >= 12 && k < 18 {
				d += float64(4 * (k - 11))
			}
			events = append(events, event{at: sec(float64(k) + float64(q)/4), d: d + 1})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	for _, e := range events {
		switch {
		case e.res != nil:
			r.AddResult(e.res)
		case e.h != nil:
			r.AddHost(*e.h)
		default:
			r.AddDepth(e.at, e.d-1)
		}
	}
	return r
}

// golden is what TestGolden writes: everything the package computes for one
// run, with the attribution's floats rounded so that a fused multiply-add
// on another architecture cannot change the file.
type golden struct {
	Summary     tare.Summary `json:"summary"`
	Ticks       []tare.Tick  `json:"ticks"`
	Attribution Attribution  `json:"attribution"`
	Warnings    []string     `json:"warnings"`
}

func TestGolden(t *testing.T) {
	r := queueRun(t)
	a := Attribute(r.Ticks())
	a.R2 = math.Round(a.R2*1e4) / 1e4
	for i := range a.Terms {
		a.Terms[i].Coef = math.Round(a.Terms[i].Coef*1e3) / 1e3
		a.Terms[i].Share = math.Round(a.Terms[i].Share*1e2) / 1e2
	}
	g := golden{
		Summary:     r.Summary(sec(32), 30*time.Second),
		Ticks:       r.Ticks(),
		Attribution: a,
		Warnings:    r.Warnings(),
	}
	got, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got = append(got, '\n')
	goldenfile.Check(t, "queue-run.golden.json", got)

	// The story the file tells, checked in words: the stolen seconds are
	// polluted and outside the clean percentiles, and steal or queue depth
	// carry the attribution.
	s := g.Summary
	if s.CleanLatency == nil || s.CleanLatency.Requests == 0 || *s.CleanLatency.P95 >= *s.Latency.P95 {
		t.Errorf("clean latency = %+v, want a p95 below the run's %g", s.CleanLatency, *s.Latency.P95)
	}
	if p := *s.Host.PollutedTicksPct; p != 20 {
		t.Errorf("polluted ticks = %g %%, want 20 (6 of 30)", p)
	}
	if len(a.Terms) == 0 || (a.Terms[0].Name != TermSteal && a.Terms[0].Name != TermQueueDepth) {
		t.Errorf("attribution = %+v, want steal or queue depth on top", a)
	}
}
