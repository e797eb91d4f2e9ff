package load

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// wireGet is a minimal tare.Wire target for the event loop's tests: GET /
// on a loopback HTTP/1.1 server whose answers carry a Content-Length
// (httptarget's codec is tested on its own, through this loop too).
type wireGet struct {
	addr     string
	timeout  time.Duration
	maxConns int
}

func newWireGet(t *testing.T, h http.HandlerFunc) *wireGet {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &wireGet{addr: strings.TrimPrefix(srv.URL, "http://"), timeout: 10 * time.Second}
}

func (w *wireGet) Do(context.Context, *tare.Result) { panic("the event loop serves wireGet") }
func (w *wireGet) Route(uint64) int                 { return 0 }
func (w *wireGet) Endpoints() []tare.Endpoint {
	return []tare.Endpoint{{Addr: w.addr, MaxConns: w.maxConns, Timeout: w.timeout,
		NewCodec: func() tare.Codec { return &getCodec{} }}}
}

type getCodec struct {
	got   []byte
	close bool // the answer said Connection: close
}

func (c *getCodec) Begin(*tare.Result) { c.got = c.got[:0] }
func (c *getCodec) Request(b []byte) []byte {
	c.got, c.close = c.got[:0], false
	return append(b, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"...)
}
func (c *getCodec) KeepAlive() bool                                      { return !c.close }
func (c *getCodec) Handoff() func(ctx context.Context, res *tare.Result) { return nil }
func (c *getCodec) End(err error, reused bool, res *tare.Result) tare.Step {
	res.Err = "eof"
	return tare.StepDone
}

func (c *getCodec) Parse(p []byte, res *tare.Result) (int, tare.Step) {
	c.got = append(c.got, p...)
	end := bytes.Index(c.got, []byte("\r\n\r\n"))
	if end < 0 {
		return len(p), tare.StepMore
	}
	head := string(c.got[:end])
	length := 0
	for line := range strings.SplitSeq(head, "\r\n") {
		if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
			length, _ = strconv.Atoi(v)
		}
		if strings.EqualFold(line, "connection: close") {
			c.close = true
		}
	}
	if len(c.got) < end+4+length {
		return len(p), tare.StepMore
	}
	res.Status, _ = strconv.Atoi(head[9:12])
	res.FirstByte = time.Now()
	return len(p), tare.StepDone
}

func TestLoopEveryArrivalYieldsOneResult(t *testing.T) {
	for _, engines := range []int{1, 2} {
		t.Run(strconv.Itoa(engines)+" engines", func(t *testing.T) {
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			tg := &wireGet{addr: strings.TrimPrefix(srv.URL, "http://"), timeout: 10 * time.Second}
			r := New(tg, Config{Engines: engines})
			sched := &constant{gap: 2 * time.Millisecond, n: 300}
			start := time.Now()
			out := make(chan *Batch, 64)
			usage := make(chan Usage, 1)
			go func() { usage <- r.Run(context.Background(), start, sched, out) }()
			seen := make(map[uint64]bool)
			for res := range All(out) {
				if seen[res.Seq] {
					t.Fatalf("seq %d reported twice", res.Seq)
				}
				seen[res.Seq] = true
				if want := start.Add(time.Duration(res.Seq) * sched.gap); !res.Scheduled.Equal(want) {
					t.Errorf("seq %d scheduled at %v; want %v", res.Seq, res.Scheduled.Sub(start), want.Sub(start))
				}
				if !res.OK() || res.Status != 200 {
					t.Errorf("seq %d: err %q status %d", res.Seq, res.Err, res.Status)
				}
				if res.SendLag() < 0 || res.FirstByte.Before(res.Sent) || res.Latency() < res.Service() {
					t.Errorf("seq %d: clocks out of order: lag %v latency %v service %v", res.Seq, res.SendLag(), res.Latency(), res.Service())
				}
			}
			u := <-usage
			if len(seen) != 300 {
				t.Fatalf("got %d results, want 300", len(seen))
			}
			if u.Engine != EngineLoop || u.Engines != engines || u.Workers < 1 || int64(u.Workers) < conns.Load() {
				t.Errorf("usage = %+v; the server saw %d connections", u, conns.Load())
			}
			if p := r.Progress(); p.Conns != 0 || p.InFlight != 0 || p.Done != 300 {
				t.Errorf("progress after the run %+v; want every connection closed", p)
			}
		})
	}
}

// TestLoopConnectionsAsInFlightDemands: requests one at a time take the
// connection idle last, so a rate one connection serves uses one; more
// open only while requests overlap.
func TestLoopConnectionsAsInFlightDemands(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tg := &wireGet{addr: strings.TrimPrefix(srv.URL, "http://"), timeout: 10 * time.Second}
	// One in flight at most: a request never finds the connection busy.
	r := New(tg, Config{MaxInFlight: 1})
	results, u := collect(t, r, context.Background(), &constant{gap: 5 * time.Millisecond, n: 100})
	sent := 0
	for _, res := range results {
		if !res.Dropped {
			sent++
		}
	}
	if conns.Load() != 1 || u.Workers != 1 || sent == 0 {
		t.Errorf("%d requests sent one at a time opened %d connections (usage %d); want 1", sent, conns.Load(), u.Workers)
	}
}

