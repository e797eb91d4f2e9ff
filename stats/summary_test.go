package stats

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

func TestNewRecorderConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" for success
		want    Config
	}{
		{
			name: "defaults",
			cfg:  Config{Start: t0},
			want: Config{Start: t0, Tick: time.Second, Threshold: 10, Grace: 2 * time.Second, MaxTicks: DefaultMaxTicks},
		},
		{
			name: "grace is two ticks when ticks are long",
			cfg:  Config{Start: t0, Tick: 5 * time.Second, Threshold: 25},
			want: Config{Start: t0, Tick: 5 * time.Second, Threshold: 25, Grace: 10 * time.Second, MaxTicks: DefaultMaxTicks},
		},
		{name: "no start", cfg: Config{}, wantErr: "run start is not set"},
		{name: "tick too short", cfg: Config{Start: t0, Tick: 50 * time.Millisecond}, wantErr: `tick "50ms" is too short: use 100ms or more`},
		{name: "negative tick", cfg: Config{Start: t0, Tick: -time.Second}, wantErr: "too short"},
		{name: "threshold above 100", cfg: Config{Start: t0, Threshold: 150}, wantErr: `threshold "150" is not a share`},
		{name: "negative threshold", cfg: Config{Start: t0, Threshold: -1}, wantErr: "not a share"},
		{name: "NaN threshold", cfg: Config{Start: t0, Threshold: math.NaN()}, wantErr: "not a share"},
		{name: "negative grace", cfg: Config{Start: t0, Grace: -time.Second}, wantErr: "grace"},
		{name: "negative max ticks", cfg: Config{Start: t0, MaxTicks: -1}, wantErr: "max ticks -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRecorder(tt.cfg)
			if tt.wantErr != "" {
				var te *tare.Error
				if !errors.As(err, &te) || te.Code != tare.EINVALID {
					t.Fatalf("NewRecorder() error = %v, want a *tare.Error with code EINVALID", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("NewRecorder() error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRecorder() error = %v", err)
			}
			if got := r.Config(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Config() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSummaryHandComputed checks every request figure against values worked
// out by hand: ten sent requests with latencies 10, 20, … 100 ms (each sent
// 1 ms late), two of them failed, and one dropped arrival.
func TestSummaryHandComputed(t *testing.T) {
	r := newRecorder(t, Config{})
	for i := 1; i <= 10; i++ {
		res := result(float64(i-1)/10, 1, float64(10*i-1))
		switch i {
		case 3:
			res.Err, res.Status = "timeout", 0
		case 7:
			res.Err, res.Status = "http 503", 503
		case 8:
			res.Redirects = 2 // the server answered this request three times
		case 9:
			res.Redirects = 1
		}
		r.AddResult(res)
	}
	r.AddResult(&tare.Result{Scheduled: sec(1.05), Dropped: true})

	s := r.Summary(sec(2), 1100*time.Millisecond)

	if s.Schema != tare.SummarySchema {
		t.Errorf("Schema = %q, want %q", s.Schema, tare.SummarySchema)
	}
	if want := (tare.Requests{Total: 11, OK: 8, Errors: 2, Dropped: 1, Redirects: 3}); s.Requests != want {
		t.Errorf("Requests = %+v, want %+v", s.Requests, want)
	}
	if want := map[string]int{"timeout": 1, "http 503": 1}; !maps.Equal(s.ErrorKinds, want) {
		t.Errorf("ErrorKinds = %v, want %v", s.ErrorKinds, want)
	}
	if want := map[string]int{"200": 8, "503": 1}; !maps.Equal(s.StatusCodes, want) {
		t.Errorf("StatusCodes = %v, want %v", s.StatusCodes, want)
	}
	near(t, "offered", s.Rate.Offered, 10, 0)  // 11 arrivals / 1.1 s
	near(t, "achieved", s.Rate.Achieved, 5, 0) // 10 completions / 2 s

	// Percentile ranks over 10 values: p50 → 5th, p90 → 9th, p95 and p99 → 10th.
	near(t, "latency avg", s.Latency.Avg, 55, 0)
	near(t, "latency p50", s.Latency.P50, 50, hdrTol)
	near(t, "latency p90", s.Latency.P90, 90, hdrTol)
	near(t, "latency p95", s.Latency.P95, 100, hdrTol)
	near(t, "latency p99", s.Latency.P99, 100, hdrTol)
	near(t, "latency max", s.Latency.Max, 100, 0)
	near(t, "service p50", s.Service.P50, 49, hdrTol)
	near(t, "service p95", s.Service.P95, 99, hdrTol)
	near(t, "service max", s.Service.Max, 99, 0)
	near(t, "send lag p50", s.SendLag.P50, 1, hdrTol)
	near(t, "send lag p99", s.SendLag.P99, 1, hdrTol)
	near(t, "send lag max", s.SendLag.Max, 1, 0)

	if s.Queue != nil || s.Model != nil {
		t.Errorf("Queue, Model = %v, %v, want nil for plain HTTP results", s.Queue, s.Model)
	}
}

// TestSummaryNulls checks that what was not measured is nil, never 0.
func TestSummaryNulls(t *testing.T) {
	tests := []struct {
		name  string
		feed  func(r *Recorder)
		check func(t *testing.T, s tare.Summary)
	}{
		{
			name: "nothing recorded",
			feed: func(*Recorder) {},
			check: func(t *testing.T, s tare.Summary) {
				l := s.Latency
				for name, p := range map[string]*float64{"avg": l.Avg, "p50": l.P50, "p90": l.P90, "p95": l.P95, "p99": l.P99, "max": l.Max,
					"service p50": s.Service.P50, "service max": s.Service.Max, "send lag p99": s.SendLag.P99} {
					isNil(t, name, p)
				}
				near(t, "offered", s.Rate.Offered, 0, 0)
			},
		},
		{
			name: "only dropped arrivals",
			feed: func(r *Recorder) {
				r.AddResult(&tare.Result{Scheduled: sec(0.1), Dropped: true})
			},
			check: func(t *testing.T, s tare.Summary) {
				isNil(t, "latency p50", s.Latency.P50)
				isNil(t, "send lag p50", s.SendLag.P50)
				if s.Requests.Dropped != 1 || s.Requests.Total != 1 {
					t.Errorf("Requests = %+v, want 1 dropped of 1", s.Requests)
				}
			},
		},
		{
			name: "no host samples",
			feed: func(r *Recorder) { r.AddResult(result(0.1, 0, 20)) },
			check: func(t *testing.T, s tare.Summary) {
				h := s.Host
				for name, p := range map[string]*float64{"cpu busy": h.CPUBusyPct, "steal mean": h.Steal.Mean, "steal max": h.Steal.Max,
					"steal max_cpu": h.Steal.MaxCPU, "polluted": h.PollutedTicksPct, "psi": h.PSISomePct, "throttled": h.ThrottledPct, "run delay": h.RunDelayPct} {
					isNil(t, name, p)
				}
				if h.Ticks != 0 {
					t.Errorf("Host.Ticks = %d, want 0", h.Ticks)
				}
				if s.CleanLatency != nil {
					t.Errorf("CleanLatency = %+v, want nil without host samples", s.CleanLatency)
				}
			},
		},
		{
			name: "host samples without optional sources",
			feed: func(r *Recorder) { r.AddHost(sample(0, 1, 2)) },
			check: func(t *testing.T, s tare.Summary) {
				near(t, "steal mean", s.Host.Steal.Mean, 2, 0)
				isNil(t, "psi", s.Host.PSISomePct)
				isNil(t, "throttled", s.Host.ThrottledPct)
				isNil(t, "run delay", s.Host.RunDelayPct)
				if s.CleanLatency == nil || s.CleanLatency.Requests != 0 || s.CleanLatency.P50 != nil {
					t.Errorf("CleanLatency = %+v, want 0 requests and nil percentiles", s.CleanLatency)
				}
				isNil(t, "latency p50", s.Latency.P50)
			},
		},
		{
			name: "zero spans",
			feed: func(r *Recorder) { r.AddResult(result(0, 0, 10)) },
			check: func(t *testing.T, s tare.Summary) {
				// Summary(t0, 0): no arrival window and no wall time.
				isNil(t, "offered", s.Rate.Offered)
				isNil(t, "achieved", s.Rate.Achieved)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder(t, Config{})
			tt.feed(r)
			end, span := sec(1), time.Second
			if tt.name == "zero spans" {
				end, span = t0, 0
			}
			tt.check(t, r.Summary(end, span))
		})
	}
}

func TestSummaryQueue(t *testing.T) {
	tests := []struct {
		name      string
		waits     []float64 // ms; one queue job each
		depths    []float64
		wantWait  []float64 // avg, p50, p95, p99; nil for none
		wantDepth []float64 // mean, max; nil for none
	}{
		{
			name:      "jobs and depth",
			waits:     []float64{10, 20, 30, 40},
			depths:    []float64{1, 2, 3, 6},
			wantWait:  []float64{25, 20, 40, 40},
			wantDepth: []float64{3, 6},
		},
		{name: "depth samples only", depths: []float64{0, 4}, wantDepth: []float64{2, 4}},
		{name: "jobs only", waits: []float64{5}, wantWait: []float64{5, 5, 5, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder(t, Config{})
			for i, w := range tt.waits {
				res := result(float64(i)/10, 0, w+100)
				res.Started = res.Sent.Add(msd(w))
				r.AddResult(res)
			}
			for i, d := range tt.depths {
				r.AddDepth(sec(float64(i)/4), d)
			}
			r.AddDepth(sec(0.1), math.NaN()) // ignored
			q := r.Summary(sec(2), time.Second).Queue
			if q == nil {
				t.Fatal("Queue = nil, want figures")
			}
			if tt.wantWait == nil {
				isNil(t, "wait avg", q.Wait.Avg)
				isNil(t, "wait p95", q.Wait.P95)
			} else {
				near(t, "wait avg", q.Wait.Avg, tt.wantWait[0], 0)
				near(t, "wait p50", q.Wait.P50, tt.wantWait[1], hdrTol)
				near(t, "wait p95", q.Wait.P95, tt.wantWait[2], hdrTol)
				near(t, "wait p99", q.Wait.P99, tt.wantWait[3], hdrTol)
			}
			if tt.wantDepth == nil {
				isNil(t, "depth mean", q.Depth.Mean)
			} else {
				near(t, "depth mean", q.Depth.Mean, tt.wantDepth[0], 0)
				near(t, "depth max", q.Depth.Max, tt.wantDepth[1], 0)
			}
		})
	}
}

func TestSummaryModel(t *testing.T) {
	tests := []struct {
		name       string
		tokens     []int // one call each: TTFT 100 ms, then 500 ms of generation
		source     string
		wantTPOT   *float64 // ms
		wantTokens int
		wantPerS   float64
	}{
		// (Done − FirstByte)/(n − 1) = 500 ms / 10 = 50 ms and 500 ms / 4 = 125 ms;
		// p50 is the smaller, max the larger. 11 + 5 tokens over 4 s of wall time.
		{name: "two calls", tokens: []int{11, 5}, source: "usage", wantTPOT: tare.Float(50), wantTokens: 16, wantPerS: 4},
		// One token has no inter-token time: TPOT is not measurable.
		{name: "single tokens", tokens: []int{1, 1}, source: "counted", wantTokens: 2, wantPerS: 0.5},
		// A source without tokens still marks a model run.
		{name: "no tokens", tokens: []int{0}, source: "usage", wantTokens: 0, wantPerS: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder(t, Config{})
			for i, n := range tt.tokens {
				res := result(float64(i)/10, 0, 600)
				res.FirstByte = res.Sent.Add(100 * time.Millisecond)
				res.OutputTokens, res.TokenSource = n, tt.source
				r.AddResult(res)
			}
			m := r.Summary(sec(4), time.Second).Model
			if m == nil {
				t.Fatal("Model = nil, want figures")
			}
			near(t, "ttft p50", m.TTFT.P50, 100, hdrTol)
			near(t, "ttft max", m.TTFT.Max, 100, 0)
			if tt.wantTPOT == nil {
				isNil(t, "tpot p50", m.TPOT.P50)
			} else {
				near(t, "tpot p50", m.TPOT.P50, *tt.wantTPOT, hdrTol)
				near(t, "tpot max", m.TPOT.Max, 125, 0)
			}
			if m.OutputTokens != tt.wantTokens {
				t.Errorf("OutputTokens = %d, want %d", m.OutputTokens, tt.wantTokens)
			}
			near(t, "tokens/s", m.TokensPerS, tt.wantPerS, 0)
		})
	}
}

func TestSummaryHost(t *testing.T) {
	r := newRecorder(t, Config{})
	s1 := sample(0, 1, 4)
	s1.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 2}, {CPU: 1, Steal: 6}}
	s1.PSISome = tare.Float(5)
	s2 := sample(1, 2, 20) // polluted by steal
	s2.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 5}, {CPU: 1, Steal: 35}}
	s2.RunDelay = tare.Float(3)
	s3 := sample(2, 3, 0)
	s3.PSISome = tare.Float(15) // not polluted: CPU pressure alone cannot tell the service from a neighbour
	s3.RunDelay = tare.Float(30)
	s3.CPUBy = &tare.CPUBy{SystemUnderTest: 20, Others: 60, Idle: 20, TopOthers: []tare.ProcessShare{{Name: "batch", PID: 9, CPUPct: 60}}} // polluted: waiting behind batch
	s4 := sample(3, 4, 0)
	s4.Throttled = tare.Float(10) // not above the threshold
	for _, s := range []tare.HostSample{s1, s2, s3, s4} {
		r.AddHost(s)
	}
	h := r.Summary(sec(4), 4*time.Second).Host
	if h.Ticks != 4 {
		t.Errorf("Ticks = %d, want 4", h.Ticks)
	}
	near(t, "cpu busy", h.CPUBusyPct, 50, 0) // user 40 + system 10 in every sample
	near(t, "steal mean", h.Steal.Mean, 6, 0)
	near(t, "steal max", h.Steal.Max, 20, 0)
	near(t, "steal max_cpu", h.Steal.MaxCPU, 35, 0)
	near(t, "polluted", h.PollutedTicksPct, 50, 0)
	near(t, "psi some", h.PSISomePct, 10, 0) // mean over the two samples that had it
	near(t, "throttled", h.ThrottledPct, 10, 0)
	near(t, "run delay", h.RunDelayPct, 16.5, 0) // mean of 3 and 30
	near(t, "behind neighbours", h.NeighbourWaitPct, 22.5, 0)
	if by := h.CPUBy; by == nil || by.Others != 60 || len(by.TopOthers) != 1 || by.TopOthers[0].Name != "batch" || by.TopOthers[0].CPUPct != 60 {
		t.Errorf("cpu_by = %+v, want the one ledger with batch at 60 %%", by)
	}
}

