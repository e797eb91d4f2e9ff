package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/stats"
)

// synth describes a synthetic run: seeded, so the same synth always gives
// the same records, ticks, summary and report.
type synth struct {
	seed  uint64
	ticks int     // one-second ticks
	rate  float64 // Poisson arrivals per second
	steal [2]int  // ticks [from, to) with heavy steal; latency climbs with it
	spike int     // a tick with one very slow request, -1 for none
	queue bool    // a queue target: depth sampled every tick
	model bool    // a model target: first tokens and output tokens
	// probe: the scheduler probe measured every tick but one (tick 5),
	// and from a third of the way in the service waits now and then
	// behind `nightly-batch` and, rarely, a kernel thread; a request
	// scheduled during such a wait is late by it.
	probe  bool
	label  string
	window string
	slo    string
}

var runStart = time.Date(2026, 11, 29, 14, 5, 0, 0, time.UTC)

// build generates the run: its records in the order a live run would
// see them, fed through stats and judge as tare run does.
func (sy synth) build(t testing.TB) (*Run, []tare.Result) {
	t.Helper()
	rng := rand.New(rand.NewPCG(sy.seed, 0x7a4e))
	tick := time.Second
	stealAt := func(i int) float64 {
		if i >= sy.steal[0] && i < sy.steal[1] {
			return 35 + 45*math.Sin(math.Pi*float64(i-sy.steal[0])/float64(sy.steal[1]-sy.steal[0])) + 5*rng.Float64()
		}
		return 2 * rng.Float64()
	}
	steal := make([]float64, sy.ticks)
	for i := range steal {
		steal[i] = stealAt(i)
	}

	waits := make([][]tare.Wait, sy.ticks)
	if sy.probe {
		for i := sy.ticks / 3; i < sy.ticks; i++ {
			for range rng.IntN(4) {
				from := runStart.Add(time.Duration((float64(i) + rng.Float64()) * float64(time.Second)))
				w := tare.Wait{Start: from, End: from.Add(time.Duration(3+rng.IntN(25)) * time.Millisecond), CPU: rng.IntN(2),
					Group: tare.OwnerSUT, Owner: tare.OwnerOther, Name: "nightly-batch", PID: 812 + rng.IntN(2)}
				if rng.IntN(5) == 0 {
					w.Owner, w.Name, w.PID = tare.OwnerKernel, "kworker/1:2", 91
				}
				w.Waited = w.End.Sub(w.Start)
				waits[i] = append(waits[i], w)
			}
		}
	}
	// waitedAt is how long the service waits behind others from t on.
	waitedAt := func(t time.Time) time.Duration {
		for _, ws := range waits {
			for _, w := range ws {
				if !t.Before(w.Start) && t.Before(w.End) {
					return w.End.Sub(t)
				}
			}
		}
		return 0
	}

	var results []tare.Result
	at := 0.0
	for seq := uint64(0); ; seq++ {
		at += rng.ExpFloat64() / sy.rate
		if at >= float64(sy.ticks) {
			break
		}
		i := int(at)
		sched := runStart.Add(time.Duration(at * float64(time.Second)))
		lag := time.Duration(50+rng.IntN(400)) * time.Microsecond
		// Service is log-normal around 8 ms, slowed by the steal of the
		// tick it starts in.
		service := 8 * math.Exp(0.35*rng.NormFloat64()) * (1 + steal[i]/25)
		if i == sy.spike && sy.spike >= 0 {
			service = 1500
			sy.spike = -1
		}
		r := tare.Result{Seq: seq, Scheduled: sched, Sent: sched.Add(lag), Status: 200, BytesIn: 512, BytesOut: 64}
		r.Done = r.Sent.Add(time.Duration(service*float64(time.Millisecond)) + waitedAt(r.Sent))
		if rng.IntN(200) == 0 {
			r.Status, r.Err = 503, "http 503"
		}
		if sy.model {
			r.FirstByte = r.Sent.Add(time.Duration(service * 0.3 * float64(time.Millisecond)))
			r.OutputTokens, r.TokenSource = 40+rng.IntN(120), "usage"
		}
		if sy.queue {
			r.Started = r.Sent.Add(time.Duration(service * 0.2 * float64(time.Millisecond)))
			r.Worker, r.Deliveries = "worker-1", 1
		}
		results = append(results, r)
	}

	rec, err := stats.NewRecorder(stats.Config{Start: runStart, Tick: tick, Grace: time.Duration(sy.ticks+5) * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Feed results in the order they finish, host samples at the end of
	// each tick, as the single consumer of tare run sees them.
	done := slices.Clone(results)
	slices.SortStableFunc(done, func(a, b tare.Result) int { return cmp.Compare(a.Done.UnixNano(), b.Done.UnixNano()) })
	k := 0
	for i := range sy.ticks {
		end := runStart.Add(time.Duration(i+1) * tick)
		for ; k < len(done) && done[k].Done.Before(end); k++ {
			rec.AddResult(&done[k])
		}
		h := tare.HostSample{Start: end.Add(-tick), End: end,
			CPU:       tare.CPUShares{CPU: -1, User: 35, System: 8, Steal: steal[i], Idle: max(57-steal[i], 0)},
			PSISome:   tare.Float(steal[i] / 3),
			Throttled: tare.Float(0),
			RunDelay:  tare.Float(1 + steal[i]/6),
			// A service using about a third of the host, tare a little, a
			// neighbour whenever the steal rises.
			CPUBy: &tare.CPUBy{SystemUnderTest: 30, Tare: 4, Others: 2 + steal[i]/4, Kernel: 2, Unattributed: 1, Steal: steal[i],
				Idle: max(61-steal[i]-steal[i]/4, 0), TopOthers: []tare.ProcessShare{{Name: "batch", PID: 4121, CPUPct: 2 + steal[i]/4}}},
		}
		if sy.probe && i != 5 {
			h.Blame = &tare.Blame{Source: tare.BlameMeasured, Waits: waits[i]}
		}
		rec.AddHost(h)
		if sy.queue {
			rec.AddDepth(end, 3+2*rng.Float64())
		}
	}
	for ; k < len(done); k++ {
		rec.AddResult(&done[k])
	}
	end := runStart.Add(time.Duration(sy.ticks) * tick)
	s := rec.Summary(end, end.Sub(runStart))
	s.Run = tare.Run{ID: "0192f3a4-5b6c-7d8e-9f00-112233445566", Label: sy.label, Window: sy.window,
		Target: "GET http://127.0.0.1:8080/checkout?user=a&b=<c>", Arrival: "poisson 50/s",
		StartedAt: runStart, EndedAt: end, Status: tare.StatusComplete}
	s.Env = tare.Env{Hostname: "vm-1", VCPUs: 2, Kernel: "6.1.0-28-amd64", ClkTck: 100, Cgroup: "v2", PSI: true}
	s.Generator = tare.Generator{CPUPct: tare.Float(4.2), RunDelayPct: tare.Float(0.3)}
	ticks := rec.Ticks()
	var slo judge.SLO
	if sy.slo != "" {
		if slo, err = judge.ParseSLO(sy.slo); err != nil {
			t.Fatal(err)
		}
	}
	th := judge.DefaultThresholds()
	s.Verdict = judge.Judge(&s, ticks, th, slo)
	if att := stats.Attribute(ticks); att.Ticks >= stats.MinAttributionTicks {
		s.Verdict.Attribution = att.Sentence
	}
	s.Thresholds = th.Map()

	run := NewRun(s, ticks)
	if sy.probe {
		// As session hands a stored run's records to the report.
		overlaps, err := stats.NewOverlaps(ticks)
		if err != nil {
			t.Fatal(err)
		}
		run.Exposure = overlaps.Of
	}
	for i := range results {
		run.AddResult(&results[i])
	}
	return run, results
}

// UnmarshalJSON reads [x, y] back, y null as a gap, for tests that parse
// the data part.
func (p *point) UnmarshalJSON(b []byte) error {
	var v [2]*float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v[0] == nil {
		return fmt.Errorf("point %s has no x", b)
	}
	p.X, p.Y = *v[0], math.NaN()
	if v[1] != nil {
		p.Y = *v[1]
	}
	return nil
}
