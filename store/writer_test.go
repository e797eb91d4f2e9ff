package store

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// watched wraps a real store to see the batches a Writer makes and, when
// gate is set, to hold AppendResults until the gate opens.
type watched struct {
	tare.Store
	gate    chan struct{} // closed to let writes through; nil never holds
	entered chan struct{} // receives when a write reaches the gate

	mu      sync.Mutex
	batches []int // sizes of the AppendResults calls
}

func (w *watched) AppendResults(ctx context.Context, runID string, rs []tare.Result) error {
	w.mu.Lock()
	w.batches = append(w.batches, len(rs))
	w.mu.Unlock()
	if w.gate != nil {
		select {
		case w.entered <- struct{}{}:
		default:
		}
		select {
		case <-w.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.Store.AppendResults(ctx, runID, rs)
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWriterWritesEverything(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		ws := &watched{Store: s}
		w := NewWriter(ws, id, WriterConfig{BatchSize: 100, FlushInterval: 20 * time.Millisecond})
		results, ticks := makeResults(0, 1050), makeTicks(0, 12)
		for i := range results {
			w.Add(&results[i])
			if i%100 == 0 {
				w.AddTick(ticks[i/100])
			}
		}
		w.AddTick(ticks[11])
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := w.Err(); err != nil || w.Dropped() != 0 {
			t.Errorf("after a clean close Err %v, Dropped %d", err, w.Dropped())
		}
		if got := streamAll(t, s, id); !reflect.DeepEqual(got, results) {
			t.Errorf("stored %d results, not the %d added", len(got), len(results))
		}
		got, err := s.FindTicks(ctx, id)
		if err != nil || !reflect.DeepEqual(got, ticks) {
			t.Errorf("stored ticks differ from those added (%d, %v)", len(got), err)
		}
		ws.mu.Lock()
		defer ws.mu.Unlock()
		for _, n := range ws.batches {
			if n > 100 || n == 0 {
				t.Errorf("batch sizes %v: want 1 to 100", ws.batches)
				break
			}
		}
	})
}

// TestWriterFlushesOnInterval: a writer told to flush every 10 ms writes a
// few results long before Close, and one told to flush every hour, started
// beside it, has written nothing by twice that time: a writer that ignored
// FlushInterval (its default is 500 ms) would write both at once.
func TestWriterFlushesOnInterval(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		fast, slow := NewRunID(), NewRunID()
		mustCreate(t, s, newRun(fast, base))
		mustCreate(t, s, newRun(slow, base))
		start := time.Now()
		wf := NewWriter(s, fast, WriterConfig{FlushInterval: 10 * time.Millisecond})
		defer wf.Close(ctx)
		ws := NewWriter(s, slow, WriterConfig{FlushInterval: time.Hour})
		results := makeResults(0, 5) // far from a full batch
		for i := range results {
			wf.Add(&results[i])
			ws.Add(&results[i])
		}
		eventually(t, "5 results written before Close", func() bool {
			return len(streamAll(t, s, fast)) == 5
		})
		took := time.Since(start)
		time.Sleep(took)
		if n := len(streamAll(t, s, slow)); n != 0 {
			t.Errorf("the writer told to flush every hour wrote %d results within %s, as soon as the one told 10 ms (%s): FlushInterval is not what it flushes by", n, 2*took, took)
		}
		if err := ws.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(streamAll(t, s, slow)); n != 5 {
			t.Errorf("after Close the hourly writer's run holds %d results, want 5", n)
		}
	})
}

func TestWriterKeepsGoingAfterError(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		w := NewWriter(s, id, WriterConfig{FlushInterval: 10 * time.Millisecond})
		results := makeResults(0, 30)
		for i := range results[:10] {
			w.Add(&results[i])
		}
		eventually(t, "the first results written", func() bool { return len(streamAll(t, s, id)) == 10 })

		// The run disappears under the writer: its next write fails.
		if err := s.DeleteRun(ctx, id); err != nil {
			t.Fatal(err)
		}
		for i := range results[10:20] {
			w.Add(&results[10+i])
		}
		eventually(t, "the write error reported", func() bool { return w.Err() != nil })
		for i := range results[20:] {
			w.Add(&results[20+i]) // accepted, dropped, never blocking
		}
		w.AddTick(makeTicks(0, 1)[0])
		err := w.Close(ctx)
		wantCode(t, err, tare.ENOTFOUND)
		if w.Dropped() != 21 {
			t.Errorf("Dropped() = %d, want the 21 records after the run vanished", w.Dropped())
		}
		if again := w.Close(ctx); again != err {
			t.Errorf("second Close = %v, want %v", again, err)
		}
	})
}

func TestWriterFallsBehind(t *testing.T) {
	s := openSQLiteT(t)
	ctx := testContext(t)
	id := NewRunID()
	mustCreate(t, s, newRun(id, base))
	ws := &watched{Store: s, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	w := NewWriter(ws, id, WriterConfig{BatchSize: 10, MaxPending: 50, FlushInterval: time.Hour})
	results := makeResults(0, 110)
	for i := range results[:10] {
		w.Add(&results[i]) // a full batch: the writer takes it and blocks
	}
	<-ws.entered
	for i := range results[10:] {
		w.Add(&results[10+i])
	}
	if err := w.Err(); !errors.Is(err, ErrBehind) || w.Dropped() != 50 {
		t.Errorf("with the store stuck: Err %v, Dropped %d; want ErrBehind, 50", err, w.Dropped())
	}
	close(ws.gate)
	if err := w.Close(ctx); !errors.Is(err, ErrBehind) {
		t.Errorf("Close = %v, want ErrBehind", err)
	}
	if got := streamAll(t, s, id); !reflect.DeepEqual(got, results[:60]) {
		t.Errorf("stored %d results, want the 60 accepted", len(got))
	}
}

func TestWriterCloseTimesOut(t *testing.T) {
	s := openSQLiteT(t)
	id := NewRunID()
	mustCreate(t, s, newRun(id, base))
	ws := &watched{Store: s, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	w := NewWriter(ws, id, WriterConfig{FlushInterval: time.Millisecond})
	w.Add(&makeResults(0, 1)[0])
	<-ws.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// The store never lets the write through: Close gives up with ctx,
	// and the writer's goroutine is gone (goleak checks).
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want context.DeadlineExceeded", err)
	}
}

func TestWriterHeartbeat(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		var mu sync.Mutex
		clock := at(0)
		s.c.set.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second)
			return clock
		}
		id := NewRunID()
		mustCreate(t, s, newRun(id, base))
		beat := func() int64 {
			var hb int64
			if err := s.c.b.queryRow(ctx, `SELECT heartbeat_at FROM runs WHERE id = ?`, id).Scan(&hb); err != nil {
				t.Fatal(err)
			}
			return hb
		}
		first := beat()
		// s.Store, not the test wrapper: Heartbeat is not part of tare.Store.
		w := NewWriter(s.Store, id, WriterConfig{FlushInterval: 5 * time.Millisecond, Heartbeat: 10 * time.Millisecond})
		eventually(t, "a heartbeat with nothing to write", func() bool { return beat() > first })
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWriterAfterClose(t *testing.T) {
	s := openSQLiteT(t)
	ctx := testContext(t)
	id := NewRunID()
	mustCreate(t, s, newRun(id, base))
	w := NewWriter(s, id, WriterConfig{})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w.Add(&makeResults(0, 1)[0])
	w.AddTick(makeTicks(0, 1)[0])
	if w.Dropped() != 2 || w.Err() != nil {
		t.Errorf("after Close: Dropped %d Err %v; want 2, nil", w.Dropped(), w.Err())
	}
}