func TestSnapshot(t *testing.T) {
	r := newRecorder(t, Config{})
	p := r.Snapshot(sec(0.5))
	if p.Elapsed != 500*time.Millisecond || p.Total != 0 || p.P95 != 0 || p.Steal != nil {
		t.Errorf("Snapshot before anything = %+v, want elapsed 500ms and nothing else", p)
	}
	for i := range 20 {
		r.AddResult(result(float64(i)/20, 0, float64(10*(i+1))))
	}
	r.AddResult(&tare.Result{Scheduled: sec(1), Dropped: true})
	bad := result(1, 0, 5)
	bad.Err = "refused"
	r.AddResult(bad)
	r.AddHost(sample(0, 1, 7))
	p = r.Snapshot(sec(3))
	if p.Total != 22 || p.OK != 20 || p.Errors != 1 || p.Dropped != 1 {
		t.Errorf("Snapshot counts = %+v, want 22 total, 20 ok, 1 error, 1 dropped", p)
	}
	// p95 of 5, 10, 20, … 200 ms (21 values): rank round(0.95·21) = 20th = 190 ms.
	if d := p.P95 - 190*time.Millisecond; d < 0 || d > 190*time.Microsecond {
		t.Errorf("Snapshot P95 = %v, want 190ms", p.P95)
	}
	near(t, "steal", p.Steal, 7, 0)
}

