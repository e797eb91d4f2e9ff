package judge

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// articleRuns is testdata/article-runs.json, the seed's two runs (a copy of
// shared/fixtures/article-runs.json).
type articleRuns struct {
	Runs []struct {
		Label    string `json:"label"`
		Requests int    `json:"requests"`
		Latency  struct {
			Avg, P95, P99 float64
		} `json:"latency_s"`
		CPUBusy     float64 `json:"cpu_busy_pct"`
		StealPerSec []struct {
			At    string  `json:"at"`
			Steal float64 `json:"steal"`
		} `json:"steal_pct_per_second"`
		StealMean *float64 `json:"steal_pct_mean"`
	} `json:"runs"`
	StealThreshold float64 `json:"steal_threshold_pct"`
}

func loadArticle(t *testing.T) articleRuns {
	t.Helper()
	b, err := os.ReadFile("testdata/article-runs.json")
	if err != nil {
		t.Fatal(err)
	}
	var a articleRuns
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// run builds a summary and timeline from per-tick steal, with a flat load.
func run(steal []float64, perCPU ...[]float64) (*tare.Summary, []tare.Tick) {
	start := time.Date(2026, 11, 29, 3, 47, 0, 0, time.UTC)
	var ticks []tare.Tick
	sum, worst := 0.0, 0.0
	for i, st := range steal {
		h := &tare.HostSample{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second)}
		h.CPU = tare.CPUShares{CPU: -1, Steal: st, Idle: 100 - st}
		for c, cpu := range perCPU {
			h.PerCPU = append(h.PerCPU, tare.CPUShares{CPU: c, Steal: cpu[i], Idle: 100 - cpu[i]})
		}
		ticks = append(ticks, tare.Tick{Start: h.Start, End: h.End, Arrivals: 10, Completions: 10, P95: 100 * time.Millisecond, InFlight: 2, InSystem: 2, Host: h,
			Sample: spreadAround(100*time.Millisecond, 10)})
		sum += st
		worst = max(worst, h.MaxCPUSteal())
	}
	s := &tare.Summary{}
	s.Host.Ticks = len(steal)
	if len(steal) > 0 {
		s.Host.Steal.Mean = tare.Float(sum / float64(len(steal)))
		s.Host.Steal.MaxCPU = tare.Float(worst)
	}
	s.SendLag.P99 = tare.Float(0.3)
	return s, ticks
}

func TestArticleRuns(t *testing.T) {
	a := loadArticle(t)
	th := DefaultThresholds()
	if th.Steal != a.StealThreshold {
		t.Fatalf("default steal threshold %g, fixture says %g", th.Steal, a.StealThreshold)
	}

	var busy []float64
	for _, s := range a.Runs[0].StealPerSec {
		busy = append(busy, s.Steal)
	}
	s, ticks := run(busy)
	v := Judge(s, ticks, th, nil)
	if v.Level != tare.Polluted {
		t.Errorf("run 1: level %s, want polluted", v.Level)
	}
	sig := find(t, v, SignalSteal)
	if !sig.Fired || *sig.Value < 51.03 || *sig.Value > 51.05 {
		t.Errorf("run 1: steal signal %+v, want fired at mean 51.04", sig)
	}
	for _, line := range v.Advice {
		if strings.Contains(strings.ToLower(line), "scale up") && !strings.HasPrefix(line, "Do not") {
			t.Errorf("polluted run advises scaling: %q", line)
		}
	}

	quiet := make([]float64, 10)
	for i := range quiet {
		quiet[i] = *a.Runs[1].StealMean
	}
	s, ticks = run(quiet)
	v = Judge(s, ticks, th, nil)
	if sig := find(t, v, SignalSteal); sig.Fired {
		t.Errorf("run 2: steal signal fired at 4 %%: %+v", sig)
	}
	if v.Level != tare.Clean {
		t.Errorf("run 2: level %s, want clean", v.Level)
	}
}

