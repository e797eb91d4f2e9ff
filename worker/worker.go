// Package worker is tare's reference agent worker: it takes jobs from a
// queue.Broker, calls a model for each, and publishes the result. It speaks
// the protocol of docs/job-protocol.md, which a worker in any language can
// follow instead.
//
//	Claim or Fetch ──▶ start ──▶ Model.Complete ──▶ done ──▶ Complete (ack + result, atomic)
//	     ▲                          touched every Heartbeat
//	     └── stop signal checked every Block
//
// It is crash-safe the way a Redis Streams consumer group allows. A job
// stays pending on its worker until completed; while the worker lives it
// touches its jobs every Heartbeat, so they never look idle however slow the
// model; when it dies (SIGKILL, a lost machine) its jobs go idle and, after
// ClaimIdle, another worker claims them, and the result reports how many
// deliveries the job took. The model may then be called twice for one job,
// but the job is reported once: completing acknowledges the job and
// publishes its result in one atomic step that publishes only if the
// acknowledgement succeeded, so a worker that was frozen rather than dead
// publishes nothing when it wakes (Stats.Superseded). The worker therefore
// keeps no "done" marks of its own; the generator's queue.Target also drops
// a second result for a job, should a job have been enqueued twice.
//
// A worker stops when its context ends or when the queue's stop signal is
// raised: it fetches no more jobs, gives those it holds up to Grace to
// finish, removes its registration and returns. Jobs still unfinished then
// stay pending and are claimed by other workers later.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// The error kinds the worker reports itself, besides the model's.
const (
	// KindTooManyDeliveries: the job was delivered more than MaxDeliveries
	// times (its workers kept dying on it); it fails without another try.
	KindTooManyDeliveries = "too many deliveries"
	// KindBadJob: the job entry could not be decoded.
	KindBadJob = "bad job"
	// KindModel: the model could not be called at all (Model.Complete
	// returned an error).
	KindModel = "model failed"
)

// Defaults for Config's zero values.
const (
	DefaultConcurrency = 4
	// DefaultClaimIdle is short enough that a worker that dies holding
	// jobs costs a short test seconds, not its jobs' timeouts: another
	// worker claims them within 1.5 × ClaimIdle (claims are tried every
	// ClaimIdle/2). A live worker touches its jobs every heartbeat (a third
	// of it), however slow the model, so only one frozen for most of 5 s
	// has its jobs claimed, and even then each is reported once.
	DefaultClaimIdle     = 5 * time.Second
	DefaultBlock         = time.Second
	DefaultGrace         = 30 * time.Second
	DefaultMaxDeliveries = 5
)

// MinClaimIdle is the shortest ClaimIdle: Redis counts a pending job's idle
// time in milliseconds, and the heartbeat runs three times per ClaimIdle.
const MinClaimIdle = 3 * time.Millisecond