func TestWarnings(t *testing.T) {
	r := newRecorder(t, Config{MaxTicks: 100})
	if w := r.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings() = %q, want none", w)
	}
	r.AddResult(span(0.5, 30))                                                 // advances the frontier to 30 s
	r.AddResult(span(1, 2))                                                    // tick 2 closed long ago: late, as are the next and the one done before sent
	r.AddResult(span(-1, 0.5))                                                 // scheduled before the start
	r.AddResult(span(3, 3+2*3600))                                             // above the histogram's hour, and beyond 100 ticks
	r.AddResult(&tare.Result{Scheduled: sec(4), Sent: sec(4), Done: sec(3.9)}) // done before sent
	r.AddHost(sample(1, 2, 0))                                                 // late
	got := strings.Join(r.Warnings(), "\n")
	for _, want := range []string{
		"3 results arrived more than 2s after their tick ended",
		"1 host samples arrived",
		"2 instants fell before the run start or beyond the timeline's 100 ticks",
		"4 durations were negative or above 1h0m0s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Warnings() = %q, want one containing %q", got, want)
		}
	}
	s := r.Summary(sec(30), 30*time.Second)
	near(t, "latency max", s.Latency.Max, 2*3600*1000, 0)
}

// TestShortTailSample: the last reading of a run covers its last few
// milliseconds, where one jiffy of steal is 50 %: it weighs as what it
// covers, and sets no maximum.
func TestShortTailSample(t *testing.T) {
	r := newRecorder(t, Config{})
	for i := range 10 {
		r.AddHost(sample(float64(i), float64(i+1), 2))
	}
	tail := sample(10, 10.02, 50)
	tail.PerCPU = []tare.CPUShares{{CPU: 0, Steal: 100}, {CPU: 1}}
	r.AddHost(tail)
	h := r.Summary(sec(10.02), 10*time.Second).Host
	near(t, "steal mean", h.Steal.Mean, 2.1, 0) // (10 × 2 + 0.02 × 50) / 10.02, rounded
	near(t, "steal max", h.Steal.Max, 2, 0)
	near(t, "steal max_cpu", h.Steal.MaxCPU, 2, 0)
}

