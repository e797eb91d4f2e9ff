package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"github.com/tare-dev/tare/judge"
)

// fixture is a run of 10 ticks with a flat load; steal, run delay and
// p95 per tick come from the case.
func fixture(steal []float64, runDelay *float64, slowTicks ...int) (*tare.Summary, []tare.Tick) {
	f := tare.Float
	start := time.Date(2026, 11, 29, 14, 5, 0, 0, time.UTC)
	s := &tare.Summary{
		Schema: tare.SummarySchema,
		Run: tare.Run{ID: "0192f3a4-0000-7000-8000-000000000001", Label: "checkout", Target: "GET http://127.0.0.1:8080/checkout",
			Arrival: "poisson 100/s", StartedAt: start, EndedAt: start.Add(10 * time.Second), Status: tare.StatusComplete},
		Env:         tare.Env{Hostname: "vm-1", VCPUs: 2, Kernel: "6.1.0", ClkTck: 100, Cgroup: "v2", PSI: true},
		Requests:    tare.Requests{Total: 1000, OK: 996, Errors: 3, Dropped: 1},
		ErrorKinds:  map[string]int{"timeout": 2, "http 503": 1},
		StatusCodes: map[string]int{"200": 996, "503": 1},
		Rate:        tare.Rate{Offered: f(100), Achieved: f(99.6)},
		Latency:     tare.LatencyMS{Avg: f(12.4), P50: f(8.1), P90: f(21), P95: f(33.3), P99: f(180), Max: f(2400)},
		Service:     tare.PercentilesMS{P50: f(7.9), P95: f(30.2), P99: f(95), Max: f(2100)},
		SendLag:     tare.LagMS{P50: f(0.08), P99: f(0.9), Max: f(3.1)},
		Generator:   tare.Generator{CPUPct: f(6.5), RunDelayPct: f(0.4)},
		Host:        tare.HostSummary{CPUBusyPct: f(41), PSISomePct: f(2.5), RunDelayPct: runDelay, Ticks: len(steal)},
	}
	var ticks []tare.Tick
	sum, worst := 0.0, 0.0
	polluted := 0
	for i, st := range steal {
		h := &tare.HostSample{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			CPU: tare.CPUShares{CPU: -1, Steal: st, Idle: 59 - st}}
		ticks = append(ticks, tare.Tick{Start: h.Start, End: h.End, Completions: 100, P95: 30 * time.Millisecond, InFlight: 2, InSystem: 1.2, Host: h,
			Sample: sampleOf(20, 30*time.Millisecond)})
		sum += st
		worst = max(worst, st)
		if st > 10 {
			polluted++
		}
	}
	for _, i := range slowTicks {
		ticks[i].P95 = 300 * time.Millisecond
		ticks[i].Sample = sampleOf(20, 300*time.Millisecond)
	}
	s.Host.Steal = tare.StealStats{Mean: f(sum / float64(len(steal))), Max: f(worst), MaxCPU: f(worst)}
	s.Host.PollutedTicksPct = f(100 * float64(polluted) / float64(len(steal)))
	s.CleanLatency = &tare.CleanLatency{P50: f(7.7), P95: f(25), P99: f(60), Requests: 100 * (len(steal) - polluted)}
	return s, ticks
}

// sampleOf is n sampled latencies spread evenly from two thirds of p95 to
// p95.
func sampleOf(n int, p95 time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = p95*2/3 + time.Duration(i)*p95/3/time.Duration(n-1)
	}
	return out
}

