package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// constant is a fixed-rate schedule of n arrivals.
type constant struct {
	gap  time.Duration
	n, i int
}

func (c *constant) Next() (time.Duration, bool) {
	if c.i >= c.n {
		return 0, false
	}
	c.i++
	return time.Duration(c.i-1) * c.gap, true
}

// httpGet is a minimal real HTTP target for the engine's tests.
func httpGet(client *http.Client, url string) tare.Target {
	return tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			res.Err = "transport"
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		res.Status = resp.StatusCode
		res.Done = time.Now()
	})
}

func collect(t *testing.T, r *Runner, ctx context.Context, sched Schedule) ([]tare.Result, Usage) {
	t.Helper()
	out := make(chan *Batch, 64)
	usage := make(chan Usage, 1)
	go func() { usage <- r.Run(ctx, time.Now(), sched, out) }()
	var results []tare.Result
	for res := range All(out) {
		results = append(results, res)
	}
	return results, <-usage
}

func TestEveryArrivalYieldsOneResult(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	r := New(httpGet(srv.Client(), srv.URL), Config{})
	results, usage := collect(t, r, context.Background(), &constant{gap: 2 * time.Millisecond, n: 300})
	if len(results) != 300 {
		t.Fatalf("got %d results, want 300", len(results))
	}
	seen := make(map[uint64]bool)
	for _, res := range results {
		if seen[res.Seq] {
			t.Fatalf("seq %d reported twice", res.Seq)
		}
		seen[res.Seq] = true
		if !res.OK() || res.Status != 200 {
			t.Errorf("seq %d: err %q status %d", res.Seq, res.Err, res.Status)
		}
		if res.SendLag() < 0 || res.Latency() < res.Service() {
			t.Errorf("seq %d: clocks out of order: lag %v latency %v service %v", res.Seq, res.SendLag(), res.Latency(), res.Service())
		}
	}
	if usage.Workers < 1 || usage.Wall <= 0 {
		t.Errorf("usage = %+v", usage)
	}
}

// blockedUntil is a target whose every request waits for release (or its
// context's end).
func blockedUntil(release <-chan struct{}) tare.Target {
	return tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		select {
		case <-release:
		case <-ctx.Done():
			res.Err = "canceled"
		}
	})
}

func TestDropsAtInFlightCap(t *testing.T) {
	release := make(chan struct{})
	blocked := blockedUntil(release)
	r := New(blocked, Config{MaxInFlight: 3})
	go func() { time.Sleep(300 * time.Millisecond); close(release) }()
	results, _ := collect(t, r, context.Background(), &constant{gap: time.Millisecond, n: 50})
	var dropped, sent int
	for _, res := range results {
		if res.Dropped {
			dropped++
			if !res.Sent.IsZero() {
				t.Errorf("dropped seq %d has a send time", res.Seq)
			}
		} else {
			sent++
		}
	}
	// The 3 workers are busy until release, which comes after the schedule
	// ends (50 ms of arrivals vs 300 ms): exactly 3 are sent.
	if sent != 3 || dropped != 47 {
		t.Fatalf("sent %d dropped %d, want 3 and 47", sent, dropped)
	}
	if p := r.Progress(); p.Dropped != 47 || p.InFlight != 0 {
		t.Errorf("progress %+v", p)
	}
}

func TestCancelStopsArrivalsAndDrains(t *testing.T) {
	var started atomic.Int64
	slow := tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		started.Add(1)
		select {
		case <-time.After(time.Hour):
		case <-ctx.Done():
			res.Err = "canceled"
		}
	})
	cancelOnceStarted(t, slow, &started)
}

