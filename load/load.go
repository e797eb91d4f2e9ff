// Package load is tare's open-loop engine: it fires each arrival at its
// scheduled time, whatever is still outstanding, and streams a tare.Result
// for every arrival, sent or dropped.
//
// Open loop means the schedule owns the clock. A target that can be served
// on raw connections (tare.Wire: plain HTTP/1.1) runs on event loops, each
// a thread of its own outside Go's scheduler and poller (loop_linux.go):
// per request a timer, a write, a read and a parse, nothing handed to a
// goroutine. Any other target (a queue, a model's stream, TLS, a proxy)
// runs on goroutines: one pacer goroutine sleeps until each arrival's
// absolute offset from the start and offers it to an idle worker without
// blocking; if none is idle it starts another, up to MaxInFlight. Either
// way, at the cap the arrival is recorded as dropped, never delayed:
// delaying it would hide the very queueing the test exists to see.
package load

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tare-dev/tare"
)

// Defaults for Config's zero values.
const (
	DefaultMaxInFlight = 10000
	DefaultDrain       = 10 * time.Second
)

// NoDrain is a Config.Drain of none: once the arrivals stop early, the
// requests in flight are cancelled at once (0 means DefaultDrain).
const NoDrain time.Duration = -1

// Schedule yields arrival offsets from the start of the run, in order;
// arrival.Process satisfies it.
type Schedule interface {
	Next() (at time.Duration, ok bool)
}

// Config tunes a Runner; its zero value means the defaults.
type Config struct {
	MaxInFlight int           // concurrent requests at most; further arrivals are dropped
	Drain       time.Duration // how long in-flight requests may finish after arrivals stop early; NoDrain for none
	// Engines is how many event loops split the schedule, each on a thread
	// of its own, for a target they serve; 0 means DefaultEngines().
	Engines int
}

// The engines a run can have, as Usage.Engine names them.
const (
	EngineLoop       = "event loop"
	EngineGoroutines = "goroutines"
)

// DefaultEngines is the number of event loops for this host: one per four
// CPUs tare may use, at least one and at most eight. One loop serves about
// a core's worth of requests; the system under test, most often on the
// same host, needs the other cores (on two CPUs, one loop).
func DefaultEngines() int {
	return min(max(runtime.NumCPU()/4, 1), 8)
}

// Runner drives one target with one schedule.
type Runner struct {
	target tare.Target
	cfg    Config

	sent    atomic.Int64 // requests handed to the target
	done    atomic.Int64 // requests the target finished
	dropped atomic.Int64
	workers atomic.Int64

	// While every worker is busy at the cap the pacer waits for one to come
	// free (freed), not for each arrival only to drop it.
	idle      atomic.Int64 // workers waiting for an arrival
	saturated atomic.Bool  // the pacer waits on freed
	freed     chan struct{}

	// counter counts the connections: the target's own (tare.ConnCounted),
	// which its net/http pool counts into too, or the Runner's.
	counter *tare.ConnCounter
	// Requests the loops handed to goroutines (tare.StepElsewhere), which
	// send their results to out themselves, under reqCtx.
	handoffs sync.WaitGroup
	reqCtx   context.Context
	out      chan<- *Batch
}

// New returns a Runner for target.
func New(target tare.Target, cfg Config) *Runner {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Drain == 0 {
		cfg.Drain = DefaultDrain
	}
	if cfg.Engines <= 0 {
		cfg.Engines = DefaultEngines()
	}
	cfg.Engines = min(cfg.Engines, cfg.MaxInFlight)
	counter := new(tare.ConnCounter)
	if c, ok := target.(tare.ConnCounted); ok {
		counter = c.Conns()
	}
	return &Runner{target: target, cfg: cfg, freed: make(chan struct{}, 1), counter: counter}
}

// Usage is what the generator itself cost.
type Usage struct {
	Wall    time.Duration // from start to the last result
	CPU     time.Duration // user + system time of this process over the run
	Workers int           // worker goroutines started, or the loops' connections open at once at most
	Engine  string        // EngineLoop or EngineGoroutines: what served the target
	Engines int           // event loops, when Engine is EngineLoop
}

// CPUPct is the generator's CPU as a share of one core, in percent.
func (u Usage) CPUPct() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return 100 * u.CPU.Seconds() / u.Wall.Seconds()
}