func TestSteal(t *testing.T) {
	tests := []struct {
		name   string
		steal  []float64
		perCPU [][]float64
		fired  bool
		detail string
	}{
		{"quiet", []float64{1, 2, 1, 0, 3, 1, 2, 1, 0, 1}, nil, false, "averaged 1.2%"},
		{"mean above", []float64{12, 11, 13, 12}, nil, true, "averaged 12.0%"},
		{"bursts", []float64{0, 0, 0, 0, 0, 0, 0, 0, 30, 30}, nil, true, "in 20% of ticks"},
		{"exactly 10 % of ticks is not more than 10 %", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 50}, nil, false, "in 1 of 10 ticks"},
		{"one starved vCPU", []float64{8, 8, 8, 8}, [][]float64{{0, 0, 0, 0}, {16, 16, 16, 16}}, true, "CPU 1 alone averaged 16.0%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(tt.steal, tt.perCPU...)
			sig := find(t, Judge(s, ticks, DefaultThresholds(), nil), SignalSteal)
			if sig.Fired != tt.fired || !strings.Contains(sig.Detail, tt.detail) {
				t.Errorf("fired %v detail %q; want fired %v and %q", sig.Fired, sig.Detail, tt.fired, tt.detail)
			}
		})
	}
}

func TestUnmeasuredIsNotZero(t *testing.T) {
	s, ticks := run(nil)
	v := Judge(s, ticks, DefaultThresholds(), nil)
	for _, name := range []string{SignalSteal, SignalThrottling, SignalRunDelay} {
		sig := find(t, v, name)
		if sig.Fired || sig.Value != nil || !strings.Contains(sig.Detail, "not measured") {
			t.Errorf("%s: %+v, want unfired, null value, 'not measured'", name, sig)
		}
	}
	if len(v.Warnings) == 0 || !strings.Contains(v.Warnings[0], "not sampled") {
		t.Errorf("warnings %q, want one saying the host was not sampled", v.Warnings)
	}
}