// cancelOnceStarted runs target at 1,000 arrivals a second (a million at
// most), cancels once 5 requests have started (counted in started), and
// checks that the arrivals stopped and that every request still out was
// cancelled after the 50 ms drain.
func cancelOnceStarted(t *testing.T, target tare.Target, started *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := New(target, Config{Drain: 50 * time.Millisecond})
	go func() {
		for started.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	results, _ := collect(t, r, ctx, &constant{gap: time.Millisecond, n: 1_000_000})
	if len(results) >= 1_000_000 || len(results) < 5 {
		t.Fatalf("got %d results: arrivals did not stop on cancel", len(results))
	}
	for _, res := range results {
		if res.Err != tare.KindCanceled {
			t.Fatalf("seq %d: err %q, want canceled after the drain", res.Seq, res.Err)
		}
	}
}

// TestLatencyFromScheduledTime is the coordinated-omission check: a server
// that stalls every response for 1 s every 5 s, driven at a constant 100/s
// for 12 s. Requests scheduled during a stall wait for it, and their latency
// counts from when they should have started, so p99 shows the stall even
// though most requests are fast. A closed-loop tool measuring from the send
// would report the stall once per connection.
func TestLatencyFromScheduledTime(t *testing.T) {
	if testing.Short() {
		t.Skip("12 s of load; skipped with -short")
	}
	begin := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Stall window: the first second of every 5 s, counted from begin.
		if phase := time.Since(begin) % (5 * time.Second); phase < time.Second {
			time.Sleep(time.Second - phase)
		}
	}))
	defer srv.Close()
	// A client with a single connection makes the stall serialise, as a
	// single-threaded server under stall would.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	r := New(httpGet(client, srv.URL), Config{})
	results, _ := collect(t, r, context.Background(), &constant{gap: 10 * time.Millisecond, n: 1200})
	var lat, svc []time.Duration
	for _, res := range results {
		if !res.OK() {
			t.Fatalf("seq %d failed: %q", res.Seq, res.Err)
		}
		lat = append(lat, res.Latency())
		svc = append(svc, res.Service())
	}
	p99 := percentile(lat, 0.99)
	if p99 < 500*time.Millisecond {
		t.Fatalf("latency p99 = %v, want ≥ 500ms: the stall was hidden", p99)
	}
	t.Logf("latency p50 %v p99 %v; service p50 %v p99 %v", percentile(lat, 0.5), p99, percentile(svc, 0.5), percentile(svc, 0.99))
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// TestCancelAfterLastArrivalDrains: a cancel that comes after the schedule
// is over, while requests are still out, drains them for Config.Drain just
// as one during the arrivals does, instead of waiting for the requests' own
// bound (a queue job's timeout).
func TestCancelAfterLastArrivalDrains(t *testing.T) {
	const bound = 20 * time.Second // the requests' own timeout
	var started atomic.Int64
	stuck := tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		started.Add(1)
		select {
		case <-time.After(bound):
			res.Err = "timeout"
		case <-ctx.Done():
			res.Err = "canceled"
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const drain = 200 * time.Millisecond
	r := New(stuck, Config{Drain: drain})
	var cancelled time.Time
	go func() {
		for started.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // the schedule is over: all 3 arrivals are out
		cancelled = time.Now()
		cancel()
	}()
	results, _ := collect(t, r, ctx, &constant{gap: time.Millisecond, n: 3})
	took := time.Since(cancelled)
	if len(results) != 3 {
		t.Fatalf("got %d results, want 3", len(results))
	}
	for _, res := range results {
		if res.Err != "canceled" {
			t.Errorf("seq %d: err %q, want canceled at the end of the drain", res.Seq, res.Err)
		}
	}
	// The drain bounds the wait, not the requests' timeout: they were
	// cancelled, not timed out, and after the drain.
	if took < drain {
		t.Errorf("Run returned %v after the cancel; want the drain %v first", took, drain)
	}
}

// TestNoDrainCancelsAtOnce: with NoDrain (--drain 0), a cancel stops the
// requests in flight at once instead of giving them the default drain:
// requests that answer half a default drain after they start are all
// cancelled (a drain would have let them answer).
func TestNoDrainCancelsAtOnce(t *testing.T) {
	var started atomic.Int64
	slow := tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		started.Add(1)
		select {
		case <-time.After(DefaultDrain / 2):
		case <-ctx.Done():
			res.Err = "canceled"
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := New(slow, Config{Drain: NoDrain})
	go func() {
		for started.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	results, _ := collect(t, r, ctx, &constant{gap: time.Millisecond, n: 3})
	for _, res := range results {
		if res.Err != "canceled" {
			t.Errorf("seq %d: err %q, want canceled: answered, so drained", res.Seq, res.Err)
		}
	}
}

// TestSaturatedDropsAsTheyCome: with every worker busy for long, the
// arrivals meanwhile are dropped and counted as the run goes, not only
// when a worker comes free; each arrival yields one result, in its place
// in the schedule.
func TestSaturatedDropsAsTheyCome(t *testing.T) {
	release := make(chan struct{})
	blocked := blockedUntil(release)
	r := New(blocked, Config{MaxInFlight: 2})
	sawDrops := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for r.Progress().Dropped == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		sawDrops <- r.Progress().Dropped > 0
		close(release)
	}()
	const n = 400
	sched := &constant{gap: 250 * time.Microsecond, n: n}
	start := time.Now()
	out := make(chan *Batch, 64)
	go r.Run(context.Background(), start, sched, out)
	seen := make([]bool, n)
	var sent int
	for res := range All(out) {
		if res.Seq >= n || seen[res.Seq] {
			t.Fatalf("seq %d reported twice or out of the schedule", res.Seq)
		}
		seen[res.Seq] = true
		if want := start.Add(time.Duration(res.Seq) * sched.gap); !res.Scheduled.Equal(want) {
			t.Errorf("seq %d scheduled at %v; want %v", res.Seq, res.Scheduled.Sub(start), want.Sub(start))
		}
		if !res.Dropped {
			sent++
		}
	}
	if !<-sawDrops {
		t.Error("no drop was counted while both workers were busy")
	}
	if !slices.Equal(seen, slices.Repeat([]bool{true}, n)) {
		t.Errorf("not every arrival yielded a result")
	}
	if sent < 2 {
		t.Errorf("%d sent; want at least the 2 the workers took", sent)
	}
}