func TestTextGolden(t *testing.T) {
	slo, err := judge.ParseSLO("p95<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		steal     []float64
		runDelay  *float64
		slowTicks []int
		edit      func(*tare.Summary, []tare.Tick)
	}{
		{"clean", []float64{0, 0.5, 0, 1, 0, 0, 0.2, 0, 0, 0}, tare.Float(0.3), nil, nil},
		{"suspect", []float64{0, 0.5, 0, 1, 0, 0, 0.2, 0, 0, 0}, tare.Float(7.5), []int{2, 5, 8}, nil},
		{"polluted", []float64{38.5, 71.2, 12.0, 89.4, 44.1, 3, 2, 1, 0, 0}, nil, nil, nil},
		// A quiet host, a service that ran out of its CPUs: clean, saturated,
		// the failed SLO the code's.
		{"saturated", make([]float64, 10), tare.Float(41), nil, func(s *tare.Summary, ticks []tare.Tick) {
			s.Latency.P95 = tare.Float(940)
			s.Rate = tare.Rate{Offered: tare.Float(300), Achieved: tare.Float(251)}
			s.Host.NeighbourWaitPct = tare.Float(0.6)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 86.1, Tare: 8.2, Others: 0.4, Kernel: 2.1, Unattributed: 0.3, Idle: 2.9,
				TopOthers: []tare.ProcessShare{{Name: "redis-server", PID: 812, CPUPct: 0.3}}}
			s.SUT = &tare.SUTSummary{PIDs: []int{5120}, FoundBy: "listening socket of 127.0.0.1:8080", CPUPct: tare.Float(172.2), RunDelayPct: tare.Float(38), ThrottledPct: tare.Float(0)}
			for i := range ticks {
				ticks[i].Arrivals, ticks[i].Completions, ticks[i].InFlight = 300, 251, 49*(i+1)
			}
		}},
		// A light service beside a batch job: polluted, the job named.
		{"neighbour", make([]float64, 10), tare.Float(14), nil, func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.NeighbourWaitPct = tare.Float(11.6)
			s.Host.PollutedTicksPct = tare.Float(80)
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 9.5, Tare: 3.1, Others: 48.6, Kernel: 1.2, Unattributed: 0.8, Idle: 36.8,
				TopOthers: []tare.ProcessShare{{Name: "batch", PID: 4121, CPUPct: 48}, {Name: "sshd", PID: 600, CPUPct: 0.6}}}
			s.SUT = &tare.SUTSummary{PIDs: []int{5120}, FoundBy: "--pid", CPUPct: tare.Float(19), RunDelayPct: tare.Float(12.5), ThrottledPct: tare.Float(0)}
			s.Blame = &tare.Blame{Source: tare.BlameEstimated, Why: "scheduler probe unavailable: the kernel has no BTF", WaitPct: 14,
				Behind: []tare.Behind{{Owner: tare.OwnerOther, Name: "batch", PIDs: []int{4121}, WaitPct: 11.5}, {Owner: tare.OwnerSUT, PIDs: []int{}, WaitPct: 1.8}}}
		}},
		// The same, measured by the scheduler probe: the batch job on the
		// service's core, named with its share of the wait, and the core.
		{"measured", make([]float64, 10), tare.Float(14.3), nil, func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 9.5, Tare: 3.1, Others: 48.6, Kernel: 1.2, Unattributed: 0.8, Idle: 36.8,
				TopOthers: []tare.ProcessShare{{Name: "batch", PID: 4121, CPUPct: 48}, {Name: "sshd", PID: 600, CPUPct: 0.6}}}
			s.SUT = &tare.SUTSummary{PIDs: []int{5120}, FoundBy: "--pid", CPUPct: tare.Float(19), RunDelayPct: tare.Float(12.8), ThrottledPct: tare.Float(0)}
			b := tare.Blame{Source: tare.BlameMeasured, WaitPct: 14.1,
				Behind: []tare.Behind{
					{Owner: tare.OwnerOther, Name: "batch", PIDs: []int{4121}, WaitPct: 11.9},
					{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{5120}, WaitPct: 1.6},
					{Owner: tare.OwnerTare, Name: "tare", PIDs: []int{5000}, WaitPct: 0.4},
					{Owner: tare.OwnerWakeup, PIDs: []int{}, WaitPct: 0.2},
				},
				OthersByCPU: []tare.CPUWait{{CPU: 0, WaitPct: 11.6}, {CPU: 1, WaitPct: 0.3}}, RunDelayPct: tare.Float(14.2)}
			for i := range ticks {
				tb := b
				ticks[i].Host.Blame = &tb
			}
			b.Schedstat = &tare.TruthCheck{WaitPct: 14.3, ProbeWaitPct: 14.2, Ticks: len(ticks)}
			s.Blame = &b
			s.Host.NeighbourWaitPct = tare.Float(11.9)
			s.Host.PollutedTicksPct = tare.Float(100)
		}},
		// The same service beside a container whose three processes took a
		// CPU: polluted, the container named, with its runtime, id and image.
		{"container", make([]float64, 10), tare.Float(14), nil, func(s *tare.Summary, ticks []tare.Tick) {
			s.Host.NeighbourWaitPct = tare.Float(11.6)
			s.Host.PollutedTicksPct = tare.Float(80)
			redis := &tare.Container{ID: "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5", Runtime: "docker", Name: "redis-cache", Image: "redis:7"}
			s.Host.CPUBy = &tare.CPUBy{SystemUnderTest: 9.5, Tare: 3.1, Others: 48.6, Kernel: 1.2, Unattributed: 0.8, Idle: 36.8,
				TopOthers: []tare.ProcessShare{{Name: "redis-server", PID: 4121, CPUPct: 48, Container: redis, Processes: 3}, {Name: "sshd", PID: 600, CPUPct: 0.6}}}
			s.SUT = &tare.SUTSummary{PIDs: []int{5120}, FoundBy: "--pid", CPUPct: tare.Float(19), RunDelayPct: tare.Float(12.5), ThrottledPct: tare.Float(0)}
		}},
		// A service whose graph crosses into containers: nginx on the host,
		// the app behind it in docker's shop-api, its database in podman's
		// db. Each node says the container it runs in.
		{"container-graph", make([]float64, 10), tare.Float(0.3), nil, func(s *tare.Summary, ticks []tare.Tick) {
			api := &tare.Container{ID: "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5", Runtime: "docker", Name: "shop-api", Image: "shop/api:1.4"}
			db := &tare.Container{ID: "2f34efe78475fdebf5ee5c3b98c90efbde716798521ef15e0454329cf00b5bfd", Runtime: "podman", Name: "db", Image: "docker.io/library/postgres:16"}
			s.SUT = &tare.SUTSummary{PIDs: []int{5120, 5121, 6200, 6201, 6202, 7300}, FoundBy: "listening socket of 127.0.0.1:8080", Calls: []int{6200, 7300},
				CPUPct: tare.Float(61), RunDelayPct: tare.Float(1.2), ThrottledPct: tare.Float(0),
				Graph: []tare.SUTNode{
					{Name: "nginx", PIDs: []int{5120, 5121}, CPUPct: tare.Float(8), RunDelayPct: tare.Float(0.3), ReachedBy: "listening socket 127.0.0.1:8080"},
					{Name: "gunicorn", PIDs: []int{6200, 6201, 6202}, CPUPct: tare.Float(44), RunDelayPct: tare.Float(0.8), ReachedBy: "tcp 172.17.0.2:8000 in netns of pid 6200 from nginx", From: tare.Int(0), Container: api},
					{Name: "postgres", PIDs: []int{7300}, CPUPct: tare.Float(9), RunDelayPct: tare.Float(0.1), ReachedBy: "tcp 10.88.0.3:5432 in netns of pid 7300 from gunicorn", From: tare.Int(1), Container: db},
				}}
		}},
		// The wrong port: nothing listens, every request refused at once.
		// Suspect, said first: the figures describe no service.
		{"refused", make([]float64, 10), tare.Float(0.2), nil, refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := fixture(tt.steal, tt.runDelay, tt.slowTicks...)
			if tt.edit != nil {
				tt.edit(s, ticks)
			}
			s.Verdict = judge.Judge(s, ticks, judge.DefaultThresholds(), slo)
			var buf bytes.Buffer
			if err := Text(&buf, s, ticks...); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tt.name+".golden.txt", buf.Bytes())
			buf.Reset()
			if err := JSON(&buf, s); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tt.name+".golden.json", buf.Bytes())
		})
	}
}