func TestLoopDropsAtInFlightCap(t *testing.T) {
	release := make(chan struct{})
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	r := New(tg, Config{MaxInFlight: 3})
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
			if !res.OK() {
				t.Errorf("seq %d: err %q", res.Seq, res.Err)
			}
		}
	}
	if sent != 3 || dropped != 47 {
		t.Fatalf("sent %d dropped %d, want 3 and 47", sent, dropped)
	}
	if p := r.Progress(); p.Dropped != 47 || p.InFlight != 0 {
		t.Errorf("progress %+v", p)
	}
}

// TestLoopTimeout: a request the server does not answer within the
// endpoint's timeout fails as a timeout, and its connection is closed.
func TestLoopTimeout(t *testing.T) {
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	tg.timeout = 50 * time.Millisecond
	r := New(tg, Config{})
	results, _ := collect(t, r, context.Background(), &constant{gap: time.Millisecond, n: 3})
	for _, res := range results {
		if res.Err != tare.KindTimeout || res.Done.Sub(res.Sent) < tg.timeout {
			t.Errorf("seq %d: err %q after %v; want timeout after %v", res.Seq, res.Err, res.Done.Sub(res.Sent), tg.timeout)
		}
	}
	if p := r.Progress(); len(results) != 3 || p.Conns != 0 {
		t.Errorf("%d results, progress %+v", len(results), p)
	}
}

func TestLoopCancelStopsArrivalsAndDrains(t *testing.T) {
	var started atomic.Int64
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	cancelOnceStarted(t, tg, &started)
}

// TestLoopCancelAfterLastArrivalDrains: as on goroutines, a cancel after
// the schedule is over drains the requests still out for Config.Drain,
// then cancels them: the server, which would answer a minute later, is not
// waited for.
func TestLoopCancelAfterLastArrivalDrains(t *testing.T) {
	var started atomic.Int64
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute): // a bound on the wait: answered, the request is not canceled
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const drain = 200 * time.Millisecond
	r := New(tg, Config{Drain: drain})
	var cancelled time.Time
	go func() {
		for started.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancelled = time.Now()
		cancel()
	}()
	results, _ := collect(t, r, ctx, &constant{gap: time.Millisecond, n: 3})
	took := time.Since(cancelled)
	if len(results) != 3 {
		t.Fatalf("got %d results, want 3", len(results))
	}
	for _, res := range results {
		if res.Err != tare.KindCanceled {
			t.Errorf("seq %d: err %q, want canceled at the end of the drain", res.Seq, res.Err)
		}
	}
	// Cancelled, not answered: Run did not wait for the server.
	if took < drain {
		t.Errorf("Run returned %v after the cancel; want the drain %v first", took, drain)
	}
}

// TestLoopSaturatedDropsAsTheyCome: with every slot busy for long, the
// arrivals meanwhile are dropped and counted as the run goes.
func TestLoopSaturatedDropsAsTheyCome(t *testing.T) {
	release := make(chan struct{})
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	r := New(tg, Config{MaxInFlight: 2})
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
	results, _ := collect(t, r, context.Background(), &constant{gap: 250 * time.Microsecond, n: n})
	seen := make(map[uint64]bool)
	sent := 0
	for _, res := range results {
		seen[res.Seq] = true
		if !res.Dropped {
			sent++
		}
	}
	if !<-sawDrops {
		t.Error("no drop was counted while both slots were busy")
	}
	if len(seen) != n || len(results) != n {
		t.Errorf("%d results for %d arrivals (%d distinct)", len(results), n, len(seen))
	}
	if sent < 2 {
		t.Errorf("%d sent; want at least the 2 the slots took", sent)
	}
}

// TestLoopLatencyFromScheduledTime is TestLatencyFromScheduledTime on the
// event loop, with one connection: requests scheduled during a stall wait
// for it, and their latency counts from when they should have started.
func TestLoopLatencyFromScheduledTime(t *testing.T) {
	if testing.Short() {
		t.Skip("6 s of load; skipped with -short")
	}
	begin := time.Now()
	tg := newWireGet(t, func(w http.ResponseWriter, r *http.Request) {
		if phase := time.Since(begin) % (3 * time.Second); phase < time.Second {
			time.Sleep(time.Second - phase)
		}
	})
	tg.maxConns = 1
	r := New(tg, Config{})
	results, _ := collect(t, r, context.Background(), &constant{gap: 10 * time.Millisecond, n: 600})
	var lat []time.Duration
	for _, res := range results {
		if !res.OK() {
			t.Fatalf("seq %d failed: %q", res.Seq, res.Err)
		}
		lat = append(lat, res.Latency())
	}
	if p99 := percentile(lat, 0.99); p99 < 500*time.Millisecond {
		t.Fatalf("latency p99 = %v, want ≥ 500ms: the stall was hidden", p99)
	}
}