func TestLevels(t *testing.T) {
	pct := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		edit  func(*tare.Summary, []tare.Tick)
		level tare.Level
		fired string
	}{
		{"clean", func(*tare.Summary, []tare.Tick) {}, tare.Clean, ""},
		{"throttled", func(s *tare.Summary, ticks []tare.Tick) {
			for i := range ticks {
				ticks[i].Host.Throttled = pct(0)
			}
			ticks[3].Host.Throttled = pct(40)
		}, tare.Polluted, SignalThrottling},
		{"run delay", func(s *tare.Summary, _ []tare.Tick) { s.Host.RunDelayPct = pct(12) }, tare.Suspect, SignalRunDelay},
		{"send lag", func(s *tare.Summary, _ []tare.Tick) { s.SendLag.P99 = pct(25) }, tare.Polluted, SignalGenerator},
		// tare waiting for a CPU beside the service it loads is co-location:
		// it changes nothing as long as tare sends on time.
		{"generator run delay", func(s *tare.Summary, _ []tare.Tick) { s.Generator.RunDelayPct = pct(9) }, tare.Clean, ""},
		// A service waiting behind its own threads: load, not interference.
		{"run delay of its own load", func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.RunDelayPct, s.Host.NeighbourWaitPct = pct(40), pct(0.4)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 90, Tare: 8, Others: 1, Idle: 1}
		}, tare.Clean, ""},
		{"neighbours", func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.RunDelayPct, s.Host.NeighbourWaitPct = pct(30), pct(12)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 10, Tare: 5, Others: 50, Idle: 35, TopOthers: []tare.ProcessShare{{Name: "sh", PID: 4121, CPUPct: 48}}}
		}, tare.Polluted, SignalNeighbours},
		// One tick behind a neighbour (a shell command) is a blip; two are not.
		{"one tick behind a neighbour", func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.RunDelayPct, s.Host.NeighbourWaitPct = pct(3), pct(2)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 10, Others: 2, Idle: 88}
			ticks[4].Host.RunDelay, ticks[4].Host.CPUBy = pct(30), &tare.CPUBy{SystemUnderTest: 10, Others: 20, Idle: 70}
		}, tare.Clean, ""},
		{"two ticks behind a neighbour", func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.RunDelayPct, s.Host.NeighbourWaitPct = pct(6), pct(4)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 10, Others: 4, Idle: 86}
			for _, i := range []int{4, 7} {
				ticks[i].Host.RunDelay, ticks[i].Host.CPUBy = pct(30), &tare.CPUBy{SystemUnderTest: 10, Others: 20, Idle: 70}
			}
		}, tare.Polluted, SignalNeighbours},
		{"saturated", func(s *tare.Summary, ticks []tare.Tick) {
			for i := range ticks {
				ticks[i].Arrivals, ticks[i].Completions, ticks[i].InFlight = 100, 80, 20*(i+1)
			}
		}, tare.Clean, SignalSaturation},
		{"latency moves, in-flight flat", func(s *tare.Summary, ticks []tare.Tick) {
			for _, i := range []int{2, 5, 7} {
				ticks[i].P95 = 400 * time.Millisecond
				ticks[i].Sample = spreadAround(400*time.Millisecond, 10)
			}
		}, tare.Suspect, SignalLatencyAlone},
		{"latency moves with in-flight", func(s *tare.Summary, ticks []tare.Tick) {
			for _, i := range []int{2, 5, 7} {
				ticks[i].P95 = 400 * time.Millisecond
				ticks[i].Sample = spreadAround(400*time.Millisecond, 10)
				ticks[i].InSystem = 20
			}
		}, tare.Clean, ""},
		// The work of a queue is its jobs in the system, queued and in
		// service: a queue that stays empty while the workers hold more
		// jobs is more work.
		{"latency moves, jobs in the system flat", func(s *tare.Summary, ticks []tare.Tick) {
			for i := range ticks {
				ticks[i].QueueDepth = pct(0)
			}
			for _, i := range []int{1, 4, 8} {
				ticks[i].P95 = time.Second
				ticks[i].Sample = spreadAround(time.Second, 10)
			}
		}, tare.Suspect, SignalLatencyAlone},
		{"latency moves with the jobs in service, queue empty", func(s *tare.Summary, ticks []tare.Tick) {
			for i := range ticks {
				ticks[i].QueueDepth = pct(0)
			}
			for _, i := range []int{1, 4, 8} {
				ticks[i].P95 = time.Second
				ticks[i].Sample = spreadAround(time.Second, 10)
				ticks[i].InSystem = 12
			}
		}, tare.Clean, ""},
		// Three slow ticks whose requests are no slower than the others':
		// their p95 is one request each, which the run's own requests
		// give ticks by chance.
		{"latency moves by chance", func(s *tare.Summary, ticks []tare.Tick) {
			for _, i := range []int{1, 4, 8} {
				ticks[i].P95 = 400 * time.Millisecond
				ticks[i].Sample[3] = 400 * time.Millisecond
			}
		}, tare.Clean, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(make([]float64, 10))
			tt.edit(s, ticks)
			v := Judge(s, ticks, DefaultThresholds(), nil)
			var fired []string
			for _, sig := range Fired(v) {
				fired = append(fired, sig.Name)
			}
			want := []string{}
			if tt.fired != "" {
				want = []string{tt.fired}
			}
			if v.Level != tt.level || strings.Join(fired, ",") != strings.Join(want, ",") {
				t.Errorf("level %s fired %v; want %s %v", v.Level, fired, tt.level, want)
			}
		})
	}
}