// refused makes the fixture a run at the wrong port: nothing listens there,
// every request is refused within a millisecond.
func refused(s *tare.Summary, ticks []tare.Tick) {
	s.Run.Target = "GET http://127.0.0.1:9/"
	s.Requests = tare.Requests{Total: 1000, Errors: 1000}
	s.ErrorKinds, s.StatusCodes = map[string]int{"refused": 1000}, nil
	f := tare.Float
	s.Latency = tare.LatencyMS{Avg: f(0.21), P50: f(0.18), P90: f(0.3), P95: f(0.36), P99: f(0.61), Max: f(2.2)}
	s.Service = tare.PercentilesMS{P50: f(0.1), P95: f(0.25), P99: f(0.48), Max: f(2.0)}
	s.CleanLatency = &tare.CleanLatency{P50: f(0.18), P95: f(0.36), P99: f(0.61), Requests: 1000}
	for i := range ticks {
		ticks[i].Sample = nil // no request succeeded
		ticks[i].P95 = 360 * time.Microsecond
	}
}

func TestNullsStayNull(t *testing.T) {
	var buf bytes.Buffer
	s := &tare.Summary{Schema: tare.SummarySchema}
	if err := Text(&buf, s); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("0.0%")) {
		t.Errorf("an unmeasured figure printed as zero:\n%s", buf.Bytes())
	}
	buf.Reset()
	JSON(&buf, s)
	for _, key := range []string{`"steal_pct": {`, `"mean": null`, `"p99": null`, `"queue": null`, `"clean_latency_ms": null`} {
		if !bytes.Contains(buf.Bytes(), []byte(key)) {
			t.Errorf("summary json lacks %s:\n%s", key, buf.Bytes())
		}
	}
}