// Progress is a live view of the engine for a progress line.
type Progress struct {
	Sent, Done, Dropped, InFlight int64
	Conns                         int64 // connections open, for a target that counts them; else 0
}

// Progress returns the engine's counters; it is safe to call concurrently
// with Run.
func (r *Runner) Progress() Progress {
	s, d := r.sent.Load(), r.done.Load()
	return Progress{Sent: s, Done: d, Dropped: r.dropped.Load(), InFlight: s - d, Conns: r.counter.Stats().Open}
}

// handoff runs the rest of a request an event loop cannot make on a
// goroutine, which sends its result.
func (r *Runner) handoff(rest func(context.Context, *tare.Result), res tare.Result) {
	r.handoffs.Add(1)
	go func() {
		defer r.handoffs.Done()
		rest(r.reqCtx, &res)
		if res.Done.IsZero() {
			res.Done = time.Now()
		}
		r.done.Add(1)
		one(r.out, res)
	}()
}

// feed is the schedule shared by the event loops: each claims the next
// arrival when it has fired its last, so the loops together fire exactly
// the one arrival process.
type feed struct {
	mu    sync.Mutex // guards the fields
	ahead lookahead
	start time.Time
	seq   uint64
	done  bool
}

func (f *feed) claim() (arrival, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return arrival{}, false
	}
	at, ok := f.ahead.Next()
	if !ok {
		f.done = true
		return arrival{}, false
	}
	a := arrival{seq: f.seq, scheduled: f.start.Add(at)}
	f.seq++
	return a, true
}

type arrival struct {
	seq       uint64
	scheduled time.Time
}

// Run fires the schedule from start and sends one Result per arrival to out,
// in batches (the receiver releases each once read), closing out when
// every result has been sent. Cancelling ctx stops the
// arrivals; requests in flight then get up to Config.Drain to finish before
// their own context is cancelled, whether ctx ends during the arrivals or
// after the last one. Run blocks until out is closed.
func (r *Runner) Run(ctx context.Context, start time.Time, sched Schedule, out chan<- *Batch) Usage {
	r.counter.ResetPeak()
	if wire, ok := r.target.(tare.Wire); ok {
		if eps := wire.Endpoints(); len(eps) > 0 {
			if u, ok := r.runLoops(ctx, start, sched, out, wire, eps); ok {
				return u
			}
		}
	}
	cpu0 := processCPU()
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()

	// Shutdown is a fixed sequence: the pacer closes arrivals, the workers
	// drain it and exit, then out is closed.
	arrivals := make(chan arrival)
	var wg sync.WaitGroup
	r.pace(ctx, start, sched, arrivals, out, func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(reqCtx, arrivals, out)
		}()
	})
	close(arrivals)

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	r.drain(ctx, finished, cancelRequests)
	close(out)
	return Usage{Wall: time.Since(start), CPU: processCPU() - cpu0, Workers: int(r.workers.Load()), Engine: EngineGoroutines}
}

// drain waits for finished. The drain starts when ctx ends, during the
// arrivals or after the last one: a run whose schedule is over but whose
// requests are still out (a queue job held by a stuck worker) is stopped
// by Ctrl-C just the same, not after the requests' own timeouts; those
// still out Config.Drain later are canceled.
func (r *Runner) drain(ctx context.Context, finished <-chan struct{}, cancelRequests func()) {
	select {
	case <-finished:
	case <-ctx.Done():
		if r.cfg.Drain < 0 { // NoDrain
			cancelRequests()
			<-finished
			break
		}
		drain := time.NewTimer(r.cfg.Drain)
		select {
		case <-finished:
		case <-drain.C:
			cancelRequests()
			<-finished
		}
		drain.Stop()
	}
}