// TestSummaryHostContainers: a container's share adds up over the ticks
// by container, whichever of its processes was the busiest in each, and
// the process that weighed most over the run names it.
func TestSummaryHostContainers(t *testing.T) {
	redis := &tare.Container{ID: "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5", Runtime: "docker", Name: "redis-cache"}
	r := newRecorder(t, Config{})
	ledgers := [][]tare.ProcessShare{
		{{Name: "redis-server", PID: 10, CPUPct: 30, Container: redis, Processes: 1}, {Name: "cc1", PID: 20, CPUPct: 35}},
		{{Name: "redis-bgsave", PID: 11, CPUPct: 40, Container: redis, Processes: 2}, {Name: "cc1", PID: 20, CPUPct: 35}},
		{{Name: "redis-server", PID: 10, CPUPct: 30, Container: redis, Processes: 1}},
	}
	for i, top := range ledgers {
		s := sample(float64(i), float64(i+1), 0)
		s.CPUBy = &tare.CPUBy{Others: 70, Idle: 30, TopOthers: top}
		r.AddHost(s)
	}
	by := r.Summary(sec(3), 3*time.Second).Host.CPUBy
	if by == nil || len(by.TopOthers) != 2 {
		t.Fatalf("cpu_by = %+v, want two top others", by)
	}
	got, want := by.TopOthers[0], tare.ProcessShare{Name: "redis-server", PID: 10, CPUPct: 33.33, Container: redis, Processes: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("top other %+v, want %+v: the container's 30, 40, 30 over 3 ticks, named by redis-server (60 against 40)", got, want)
	}
	if cc := by.TopOthers[1]; cc.Name != "cc1" || cc.Container != nil || cc.CPUPct != 23.33 {
		t.Errorf("second top other %+v, want cc1 at 23.33 %% outside any container", cc)
	}
}

