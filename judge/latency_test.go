package judge

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// spreadAround is n values evenly spread over ±10 % of v.
func spreadAround(v time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = v - v/10 + time.Duration(i)*v/5/time.Duration(max(n-1, 1))
	}
	return out
}

// timeline builds ticks from the latencies of their requests, one slice
// per tick, with the work in the system flat at 1.
func timeline(requests [][]time.Duration) []tare.Tick {
	start := time.Date(2026, 11, 29, 3, 47, 0, 0, time.UTC)
	ticks := make([]tare.Tick, len(requests))
	for i, r := range requests {
		ticks[i] = tare.Tick{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			Arrivals: len(r), Completions: len(r), InSystem: 1, Sample: r}
		if len(r) > 0 {
			ticks[i].P95 = p95(r)
		}
	}
	return ticks
}

// poissonTicks is n ticks of a Poisson number of requests (mean perTick)
// whose latencies are drawn independently from a lognormal of median med
// and sigma sigma: a service whose latency does not depend on the tick.
func poissonTicks(rng *rand.Rand, n int, perTick float64, med time.Duration, sigma float64) [][]time.Duration {
	out := make([][]time.Duration, n)
	for i := range out {
		k := 0
		for l, p := math.Exp(-perTick), rng.Float64(); p > l; p *= rng.Float64() {
			k++
		}
		for range k {
			out[i] = append(out[i], time.Duration(float64(med)*math.Exp(sigma*rng.NormFloat64())))
		}
	}
	return out
}

// TestLatencyAloneByChance: a service whose latency does not depend on the
// tick, a few requests a tick with varied latencies (the seed's demo: 4
// jobs/s of varied lengths), gives ticks with p95 ≥ 2× the median by
// chance, often enough for the old signal; the test against chance keeps
// the signal quiet on all but about 1 % of the runs in which that
// happens, its level.
func TestLatencyAloneByChance(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	th := DefaultThresholds()
	jumped, fired := 0, 0
	for range 300 {
		ticks := timeline(poissonTicks(rng, 30, 4, 200*time.Millisecond, 0.8))
		sig := latencyAlone(&tare.Summary{}, ticks, th)
		if *sig.Value >= float64(th.LatencyTicks) {
			jumped++
		}
		if sig.Fired {
			fired++
			t.Logf("fired by chance: %s", sig.Detail)
		}
	}
	t.Logf("of 300 runs of 30 ticks at 4 requests a tick: %d with ≥ %d ticks at ≥ 2× the median p95, %d fired", jumped, th.LatencyTicks, fired)
	if jumped < 100 {
		t.Fatalf("only %d of 300 runs jumped: the case does not test the signal", jumped)
	}
	// At p < 0.01, about 1 % of the runs that jumped; 3 % is beyond a
	// binomial's reach at this count.
	if fired > jumped*3/100 {
		t.Errorf("fired on %d of %d runs whose ticks jumped by chance, want about 1 %%", fired, jumped)
	}
}

// TestLatencyAloneStall: the same service stalling 200 ms per request for
// four seconds mid-run, its work flat: the signal fires, and its detail
// says what was compared and how unlikely it was.
func TestLatencyAloneStall(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 3))
	th := DefaultThresholds()
	for run := range 20 {
		requests := poissonTicks(rng, 30, 4, 2*time.Millisecond, 0.5)
		for i := 12; i < 16; i++ {
			for j := range requests[i] {
				requests[i][j] += 200 * time.Millisecond
			}
		}
		sig := latencyAlone(&tare.Summary{}, timeline(requests), th)
		if !sig.Fired {
			t.Errorf("run %d: a 4 s stall at flat work did not fire: %s", run, sig.Detail)
			continue
		}
		for _, want := range []string{"shuffled into ticks of the same sizes", "threshold 0.01", "points at the host"} {
			if !strings.Contains(sig.Detail, want) {
				t.Errorf("run %d: detail %q does not say %q", run, sig.Detail, want)
			}
		}
	}
}

// TestLatencyAloneWork: the same stall while the work in the system rose
// with it is latency explained by more work, not the host.
func TestLatencyAloneWork(t *testing.T) {
	requests := poissonTicks(rand.New(rand.NewPCG(26, 4)), 30, 4, 2*time.Millisecond, 0.5)
	ticks := timeline(requests)
	for i := 12; i < 16; i++ {
		for j := range requests[i] {
			requests[i][j] += 200 * time.Millisecond
		}
		ticks[i].InSystem = 5
		if len(requests[i]) > 0 {
			ticks[i].P95 = p95(requests[i])
		}
	}
	if sig := latencyAlone(&tare.Summary{}, ticks, DefaultThresholds()); sig.Fired {
		t.Errorf("fired with the work in the system five times its median: %s", sig.Detail)
	}
}