// pace owns the clock: it waits for each arrival's absolute time and offers
// it without blocking, starting a worker when none is idle.
func (r *Runner) pace(ctx context.Context, start time.Time, sched Schedule, arrivals chan<- arrival, out chan<- *Batch, spawn func()) {
	clock := newClock(ctx)
	defer clock.stop()
	ahead := &lookahead{Schedule: sched}
	poll := time.NewTimer(saturatedPoll)
	poll.Stop()
	for seq := uint64(0); ; seq++ {
		at, ok := ahead.Next()
		if !ok {
			return
		}
		scheduled := start.Add(at)
		if !clock.sleepUntil(scheduled) {
			return
		}
		a := arrival{seq: seq, scheduled: scheduled}
		if time.Since(scheduled) > 0 {
			// Behind schedule, the pacer would dispatch without a pause and,
			// with few CPUs, starve the very workers it hands arrivals to,
			// then count them busy and drop. Let them run first.
			runtime.Gosched()
		}
		select {
		case arrivals <- a:
			continue
		default:
		}
		if r.workers.Load() < int64(r.cfg.MaxInFlight) {
			r.workers.Add(1)
			spawn()
			arrivals <- a // the new worker is idle and takes it
			continue
		}
		// Every worker is busy and no more may start: the arrival is dropped,
		// recorded, and the schedule goes on.
		select {
		case arrivals <- a:
			continue
		default:
		}
		if seq, ok = r.dropUntilFree(ctx, start, ahead, a, poll, out); !ok {
			return
		}
	}
}

// dropUntilFree drops a, whose workers are all busy at the cap, and the
// arrivals scheduled until one comes free, without a wait for each (at a
// rate far above what the target takes, that wait was most of the
// pacer's CPU), and hands them to out as one batch. It returns the seq
// of the last one dropped; false when the schedule or ctx ended meanwhile.
func (r *Runner) dropUntilFree(ctx context.Context, start time.Time, ahead *lookahead, a arrival, poll *time.Timer, out chan<- *Batch) (uint64, bool) {
	drops := NewBatch()
	defer func() { out <- drops }()
	drop(drops, a)
	r.dropped.Add(1)
	until, ok := r.awaitFree(ctx, poll)
	if !ok {
		return a.seq, false
	}
	for seq := a.seq + 1; ; seq++ {
		at, ok := ahead.Next()
		if !ok {
			return seq - 1, false
		}
		if !start.Add(at).Before(until) {
			ahead.unread(at)
			return seq - 1, true
		}
		drop(drops, arrival{seq: seq, scheduled: start.Add(at)})
		r.dropped.Add(1)
	}
}

// drop records arrival a as dropped in b.
func drop(b *Batch, a arrival) {
	b.Results = append(b.Results, tare.Result{Seq: a.seq, Scheduled: a.scheduled, Dropped: true})
}

// saturatedPoll bounds a wait for a free worker, so that the arrivals
// dropped meanwhile are counted as the run goes (the progress line) and a
// schedule that ends meanwhile ends on time.
const saturatedPoll = 20 * time.Millisecond

// awaitFree waits until a worker is idle, or saturatedPoll on poll (a
// stopped timer), and returns the time then; false when ctx ended first.
func (r *Runner) awaitFree(ctx context.Context, poll *time.Timer) (time.Time, bool) {
	// saturated is set before idle is read, and a worker adds itself to
	// idle before it reads saturated: one of the two sees the other.
	r.saturated.Store(true)
	defer r.saturated.Store(false)
	poll.Reset(saturatedPoll)
	defer poll.Stop()
	for r.idle.Load() == 0 {
		select {
		case <-r.freed:
		case <-poll.C:
			return time.Now(), ctx.Err() == nil
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
	return time.Now(), ctx.Err() == nil
}

// lookahead is a Schedule that can take its last arrival back.
type lookahead struct {
	Schedule
	back   time.Duration
	isBack bool
}

func (l *lookahead) Next() (time.Duration, bool) {
	if l.isBack {
		l.isBack = false
		return l.back, true
	}
	return l.Schedule.Next()
}

func (l *lookahead) unread(at time.Duration) { l.back, l.isBack = at, true }

func (r *Runner) work(ctx context.Context, arrivals <-chan arrival, out chan<- *Batch) {
	var res tare.Result // reused: one allocation per worker, not per request
	for {
		r.idle.Add(1)
		if r.saturated.Load() {
			select {
			case r.freed <- struct{}{}:
			default:
			}
		}
		a, ok := <-arrivals
		r.idle.Add(-1)
		if !ok {
			return
		}
		res = tare.Result{Seq: a.seq, Scheduled: a.scheduled, Sent: time.Now()}
		r.sent.Add(1)
		r.target.Do(ctx, &res)
		if res.Done.IsZero() {
			res.Done = time.Now()
		}
		r.done.Add(1)
		one(out, res)
	}
}

// processCPU is the user plus system time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