// TestRedirectsShown: the redirects followed are in the text, the JSON and
// the HTML figures, with the requests the target really served.
func TestRedirectsShown(t *testing.T) {
	s, ticks := fixture([]float64{0, 0, 0}, tare.Float(0.3))
	s.Requests.Redirects = 996
	s.Verdict = judge.Judge(s, ticks, judge.DefaultThresholds(), nil)
	var buf bytes.Buffer
	if err := Text(&buf, s, ticks...); err != nil {
		t.Fatal(err)
	}
	want := "redirects    996 followed: 1995 requests sent in all, one per arrival and one per redirect"
	if !bytes.Contains(buf.Bytes(), []byte(want)) {
		t.Errorf("text summary lacks %q:\n%s", want, buf.Bytes())
	}
	buf.Reset()
	if err := JSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"redirects": 996`)) {
		t.Errorf("summary json lacks requests.redirects:\n%s", buf.Bytes())
	}
	found := false
	for _, f := range figures(s) {
		found = found || f.Key == "redirects"
	}
	if !found {
		t.Errorf("html figures lack the redirects: %+v", figures(s))
	}
}

// TestFailuresShown: the status line says which 200s then failed, and
// each error kind's words are under it, in the text and the HTML's
// figures (issue 44: "http 400" without "model is required", and 200s that
// were timeouts).
func TestFailuresShown(t *testing.T) {
	s, ticks := fixture([]float64{0, 0, 0}, tare.Float(0.3))
	s.ErrorKinds = map[string]int{"timeout": 5, "http 400": 2}
	s.StatusCodes = map[string]int{"200": 98, "400": 2}
	s.FailedAfterStatus = map[string]int{"200 timeout": 5}
	s.ErrorMessages = map[string]string{"http 400": "status 400: model is required", "timeout": "read stream after 31 chunks: context deadline exceeded"}
	s.Verdict = judge.Judge(s, ticks, judge.DefaultThresholds(), nil)
	var buf bytes.Buffer
	if err := Text(&buf, s, ticks...); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(status: 200 98, 400 2; failed after their status: 200 then timeout 5)",
		"http 400: status 400: model is required",
		"timeout: read stream after 31 chunks",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("text summary lacks %q:\n%s", want, buf.Bytes())
		}
	}
	html := fmt.Sprint(figures(s))
	for _, want := range []string{"failed after their status: 200 then timeout 5", "model is required"} {
		if !strings.Contains(html, want) {
			t.Errorf("html figures lack %q: %s", want, html)
		}
	}
}

// TestProtocolsShown: an HTTP/2 run's connections by protocol are on the
// generator's line of the text, in the HTML's figures and in the JSON.
func TestProtocolsShown(t *testing.T) {
	s, ticks := fixture([]float64{0, 0, 0}, tare.Float(0.3))
	s.Generator.Engine = "goroutines"
	s.Generator.Protocols = map[string]int{"h2": 3, "http/1.1": 1}
	var buf bytes.Buffer
	if err := Text(&buf, s, ticks...); err != nil {
		t.Fatal(err)
	}
	want := "goroutines   connections h2 3, http/1.1 1"
	if !bytes.Contains(buf.Bytes(), []byte(want)) {
		t.Errorf("text summary lacks %q:\n%s", want, buf.Bytes())
	}
	buf.Reset()
	if err := JSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"protocols": {`)) || !bytes.Contains(buf.Bytes(), []byte(`"h2": 3`)) {
		t.Errorf("summary json lacks generator.protocols:\n%s", buf.Bytes())
	}
	found := false
	for _, f := range figures(s) {
		found = found || strings.Contains(f.Value, "connections h2 3")
	}
	if !found {
		t.Errorf("html figures lack the connections' protocols: %+v", figures(s))
	}
}