// TestNeighbourNamed: the neighbours signal names the busiest other
// process, or container, in shares of one CPU, and the advice says to stop
// it, in its runtime's words for a container.
func TestNeighbourNamed(t *testing.T) {
	const id = "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5"
	tests := []struct {
		name             string
		top              []tare.ProcessShare
		detail, stopping string
	}{
		{"a process", []tare.ProcessShare{{Name: "batch", PID: 4121, CPUPct: 48}},
			"`batch` (pid 4121) used 96% of a CPU", "Stop `batch` (pid 4121) or move it elsewhere"},
		// Issue 40: two processes of one command in other families are
		// two neighbours: the busiest is named alone, not with the other.
		{"two of one command", []tare.ProcessShare{{Name: "sh", PID: 7, CPUPct: 24}, {Name: "sh", PID: 9, CPUPct: 23}},
			"`sh` (pid 7) used 48% of a CPU and other processes 52% more", "Stop `sh` (pid 7) or move it elsewhere"},
		{"a service of several processes", []tare.ProcessShare{{Name: "gunicorn", PID: 100, PIDs: []int{100, 101, 102}, CPUPct: 48}},
			"`gunicorn` (pids 100, 101, 102) used 96% of a CPU", "Stop `gunicorn` (pids 100, 101, 102) or move it elsewhere"},
		{"a command inside and outside a container", []tare.ProcessShare{{Name: "sh", PID: 7, CPUPct: 30},
			{Name: "sh", PID: 9, CPUPct: 18, Container: &tare.Container{ID: id, Runtime: "docker"}, Processes: 1}},
			"`sh` (pid 7) used 60% of a CPU and other processes 40% more", "Stop `sh` (pid 7)"},
		{"a docker container", []tare.ProcessShare{{Name: "redis-server", PID: 4121, CPUPct: 48, Processes: 3,
			Container: &tare.Container{ID: id, Runtime: "docker", Name: "redis-cache", Image: "redis:7"}}},
			"container `redis-cache` (docker 863e2e323075, redis:7), 3 processes, busiest `redis-server` (pid 4121) used 96% of a CPU",
			"Stop container `redis-cache` (docker 863e2e323075, redis:7) during the test (docker stop redis-cache)"},
		{"a podman container with no name", []tare.ProcessShare{{Name: "nginx", PID: 51, CPUPct: 48, Processes: 1,
			Container: &tare.Container{ID: id, Runtime: "podman"}}},
			"container 863e2e323075 (podman), `nginx` (pid 51) used 96% of a CPU", "(podman stop 863e2e323075)"},
		{"a pod's container", []tare.ProcessShare{{Name: "worker", PID: 61, CPUPct: 48, Processes: 2,
			Container: &tare.Container{ID: id, Runtime: "containerd", Name: "worker", Pod: "jobs/worker-5c7d8f9b6-m2n3p"}}},
			"container `worker` of pod jobs/worker-5c7d8f9b6-m2n3p (containerd 863e2e323075), 2 processes, busiest `worker` (pid 61) used 96% of a CPU",
			"(move the pod, or the test, to another node)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(make([]float64, 10))
			s.Env.VCPUs = 2
			s.SUT = &tare.SUTSummary{PIDs: []int{77}}
			s.Host.RunDelayPct, s.Host.NeighbourWaitPct = tare.Float(30), tare.Float(11.6)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 10, Tare: 5, Others: 50, Idle: 35, TopOthers: tt.top}
			v := Judge(s, ticks, DefaultThresholds(), nil)
			sig := find(t, v, SignalNeighbours)
			want := tt.detail + ", while the system under test waited for a CPU 11.6% of the time behind them"
			if !sig.Fired || !strings.Contains(sig.Detail, want) {
				t.Errorf("neighbours: %+v; want fired with %q", sig, want)
			}
			if !strings.Contains(strings.Join(v.Advice, "\n"), tt.stopping) {
				t.Errorf("advice %q does not say %q", v.Advice, tt.stopping)
			}
			for _, a := range v.Advice {
				if strings.Contains(a, "scale") && !strings.Contains(a, "Do not scale") {
					t.Errorf("a polluted run advises scaling: %q", a)
				}
			}
		})
	}
}

// TestSaturationNamesTheRateServed: a model server offered 4 arrivals/s
// that served 2 or 3 a tick (Ollama's run in issue 44) fell behind at what
// it served, about 2.1/s, not at the arrival rate.
func TestSaturationNamesTheRateServed(t *testing.T) {
	s, ticks := run(make([]float64, 12))
	served := []int{2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2}
	for i := range ticks {
		ticks[i].Arrivals, ticks[i].Completions, ticks[i].InFlight = 4, served[i], 2+2*i
	}
	sig := find(t, Judge(s, ticks, DefaultThresholds(), nil), SignalSaturation)
	if !sig.Fired {
		t.Fatalf("saturation %+v; want fired", sig)
	}
	// From the tick where work outstanding passed its bar (the sixth: 12 >
	// 2·5) to the end: 14 completions in 7 s.
	if want := "sustaining about 2.0/s against 4.0 arrivals/s"; !strings.Contains(sig.Detail, want) {
		t.Errorf("detail %q\nwant it to say %q", sig.Detail, want)
	}
	if strings.Contains(sig.Detail, "from about 4") {
		t.Errorf("detail %q names the arrival rate as the rate it fell behind at", sig.Detail)
	}
}