// TestLatencyAloneServerQueue: a model target's stall while the server's
// own queue (its waiting requests, from its metrics) rose with it is the
// server queueing, not the host, though tare's requests in flight stayed
// flat; the same stall with the server's queue flat still fires, and says
// the queue was compared.
func TestLatencyAloneServerQueue(t *testing.T) {
	model := &tare.Summary{Model: &tare.ModelSummary{}}
	for _, tt := range []struct {
		name      string
		stallWait float64 // the server's waiting requests during the stall
		fired     bool
	}{
		{name: "queue rose", stallWait: 6, fired: false},
		{name: "queue flat", stallWait: 0, fired: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requests := poissonTicks(rand.New(rand.NewPCG(26, 3)), 30, 4, 2*time.Millisecond, 0.5)
			for i := 12; i < 16; i++ {
				for j := range requests[i] {
					requests[i][j] += 200 * time.Millisecond
				}
			}
			ticks := timeline(requests)
			for i := range ticks {
				w := 0.0
				if i >= 12 && i < 16 {
					w = tt.stallWait
				}
				ticks[i].QueueDepth = &w
			}
			sig := latencyAlone(model, ticks, DefaultThresholds())
			if sig.Fired != tt.fired {
				t.Errorf("fired %v, want %v: %s", sig.Fired, tt.fired, sig.Detail)
			}
			if want := "the server's own queue within +20% / +1 of its median (0.0 waiting)"; !strings.Contains(sig.Detail, want) {
				t.Errorf("detail %q does not say %q", sig.Detail, want)
			}
		})
	}
}