// Model is the model endpoint a worker calls.
type Model interface {
	// Complete generates one completion of prompt, of at most maxTokens
	// tokens (0 leaves the cap to the server). A failed request is a
	// measurement: it goes in Completion.Err with a nil error. An error
	// means the call could not be made at all; the job then fails with
	// KindModel.
	Complete(ctx context.Context, prompt string, maxTokens int) (Completion, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, prompt string, maxTokens int) (Completion, error)

// Complete calls f.
func (f ModelFunc) Complete(ctx context.Context, prompt string, maxTokens int) (Completion, error) {
	return f(ctx, prompt, maxTokens)
}

// Completion is one model call as the worker reports it.
type Completion struct {
	FirstToken   time.Time // first output token; zero if none
	OutputTokens int
	PromptTokens int    // 0 when unknown
	TokenSource  string // queue.TokensUsage or queue.TokensCounted; "" when unknown
	Err          string // failure kind ("timeout", "http 503", …); "" when ok
}

// Config tunes a Worker; its zero value means the defaults.
type Config struct {
	// Name is the worker's consumer name, unique among the queue's live
	// workers; default "<host>-<pid>-<random>".
	Name string
	// Concurrency is how many jobs the worker runs at once.
	Concurrency int
	// ClaimIdle is how long a job may sit pending without a touch before
	// another worker claims it, its own worker presumed dead.
	ClaimIdle time.Duration
	// Heartbeat is how often the worker refreshes its registration and
	// touches its jobs; default ClaimIdle/3. It must be shorter than
	// ClaimIdle. The registration lives three heartbeats.
	Heartbeat time.Duration
	// Block is how long one fetch waits for a job, and how often the stop
	// signal is checked.
	Block time.Duration
	// Grace is how long jobs in flight may finish after a stop.
	Grace time.Duration
	// MaxDeliveries: a job delivered more often fails with
	// KindTooManyDeliveries without calling the model.
	MaxDeliveries int
	// Now stamps start and done; default time.Now.
	Now func() time.Time
	// Log receives what the worker has to say; default discards.
	Log *slog.Logger
}

// withDefaults fills the zero fields and checks the others.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Concurrency < 0:
		return c, tare.Errorf(tare.EINVALID, "worker concurrency %d: want 1 or more (0 means %d)", c.Concurrency, DefaultConcurrency)
	case c.ClaimIdle < 0, c.Heartbeat < 0, c.Block < 0, c.Grace < 0:
		return c, tare.Errorf(tare.EINVALID, "worker durations must be 0 (default) or more; got claim idle %v, heartbeat %v, block %v, grace %v",
			c.ClaimIdle, c.Heartbeat, c.Block, c.Grace)
	case c.MaxDeliveries < 0:
		return c, tare.Errorf(tare.EINVALID, "worker max deliveries %d: want 1 or more (0 means %d)", c.MaxDeliveries, DefaultMaxDeliveries)
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.ClaimIdle == 0 {
		c.ClaimIdle = DefaultClaimIdle
	}
	if c.ClaimIdle < MinClaimIdle {
		// Redis counts idle time in milliseconds, and the heartbeat, a
		// third of it by default, must be a positive ticker interval.
		return c, tare.Errorf(tare.EINVALID, "worker claim idle %v: want %v or more", c.ClaimIdle, MinClaimIdle)
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.ClaimIdle / 3
	}
	if c.Heartbeat >= c.ClaimIdle {
		return c, tare.Errorf(tare.EINVALID, "worker heartbeat %v: want less than the claim idle %v, or a running job would be claimed from its live worker",
			c.Heartbeat, c.ClaimIdle)
	}
	if c.Block == 0 {
		c.Block = DefaultBlock
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Worker consumes one queue. Create it with New and start it with Run.
type Worker struct {
	b   queue.Broker
	m   Model
	cfg Config

	mu       sync.Mutex          // guards inflight
	inflight map[string]struct{} // delivery ids being worked on, touched every heartbeat

	fetched, claimed, done, failed, abandoned, superseded atomic.Int64
	clockOffset                                           atomic.Int64 // broker clock − ours, ns; stamped on every result
}

// Stats counts a worker's jobs so far.
type Stats struct {
	Fetched   int64 // jobs delivered to it for the first time
	Claimed   int64 // jobs it took over from a worker presumed dead
	Done      int64 // results published with status ok
	Failed    int64 // results published with status error
	Abandoned int64 // jobs left pending (grace over, or the result could not be published)
	// Superseded are results not published because the job was no longer
	// pending: this worker was presumed dead and another completed the job
	// first, or the queue's state was lost.
	Superseded int64
}

// New returns a worker that takes jobs from b and calls m. Config errors
// are reported by Run.
func New(b queue.Broker, m Model, cfg Config) *Worker {
	return &Worker{b: b, m: m, cfg: cfg, inflight: map[string]struct{}{}}
}

// Name returns the worker's consumer name once Run has started; before, the
// configured one.
func (w *Worker) Name() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg.Name
}

// Stats returns the worker's counters; it is safe to call during Run.
func (w *Worker) Stats() Stats {
	return Stats{
		Fetched:    w.fetched.Load(),
		Claimed:    w.claimed.Load(),
		Done:       w.done.Load(),
		Failed:     w.failed.Load(),
		Abandoned:  w.abandoned.Load(),
		Superseded: w.superseded.Load(),
	}
}

// Run registers the worker and consumes jobs until ctx ends or the queue's
// stop signal is raised, then lets the jobs in flight finish (up to Grace),
// unregisters and returns nil. It returns an error when the configuration
// is invalid or the worker cannot register; a broker that fails later is
// retried, never fatal, so a Redis restart does not stop the worker.
func (w *Worker) Run(ctx context.Context) error {
	cfg, err := w.cfg.withDefaults()
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.cfg = cfg
	w.mu.Unlock()
	host, _ := os.Hostname()
	info := queue.WorkerInfo{
		Name:        cfg.Name,
		Host:        host,
		PID:         os.Getpid(),
		Started:     cfg.Now(),
		Concurrency: cfg.Concurrency,
	}
	ttl := 3 * cfg.Heartbeat
	if err := w.b.Register(ctx, info, ttl); err != nil {
		return fmt.Errorf("register worker %q on queue %q: %w", cfg.Name, w.b.Queue(), err)
	}
	log := cfg.Log.With("worker", cfg.Name, "queue", w.b.Queue())
	w.measureClock(ctx, log)
	log.Info("worker started", "concurrency", cfg.Concurrency, "claim_idle", cfg.ClaimIdle, "clock_offset", time.Duration(w.clockOffset.Load()))

	// Shutdown is a fixed sequence: stop closes, the fetch loop returns,
	// jobs in flight finish (or are cancelled after Grace), housekeeping
	// stops, the registration is removed.
	stop := make(chan struct{})
	var stopOnce sync.Once
	requestStop := func() { stopOnce.Do(func() { close(stop) }) }
	go func() {
		select {
		case <-ctx.Done():
			requestStop()
		case <-stop:
		}
	}()

	// Jobs and broker calls outlive ctx: a stopping worker still finishes
	// and publishes what it holds.
	bg := context.WithoutCancel(ctx)
	jobCtx, cancelJobs := context.WithCancel(bg)
	defer cancelJobs()
	hkCtx, stopHousekeeping := context.WithCancel(bg)
	hkDone := make(chan struct{})
	go w.housekeep(hkCtx, info, ttl, requestStop, log, hkDone)

	var jobs sync.WaitGroup
	w.fetchLoop(bg, jobCtx, stop, &jobs, log)

	finished := make(chan struct{})
	go func() { jobs.Wait(); close(finished) }()
	grace := time.NewTimer(cfg.Grace)
	select {
	case <-finished:
	case <-grace.C:
		log.Warn("grace over: cancelling jobs in flight; they stay pending for other workers", "grace", cfg.Grace)
		cancelJobs()
		<-finished
	}
	grace.Stop()
	stopHousekeeping()
	<-hkDone

	uctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := w.b.Unregister(uctx, cfg.Name); err != nil {
		log.Warn("unregister failed; the registration expires by itself", "err", err)
	}
	log.Info("worker stopped", "done", w.done.Load(), "failed", w.failed.Load(), "claimed", w.claimed.Load())
	return nil
}

// Backoff bounds after a failed fetch.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// fetchLoop takes jobs while there are free slots, until stop closes. A
// slot is a token in slots, held by a running job.
func (w *Worker) fetchLoop(ctx, jobCtx context.Context, stop <-chan struct{}, jobs *sync.WaitGroup, log *slog.Logger) {
	n := w.cfg.Concurrency
	slots := make(chan struct{}, n)
	var lastClaim time.Time
	backoff := time.Duration(0)
	for {
		select {
		case <-stop:
			return
		case slots <- struct{}{}:
		}
		free := 1
	more:
		for free < n {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		ds, err := w.next(ctx, free, &lastClaim)
		for range free - len(ds) {
			<-slots
		}
		for _, d := range ds {
			jobs.Add(1)
			go func() {
				defer jobs.Done()
				defer func() { <-slots }()
				w.process(jobCtx, d, log)
			}()
		}
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		log.Warn("fetching jobs failed; retrying", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-stop:
		case <-t.C:
		}
		t.Stop()
	}
}

// next claims jobs idle on dead workers when a claim is due, and otherwise
// fetches new ones, waiting up to Block.
func (w *Worker) next(ctx context.Context, n int, lastClaim *time.Time) ([]queue.Delivery, error) {
	if now := time.Now(); now.Sub(*lastClaim) >= w.cfg.ClaimIdle/2 {
		*lastClaim = now
		ds, err := w.b.Claim(ctx, w.cfg.Name, w.cfg.ClaimIdle, n)
		if err != nil {
			return nil, err
		}
		if len(ds) > 0 {
			w.claimed.Add(int64(len(ds)))
			return ds, nil
		}
	}
	ds, err := w.b.Fetch(ctx, w.cfg.Name, n, w.cfg.Block)
	w.fetched.Add(int64(len(ds)))
	return ds, err
}

// housekeep refreshes the registration and touches the jobs in flight every
// Heartbeat, and watches the stop signal every Block.
func (w *Worker) housekeep(ctx context.Context, info queue.WorkerInfo, ttl time.Duration, requestStop func(), log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	watch := time.NewTicker(w.cfg.Block)
	defer watch.Stop()
	beat := time.NewTicker(w.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-watch.C:
			stopped, err := w.b.Stopped(ctx)
			if err != nil {
				log.Warn("checking the stop signal failed", "err", err)
				continue
			}
			if stopped {
				log.Info("stop signal seen")
				requestStop()
			}
		case <-beat.C:
			w.measureClock(ctx, log)
			if err := w.b.Register(ctx, info, ttl); err != nil {
				log.Warn("refreshing the registration failed", "err", err)
			}
			if ids := w.inflightIDs(); len(ids) > 0 {
				if err := w.b.Touch(ctx, w.cfg.Name, ids...); err != nil {
					log.Warn("touching jobs in flight failed; they may be claimed by another worker", "err", err, "jobs", len(ids))
				}
			}
		}
	}
}

// measureClock measures the broker's clock against the worker's, so the
// generator can put this worker's stamps on its own clock: queue wait
// across hosts means nothing without it. A failed reading keeps the last.
func (w *Worker) measureClock(ctx context.Context, log *slog.Logger) {
	off, _, err := queue.ClockOffset(ctx, w.b, w.cfg.Now, 3)
	if err != nil {
		log.Warn("measuring the clock offset failed", "err", err)
		return
	}
	w.clockOffset.Store(int64(off))
}

func (w *Worker) inflightIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.inflight))
	for id := range w.inflight {
		ids = append(ids, id)
	}
	return ids
}