// TestSaturationCountsTheDrain: a model server whose requests take
// longer than the arrivals last (Ollama's four slots, 24 requests of 128
// tokens at 4/s) finished none while they arrived: what it served is its
// rate after, while the work piled up drained, not 0/s; and requests
// that timed out were not served.
func TestSaturationCountsTheDrain(t *testing.T) {
	tests := []struct {
		name   string
		errors int // of the completions of each drain tick
		want   string
	}{
		{"every request answered", 0, "sustaining about 2.0/s against 4.0 arrivals/s"},
		{"half of them timed out", 1, "sustaining about 1.0/s against 4.0 arrivals/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(make([]float64, 20))
			inFlight := 0
			for i := range ticks {
				ticks[i].Arrivals, ticks[i].Completions, ticks[i].Errors = 0, 0, 0
				if i < 6 {
					ticks[i].Arrivals = 4
				} else if inFlight > 0 {
					ticks[i].Completions, ticks[i].Errors = 2, tt.errors
				}
				inFlight += ticks[i].Arrivals - ticks[i].Completions
				ticks[i].InFlight = inFlight
			}
			sig := find(t, Judge(s, ticks, DefaultThresholds(), nil), SignalSaturation)
			if !sig.Fired {
				t.Fatalf("saturation %+v; want fired", sig)
			}
			// Served: from the first completion (the seventh tick) to the
			// last with more outstanding than early on (6): 8 ticks.
			if !strings.Contains(sig.Detail, tt.want) {
				t.Errorf("detail %q\nwant it to say %q", sig.Detail, tt.want)
			}
		})
	}
}

// TestSaturationIsAboutTheCode: a clean host where the service falls
// behind: clean, saturation fired with the rate, and a failed SLO blamed on
// the code.
func TestSaturationIsAboutTheCode(t *testing.T) {
	s, ticks := run(make([]float64, 10))
	s.Env.VCPUs = 2
	s.SUT = &tare.SUTSummary{PIDs: []int{77}}
	s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 88, Tare: 8, Kernel: 2, Idle: 2}
	s.Latency.P95 = tare.Float(900)
	for i := range ticks {
		ticks[i].Arrivals, ticks[i].Completions, ticks[i].InFlight = 260, 245, 15*(i+1)
	}
	slo, err := ParseSLO("p95<=300ms")
	if err != nil {
		t.Fatal(err)
	}
	v := Judge(s, ticks, DefaultThresholds(), slo)
	sig := find(t, v, SignalSaturation)
	if v.Level != tare.Clean || !sig.Fired {
		t.Fatalf("level %s, saturation %+v; want clean with saturation fired", v.Level, sig)
	}
	for _, want := range []string{"sustaining about 245/s against 260 arrivals/s", "used 1.8 of 2 CPUs", "ran out of CPU"} {
		if !strings.Contains(sig.Detail, want) {
			t.Errorf("saturation detail %q lacks %q", sig.Detail, want)
		}
	}
	if advice := strings.Join(v.Advice, "\n"); !strings.Contains(advice, "the problem is the code") {
		t.Errorf("advice %q does not blame the code for the failed SLO", advice)
	}
}

func TestSLOAdvice(t *testing.T) {
	slo, err := ParseSLO("p95<=200ms")
	if err != nil {
		t.Fatal(err)
	}
	s, ticks := run([]float64{0, 1, 0, 2, 0, 14, 0, 1, 0, 0})
	s.Latency.P95 = tare.Float(250)
	s.Host.Steal.Max = tare.Float(14)
	v := Judge(s, ticks, DefaultThresholds(), slo)
	if Met(v.SLO) || len(v.SLO) != 1 || *v.SLO[0].Value != 250 {
		t.Fatalf("SLO checks %+v, want p95 250 > 200 not met", v.SLO)
	}
	all := strings.Join(v.Advice, "\n")
	for _, want := range []string{"failed on a quiet host", "cannot guarantee a hard SLO"} {
		if !strings.Contains(all, want) {
			t.Errorf("advice lacks %q:\n%s", want, all)
		}
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "p95<=2s", want: "p95<=2s"},
		{in: " P99 < 800ms , avg<=300ms", want: "p99<=800ms,avg<=300ms"},
		{in: "ttft<=500ms,tpot<=50ms", want: "ttft<=500ms,tpot<=50ms"},
		{in: "p95>=2s", err: "must look like p95<=2s"},
		{in: "p95", err: "must look like p95<=2s"},
		{in: "p42<=1s", err: `unknown figure "p42"`},
		{in: "p95<=fast", err: `got "fast"`},
		{in: "p95<=-1s", err: "positive duration"},
		{in: ",", err: "at least one objective"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			slo, err := ParseSLO(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("err %v, want EINVALID containing %q", err, tt.err)
				}
				return
			}
			if err != nil || slo.String() != tt.want {
				t.Fatalf("got %q, %v; want %q", slo, err, tt.want)
			}
		})
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"p95<=2s", "p99<800ms,avg<=1s", "ttft<=500ms", "", "<=", "p95<=1h2m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := ParseSLO(s)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("error %v is not EINVALID", err)
			}
			return
		}
		again, err := ParseSLO(slo.String())
		if err != nil || again.String() != slo.String() {
			t.Fatalf("round trip of %q: %q, %v", slo.String(), again, err)
		}
	})
}