// TestFailuresSaySo: a kind's first words are kept with the summary, and
// the requests whose 2xx status the status codes count but that then failed
// (a stream that began and timed out) are counted apart, by status and kind.
func TestFailuresSaySo(t *testing.T) {
	r := newRecorder(t, Config{})
	for i := range 6 {
		res := result(float64(i)/10, 1, 50)
		switch i {
		case 1, 2:
			res.Err, res.Detail = tare.KindTimeout, fmt.Sprintf("read stream after %d chunks: context deadline exceeded", 10*i)
		case 3:
			res.Err, res.Status, res.Detail = "http 400", 400, "status 400: model is required"
		case 4:
			res.Err, res.Status = "http 400", 400 // no words: the first's stay
		}
		r.AddResult(res)
	}
	s := r.Summary(sec(1), time.Second)
	if want := map[string]int{"200": 4, "400": 2}; !maps.Equal(s.StatusCodes, want) {
		t.Errorf("StatusCodes = %v, want %v", s.StatusCodes, want)
	}
	if want := map[string]int{"200 timeout": 2}; !maps.Equal(s.FailedAfterStatus, want) {
		t.Errorf("FailedAfterStatus = %v, want %v", s.FailedAfterStatus, want)
	}
	want := map[string]string{"timeout": "read stream after 10 chunks: context deadline exceeded", "http 400": "status 400: model is required"}
	if !maps.Equal(s.ErrorMessages, want) {
		t.Errorf("ErrorMessages = %v, want %v", s.ErrorMessages, want)
	}
}