func (w *Worker) track(id string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.inflight[id] = struct{}{}
	} else {
		delete(w.inflight, id)
	}
}

// publishTimeout bounds publishing one result, retries included.
const publishTimeout = 10 * time.Second

// process does one job and publishes its result.
func (w *Worker) process(ctx context.Context, d queue.Delivery, log *slog.Logger) {
	w.track(d.ID, true)
	defer w.track(d.ID, false)
	job := d.Job
	res := queue.Result{
		ID:         job.ID,
		RunID:      job.RunID,
		Worker:     w.cfg.Name,
		Start:      w.cfg.Now(),
		Deliveries: d.Count,
	}
	res.ClockOffset = time.Duration(w.clockOffset.Load())
	switch {
	case d.Err != nil:
		log.Warn("job entry cannot be decoded", "entry", d.ID, "err", d.Err)
		if job.ID == "" || job.RunID == "" {
			// No result can name it: drop it.
			w.publish(ctx, d, nil, log)
			return
		}
		res.Error = KindBadJob
	case d.Count > w.cfg.MaxDeliveries:
		res.Error = KindTooManyDeliveries
	default:
		c, err := w.m.Complete(ctx, job.Prompt, job.MaxTokens)
		if err != nil {
			log.Warn("model call failed", "job", job.ID, "err", err)
			c = Completion{Err: KindModel}
		}
		if c.Err != "" && ctx.Err() != nil {
			// Cancelled at the end of the grace period: the failure is
			// ours, not the model's. Leave the job pending for another
			// worker.
			w.abandoned.Add(1)
			return
		}
		res.FirstToken = c.FirstToken
		res.TokensIn = c.PromptTokens
		res.TokensOut = c.OutputTokens
		res.TokenSource = c.TokenSource
		res.Error = c.Err
	}
	res.Done = w.cfg.Now()
	res.Status = queue.StatusOK
	if res.Error != "" {
		res.Status = queue.StatusError
	}
	w.publish(ctx, d, &res, log)
}

// publish completes d with res (or acknowledges it when res is nil),
// retrying for a while: a broker that is restarting should not cost the
// job. A job whose result cannot be published stays pending, to be claimed
// and done again.
func (w *Worker) publish(ctx context.Context, d queue.Delivery, res *queue.Result, log *slog.Logger) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	backoff := minBackoff
	for {
		var err error
		if res == nil {
			err = w.b.Ack(pctx, d.ID)
		} else {
			err = w.b.Complete(pctx, d, *res)
		}
		if err == nil {
			switch {
			case res == nil:
			case res.Status == queue.StatusOK:
				w.done.Add(1)
			default:
				w.failed.Add(1)
			}
			return
		}
		if errors.Is(err, queue.ErrNotPending) {
			log.Info("result not published: the job is no longer pending", "entry", d.ID, "err", err)
			w.superseded.Add(1)
			return
		}
		if errors.Is(err, queue.ErrClosed) || pctx.Err() != nil {
			log.Warn("publishing the result failed; the job stays pending", "entry", d.ID, "err", err)
			w.abandoned.Add(1)
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-pctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, maxBackoff)
	}
}