func find(t *testing.T, v tare.Verdict, name string) tare.Signal {
	t.Helper()
	for _, s := range v.Signals {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no signal %q in %+v", name, v.Signals)
	return tare.Signal{}
}

func TestPerRequest(t *testing.T) {
	slo, err := ParseSLO("ttft<=100ms,e2e<=1s,p99<=2s")
	if err != nil {
		t.Fatal(err)
	}
	good, name := slo.PerRequest()
	if name != "ttft<=100ms,e2e<=1s" {
		t.Errorf("objectives %q, want the per-request ones only", name)
	}
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	req := func(ttft, e2e time.Duration) *tare.Result {
		return &tare.Result{Scheduled: t0, Sent: t0, FirstByte: t0.Add(ttft), Done: t0.Add(e2e), OutputTokens: 10}
	}
	tests := []struct {
		name string
		res  *tare.Result
		want bool
	}{
		{"fast", req(50*time.Millisecond, 800*time.Millisecond), true},
		{"slow first token", req(150*time.Millisecond, 800*time.Millisecond), false},
		{"slow end", req(50*time.Millisecond, 1200*time.Millisecond), false},
		{"no first token", &tare.Result{Scheduled: t0, Sent: t0, Done: t0.Add(time.Millisecond)}, false},
	}
	for _, tt := range tests {
		if got := good(tt.res); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if f, _ := SLO(nil).PerRequest(); f != nil {
		t.Errorf("an SLO without per-request objectives gave a test")
	}
}

// TestSLONotMetWithoutSuccess: refusals are fast, but a latency objective
// is about the requests served: with none succeeded, none is met.
func TestSLONotMetWithoutSuccess(t *testing.T) {
	slo, err := ParseSLO("p95<=50ms,avg<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		ok, errs int
		met      bool
	}{
		{"all refused", 0, 40, false},
		{"one served", 1, 39, true},
		{"all served", 40, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &tare.Summary{}
			s.Requests.OK, s.Requests.Errors = tt.ok, tt.errs
			s.Latency.P95, s.Latency.Avg = tare.Float(1), tare.Float(1)
			checks := slo.Check(s)
			if Met(checks) != tt.met {
				t.Errorf("%d ok, %d failed, 1 ms: SLO met %v; want %v (%+v)", tt.ok, tt.errs, Met(checks), tt.met, checks)
			}
		})
	}
}

// TestThresholdsOf: the thresholds a summary records come back as they
// were; those it does not name are the defaults.
func TestThresholdsOf(t *testing.T) {
	custom := DefaultThresholds()
	custom.Steal, custom.LatencyTicks, custom.LatencyFloor, custom.SendLagP99 = 25, 7, 3*time.Millisecond, 40*time.Millisecond
	for _, th := range []Thresholds{DefaultThresholds(), custom} {
		if got := ThresholdsOf(th.Map()); got != th {
			t.Errorf("ThresholdsOf(%v) = %+v; want %+v", th.Map(), got, th)
		}
	}
	if got := ThresholdsOf(map[string]float64{"steal_pct": 25}); got.Steal != 25 || got.SendLagP99 != DefaultThresholds().SendLagP99 {
		t.Errorf("ThresholdsOf of one threshold = %+v; want it and the defaults", got)
	}
}