// TestPromptCount: the server's count of each prompt against tare's (its
// words), beyond 25 % and 16 tokens: a template's few tokens agree, a
// tokenizer that makes 1.5 tokens a word of a long prompt does not.
func TestPromptCount(t *testing.T) {
	r := newRecorder(t, Config{})
	for i, c := range []struct{ words, tokens int }{
		{20, 30},   // +10: a chat template's tokens, within 16
		{100, 120}, // +20: beyond 16, within 25 %
		{100, 150}, // +50 %: disagrees
		{400, 300}, // −25 % exactly: within
		{400, 290}, // disagrees
	} {
		res := result(float64(i)/10, 1, 50)
		res.PromptWords, res.PromptTokens, res.PromptTokenSource = c.words, c.tokens, "usage"
		r.AddResult(res)
	}
	unsaid := result(0.6, 1, 50) // no usage: not compared
	unsaid.PromptWords = 10
	r.AddResult(unsaid)
	s := r.Summary(sec(1), time.Second)
	c := s.Model.PromptCount
	if c == nil || c.Compared != 5 || c.Disagreed != 2 || *c.DisagreedPct != 40 || *c.TokensPerWord != 0.87 {
		t.Errorf("PromptCount = %+v; want 2 of 5 disagreed (40%%), 890 tokens for 1020 words (0.87)", c)
	}
}