// TestLatencyAloneByEvidence: the same 4 s stall judged where the probe
// measured the waits: the host readings of the slow ticks decide whose it
// was.
func TestLatencyAloneByEvidence(t *testing.T) {
	requests := poissonTicks(rand.New(rand.NewPCG(26, 5)), 30, 4, 2*time.Millisecond, 0.5)
	for i := 12; i < 16; i++ {
		for j := range requests[i] {
			requests[i][j] += 200 * time.Millisecond
		}
	}
	slowTick := func(i int) bool { return i >= 12 && i < 16 }
	hog := tare.Wait{Owner: tare.OwnerOther, Name: "hog", PID: 7, Group: tare.OwnerSUT, Waited: 300 * time.Millisecond}
	hogInSlowTicks := func(i int, h *tare.HostSample) {
		if slowTick(i) {
			w := hog
			w.Start, w.End = h.Start, h.Start.Add(400*time.Millisecond)
			h.Blame.Waits = []tare.Wait{w}
		}
	}
	steal := func(i int, h *tare.HostSample) {
		if slowTick(i) {
			h.CPU.Steal = 20
		}
	}
	// What per-request blame measured of the slowest requests: nothing
	// more than random requests (quiet), or bursts of steal in the ticks
	// they lived in, which moved their p99 from 40 ms to 200 ms (stolen).
	quiet := &tare.Tail{Requests: 300, Slowest: []tare.TailSlice{
		{Pct: 1, Requests: 3, P: 1, StolenP: 0.4, CrowdedP: 1},
		{Pct: 5, Requests: 15, P: 1, StolenP: 0.4, CrowdedP: 1},
	}}
	stolen := &tare.Tail{Requests: 300, Stolen: 40, Unstolen: tare.PercentilesMS{P99: tare.Float(40)}, Slowest: []tare.TailSlice{
		{Pct: 1, Requests: 3, P: 1, Stolen: 3, StolenP: 0.001, StealMS: tare.Float(200), CrowdedP: 1},
	}}
	slight := &tare.Tail{Requests: 300, Unwaited: tare.PercentilesMS{P99: tare.Float(182), P95: tare.Float(190)}, Slowest: []tare.TailSlice{
		{Pct: 1, Requests: 3, Overlapped: 3, P: 0.001, StolenP: 1, CrowdedP: 1},
		{Pct: 5, Requests: 15, Overlapped: 9, P: 0.001, StolenP: 1, CrowdedP: 1},
	}}
	for _, tt := range []struct {
		name    string
		host    func(i int, h *tare.HostSample)
		tail    *tare.Tail
		finding bool
		want    string
		unmoved bool // the signal does not fire: outside waits explain the ticks, but moved too little of the run
	}{
		{"off CPU, nothing outside", func(i int, h *tare.HostSample) {}, nil, true, "off CPU in them", false},
		{"more CPU per request", func(i int, h *tare.HostSample) {
			if slowTick(i) {
				h.CPUBy.SystemUnderTest = 40
			}
		}, nil, true, "usual CPU per request", false},
		{"a hog overlapped", hogInSlowTicks, nil, false, "outside waits overlapped those ticks", false},
		{"a busy host's background, in every tick alike", func(i int, h *tare.HostSample) {
			w := hog
			w.Start, w.End, w.Waited = h.Start, h.Start.Add(100*time.Millisecond), 30*time.Millisecond
			h.Blame.Waits = []tare.Wait{w}
		}, nil, true, "too few to explain them", false},
		{"a neighbour's 20 ms against a 200 ms stall", func(i int, h *tare.HostSample) {
			if slowTick(i) {
				w := hog
				w.Start, w.End, w.Waited = h.Start, h.Start.Add(100*time.Millisecond), 20*time.Millisecond
				h.Blame.Waits = []tare.Wait{w}
			}
		}, nil, true, "too few to explain them", false},
		{"steal", steal, nil, false, "outside waits overlapped those ticks", false},
		{"steal spread over both CPUs, 40 ms of each against a 200 ms stall", func(i int, h *tare.HostSample) {
			if slowTick(i) {
				h.CPU.Steal = 4
				h.PerCPU = []tare.CPUShares{{Steal: 4}, {Steal: 4}}
			}
		}, nil, true, "too few to explain them", false},
		{"steal, which held up no slow request", steal, quiet, true, "slowest requests overlapped them no more than requests drawn at random", false},
		{"steal in bursts the slowest requests lived in", steal, stolen, false, "enough to explain them", false},
		{"a hog the slowest requests did not overlap", hogInSlowTicks, quiet, true, "off CPU in them", false},
		// A neighbour's blip a user would not call a moved run: the
		// slowest overlapped its waits beyond chance, yet without them
		// the p99 would have been 182 ms, not 200 (×1.10).
		{"a hog that moved the p99 too little to matter", hogInSlowTicks, slight, false, "too little to change what the figures say", true},
		{"the CPU ran slower", func(i int, h *tare.HostSample) {
			if slowTick(i) {
				h.FixedWorkUS = tare.Float(90)
			}
		}, nil, false, "CPU itself ran slower", false},
		{"the host's I/O", func(i int, h *tare.HostSample) {
			if slowTick(i) {
				h.PSIIOSome = tare.Float(60)
				h.IOBy = []tare.ProcessIO{{Name: "backup", PID: 99, Bytes: 5e8}}
			}
		}, nil, false, "`backup` (pid 99) did the most I/O", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ticks := timeline(requests)
			for i := range ticks {
				h := &tare.HostSample{Start: ticks[i].Start, End: ticks[i].End, CPUBy: &tare.CPUBy{SystemUnderTest: 10},
					Blame: &tare.Blame{Source: tare.BlameMeasured}, FixedWorkUS: tare.Float(30), PSIIOSome: tare.Float(1)}
				tt.host(i, h)
				ticks[i].Host = h
			}
			s := &tare.Summary{Blame: &tare.Blame{Source: tare.BlameMeasured}, Env: tare.Env{VCPUs: 2}, Tail: tt.tail,
				Latency: tare.LatencyMS{P99: tare.Float(200)}}
			sig := latencyAlone(s, ticks, DefaultThresholds())
			if sig.Fired != !tt.unmoved || sig.Finding != tt.finding || !strings.Contains(sig.Detail, tt.want) {
				t.Errorf("fired %v, finding %v (want %v), detail %q; want it to say %q", sig.Fired, sig.Finding, tt.finding, sig.Detail, tt.want)
			}
			if level := LevelOf(sig); tt.finding != (level == tare.Clean) && !tt.unmoved {
				t.Errorf("level %s with finding %v", level, tt.finding)
			}
		})
	}
	ticks := timeline(requests)
	if sig := latencyAlone(&tare.Summary{}, ticks, DefaultThresholds()); !strings.Contains(sig.Detail, "the tick-level rule") {
		t.Errorf("without the probe, detail %q does not say it used the tick-level rule", sig.Detail)
	}
}