// TestTextQueue: a queue run's text says what the generator saw of the
// queue beside the results (issue 20, defects 3 and 5): the service line
// is the worker's own time, and redeliveries, results that matched no job,
// the oldest pending job and the workers have rows of their own.
func TestTextQueue(t *testing.T) {
	s, ticks := fixture([]float64{0, 0, 0}, tare.Float(0.3))
	f := tare.Float
	s.Queue = &tare.QueueSummary{
		Wait:        tare.WaitMS{Avg: f(120), P50: f(100), P95: f(300), P99: f(400)},
		Depth:       tare.DepthStats{Mean: f(1.5), Max: f(4)},
		Redelivered: tare.Int(2), DuplicateResults: tare.Int(1), UnknownResults: tare.Int(3), LateResults: tare.Int(0),
		OldestPending: &tare.PendingMS{Max: f(25100), End: f(0)},
		Workers:       &tare.QueueWorkers{Max: 2, End: 0, Lost: 1},
	}
	var buf bytes.Buffer
	if err := Text(&buf, s, ticks...); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"worker start → done: the worker's own time",
		"2 redelivered   results: 1 duplicate  3 unknown  0 late",
		"pending      oldest max 25.1s  at the end 0",
		"2 at most  0 at the end   ALL GONE before the end",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "closed-loop") {
		t.Errorf("a queue run's service line speaks of the actual send:\n%s", out)
	}
	// Not measured (a summary merged from shards' records): no rows, no zeros.
	s.Queue = &tare.QueueSummary{Wait: s.Queue.Wait, Depth: s.Queue.Depth}
	buf.Reset()
	if err := Text(&buf, s, ticks...); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Contains(out, "redelivered") || strings.Contains(out, "oldest max") || strings.Contains(out, "workers ") {
		t.Errorf("unmeasured queue figures are printed:\n%s", out)
	}
}
