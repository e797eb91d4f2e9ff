package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
)

// The error kinds the Target records in tare.Result.Err, besides the ones
// workers report.
const (
	// KindUnfinished: the job had no result when Do's context ended (the
	// run and its drain were over) or the Target was closed.
	KindUnfinished = "unfinished"
	// KindUnavailable: the job could not be enqueued, or the queue lost
	// it (a Redis restart without persistence).
	KindUnavailable = "queue unavailable"
	// KindTimeout: the job had no result within TargetConfig.Timeout.
	KindTimeout = "timeout"
)

// Defaults for TargetConfig's zero values.
const (
	DefaultPrompt = "In two sentences, explain why a load test on a shared virtual machine can mislead."
	DefaultPoll   = 500 * time.Millisecond
)

// TargetConfig tunes a Target; its zero value means the defaults.
type TargetConfig struct {
	RunID     string // names this run's jobs and results; default a random UUID
	Prompt    string // the prompt of every job; default DefaultPrompt
	MaxTokens int    // output cap of every job; 0 leaves it to the model server
	// Prompts, when not nil, gives each job its own prompt and output cap
	// (a prompt dataset): its user messages as the prompt, its budget, or
	// MaxTokens when that is 0.
	Prompts tare.Prompts
	Poll    time.Duration // how long one read of results waits; default DefaultPoll
	// Timeout bounds one job, from enqueue to result; 0 means no bound but
	// Do's context. The load engine waits for every job of a run that ends
	// normally, so without a bound a lost job holds the run open.
	Timeout time.Duration
}

// Target is the generator's side of the queue, a tare.Target: Do enqueues a
// job and waits for its result. One reader goroutine reads the results
// stream and hands each result to the Do call waiting for its job, so any
// number of jobs can be outstanding.
//
// Every Do returns exactly once per job: a result that arrives twice (a job
// redelivered after its worker seemed dead, and done twice) is counted in
// Stats().Duplicates and not reported again; a job with no result when Do's
// context ends is recorded as KindUnfinished, never dropped.
//
// Worker stamps (Started, FirstByte, Done) are taken on the worker's clock.
// A worker that reports its offset against the broker's clock (as tare
// worker does) has its stamps moved onto this generator's clock, through
// the broker's: queue wait across hosts is then right to within the two
// measurements' round trips. A shift within the generator's round trip
// (and under a millisecond) is not applied: it is the measurements' own
// error, as for a worker on this host, whose clock is this one. Stats().Skewed counts results whose stamps
// still fall outside the job's [enqueue, receipt] interval by more than
// that error, which only disagreeing clocks produce.
type Target struct {
	b         Source
	prompt    string
	maxTokens int
	prompts   tare.Prompts
	poll      time.Duration
	timeout   time.Duration

	cancel context.CancelFunc
	done   chan struct{} // closed when the reader has returned

	mu      sync.Mutex // guards everything below
	closed  bool
	runID   string             // the run whose jobs are enqueued and whose results are read
	waiters map[uint64]*waiter // by job seq
	matched seqSet             // jobs reported with their result
	settled seqSet             // jobs reported without one (unfinished, unavailable)
	stats   TargetStats
	offset  time.Duration // the broker's clock − this generator's, measured when the reader starts
	rtt     time.Duration // the round trip of that measurement
}

// waiter is one Do call waiting for its job's result.
type waiter struct {
	ch   chan outcome // buffered: the sender never blocks
	sent time.Time    // the job's enqueue time
}

// outcome is what a waiting Do receives: a worker's result, or a kind the
// Target decided on.
type outcome struct {
	res         Result
	kind        string
	localOffset time.Duration // the broker's clock − the generator's, to move worker stamps with
	localRTT    time.Duration // the round trip it was measured in
}

// TargetStats counts what the Target saw besides the results it reported,
// and what it last read of the queue itself (Depth, Workers).
type TargetStats struct {
	Enqueued    int64 // jobs enqueued
	Matched     int64 // results reported to a Do call
	Redelivered int64 // of those, results of jobs delivered more than once: a worker died, or seemed dead, holding them
	Duplicates  int64 // results for a job already reported: a job done twice after a redelivery
	Late        int64 // results for a job already recorded unfinished, unavailable or timed out
	Unknown     int64 // results naming this run but no job it enqueued (an id it never used), skipped
	Foreign     int64 // results of other runs on the same queue, skipped
	Unfinished  int64 // jobs recorded KindUnfinished
	Unavailable int64 // jobs recorded KindUnavailable
	Unconfirmed int64 // jobs recorded KindUnconfirmed: the broker did not confirm their message
	Timeouts    int64 // jobs recorded KindTimeout
	Skewed      int64 // results stamped outside [enqueue, receipt]: the worker's clock disagrees
	ReadErrors  int64 // failed reads of the results (the queue was unreachable)
	Lost        int64 // times the queue's state was found lost

	// Depth is the queue's backlog at the last successful Depth call, and
	// OldestPendingMax the highest Depth.OldestPending any call saw: a job
	// held for long by a worker that died shows here before its timeout.
	Depth            Depth
	OldestPendingMax time.Duration
	Depths           int64 // successful Depth calls
	// Workers is how many workers were registered at the last successful
	// Workers call (-1 before the first), WorkersMax the most at once, and
	// WorkersLost how many times the count fell from some to none: every
	// worker of the queue went away while the Target watched.
	Workers, WorkersMax, WorkersLost int
	// WorkersGone is when the count last fell to none; zero while some are
	// registered.
	WorkersGone time.Time
}

var _ tare.Target = (*Target)(nil)

// NewTarget returns a Target on b (a Broker, for tare's own protocol, or
// a job framework's queue: Celery, RQ) and starts its results reader;
// Close stops it. A negative figure in cfg is a *tare.Error with code
// EINVALID.
func NewTarget(b Source, cfg TargetConfig) (*Target, error) {
	switch {
	case cfg.MaxTokens < 0:
		return nil, tare.Errorf(tare.EINVALID, "max tokens %d: want 0 (model server default) or more", cfg.MaxTokens)
	case cfg.Poll < 0:
		return nil, tare.Errorf(tare.EINVALID, "results poll %v: want 0 (default %v) or more", cfg.Poll, DefaultPoll)
	case cfg.Timeout < 0:
		return nil, tare.Errorf(tare.EINVALID, "job timeout %v: want 0 (none) or more", cfg.Timeout)
	}
	t := &Target{
		b:         b,
		runID:     cfg.RunID,
		stats:     TargetStats{Workers: -1},
		prompt:    cfg.Prompt,
		maxTokens: cfg.MaxTokens,
		prompts:   cfg.Prompts,
		poll:      cfg.Poll,
		timeout:   cfg.Timeout,
		done:      make(chan struct{}),
		waiters:   map[uint64]*waiter{},
	}
	if t.runID == "" {
		t.runID = uuid.NewString()
	}
	if t.prompt == "" {
		t.prompt = DefaultPrompt
	}
	if t.poll == 0 {
		t.poll = DefaultPoll
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go t.read(ctx)
	return t, nil
}

// RunID returns the run id stamped on every job.
func (t *Target) RunID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runID
}

// SetRunID names the run of the jobs enqueued from now on, for a Target
// that serves one run after another (the windows of a sweep or a
// protocol): the printed run id is then the jobs' run field, and a late
// result of the run before, whose jobs' numbers start at 0 again, is
// counted Foreign instead of being taken for this run's. Stats start again
// for the new run, but for the queue's last depth and worker count. Call it
// between runs, with no Do in flight.
func (t *Target) SetRunID(id string) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == t.runID {
		return
	}
	t.runID = id
	t.matched, t.settled = seqSet{}, seqSet{}
	last := t.stats
	t.stats = TargetStats{Depth: last.Depth, Workers: last.Workers, WorkersMax: max(last.Workers, 0), WorkersGone: last.WorkersGone}
}

// Queue returns the queue's name.
func (t *Target) Queue() string { return t.b.Queue() }

// String names the target for a run's description.
func (t *Target) String() string {
	if n, ok := t.b.(fmt.Stringer); ok {
		return n.String()
	}
	return "queue " + t.b.Queue()
}

// Notes are what the queue's framework could not tell, in words a user
// can act on (a Celery worker without task_track_started has no start
// times, so no queue wait): nil for tare's own protocol.
func (t *Target) Notes() []string {
	if n, ok := t.b.(noter); ok {
		return n.Notes()
	}
	return nil
}

// WorkerHint says how to start a worker serving the queue, for the error
// of a queue nobody serves; "" for tare's own protocol (tare worker).
func (t *Target) WorkerHint() string {
	if h, ok := t.b.(hinter); ok {
		return h.WorkerHint()
	}
	return ""
}

// CheckTask checks, where the queue's framework can tell, that its
// workers know the task the jobs name: a *tare.Error with code EINVALID
// when they answered and do not; nil otherwise (and for tare's own
// protocol).
func (t *Target) CheckTask(ctx context.Context) error {
	if c, ok := t.b.(taskChecker); ok {
		return c.CheckTask(ctx)
	}
	return nil
}

// Stats returns the counters so far.
func (t *Target) Stats() TargetStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Depth returns the queue's backlog now, and keeps it in Stats; the CLI
// samples it every tick.
func (t *Target) Depth(ctx context.Context) (Depth, error) {
	d, err := t.b.Depth(ctx)
	if err != nil {
		return d, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.Depth = d
	t.stats.Depths++
	t.stats.OldestPendingMax = max(t.stats.OldestPendingMax, d.OldestPending)
	return d, nil
}

// Workers lists the queue's registered workers, and keeps their count in
// Stats: the CLI watches it during a run, so a run whose every worker left
// says so.
func (t *Target) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ws, err := t.b.Workers(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.stats
	switch n := len(ws); {
	case n == 0 && st.Workers > 0:
		st.WorkersLost++
		st.WorkersGone = now
	case n > 0:
		st.WorkersGone = time.Time{}
	}
	st.Workers = len(ws)
	st.WorkersMax = max(st.WorkersMax, len(ws))
	return ws, nil
}

// Do enqueues job res.Seq, stamped with res.Sent as its enqueue time, and
// waits for its result. It fills Started, FirstByte (the first token), Done,
// Worker, Deliveries, OutputTokens, TokenSource and Err. Seq must be unique
// for the Target's life.
func (t *Target) Do(ctx context.Context, res *tare.Result) {
	if res.Sent.IsZero() {
		res.Sent = time.Now()
	}
	seq := res.Seq
	parent := ctx // its end is the run's end; ctx's own end is the job's timeout
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	w := &waiter{ch: make(chan outcome, 1), sent: res.Sent}
	t.mu.Lock()
	if t.closed {
		t.stats.Unfinished++
		t.mu.Unlock()
		res.Err = KindUnfinished
		return
	}
	// Registered before enqueueing: a fast worker's result may arrive
	// before Enqueue returns.
	t.waiters[seq] = w
	t.mu.Unlock()

	job := Job{
		ID:        strconv.FormatUint(seq, 10),
		RunID:     t.RunID(),
		Enqueued:  res.Sent,
		Prompt:    t.prompt,
		MaxTokens: t.maxTokens,
	}
	if t.prompts != nil {
		p := t.prompts(seq)
		if text := p.Text(); text != "" {
			job.Prompt = text
		}
		if p.MaxTokens > 0 {
			job.MaxTokens = p.MaxTokens
		}
	}
	if err := t.b.Enqueue(ctx, job); err != nil {
		kind := KindUnavailable
		switch {
		case ctx.Err() != nil:
			kind = endKind(parent)
		case errors.Is(err, ErrUnconfirmed):
			kind = KindUnconfirmed
		}
		if t.giveUp(seq, w, kind) {
			res.Err = kind
			return
		}
		// A result for it already came: the enqueue did go through.
		fill(res, <-w.ch)
		return
	}
	t.mu.Lock()
	t.stats.Enqueued++
	t.mu.Unlock()

	select {
	case o := <-w.ch:
		fill(res, o)
	case <-ctx.Done():
		kind := endKind(parent)
		if t.giveUp(seq, w, kind) {
			res.Err = kind
			return
		}
		fill(res, <-w.ch) // the result won the race
	}
}

// endKind is the kind of a job whose context ended: the end of the run when
// parent, Do's own context, ended; the job's timeout otherwise.
func endKind(parent context.Context) string {
	if parent.Err() != nil {
		return KindUnfinished
	}
	return KindTimeout
}

// giveUp removes seq's waiter and records kind for it, unless the reader
// has already handed it an outcome; it reports whether it did.
func (t *Target) giveUp(seq uint64, w *waiter, kind string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waiters[seq] != w {
		return false
	}
	delete(t.waiters, seq)
	t.settle(seq, kind)
	return true
}

// settle records a job reported without a result; t.mu must be held.
func (t *Target) settle(seq uint64, kind string) {
	t.settled.add(seq)
	switch kind {
	case KindUnfinished:
		t.stats.Unfinished++
	case KindUnavailable:
		t.stats.Unavailable++
	case KindTimeout:
		t.stats.Timeouts++
	case KindUnconfirmed:
		t.stats.Unconfirmed++
	}
}

func fill(res *tare.Result, o outcome) {
	if o.kind != "" {
		res.Err = o.kind
		return
	}
	r := o.res
	res.Started = r.Start
	res.FirstByte = r.FirstToken
	res.Done = r.Done
	// worker clock → broker clock → generator clock, unless the shift is
	// no larger than the measurements' error (clockError: a 1.1 ms shift
	// made a job of a worker on this host start before it was enqueued).
	if shift := r.ClockOffset - o.localOffset; r.ClockOffset != 0 && shift.Abs() > clockError(o.localRTT) {
		res.Started = r.Start.Add(shift)
		if !r.FirstToken.IsZero() {
			res.FirstByte = r.FirstToken.Add(shift)
		}
		res.Done = r.Done.Add(shift)
	}
	res.Worker = r.Worker
	res.Deliveries = r.Deliveries
	res.OutputTokens = r.TokensOut
	res.TokenSource = r.TokenSource
	if r.TokensIn > 0 {
		res.PromptTokens, res.PromptTokenSource = r.TokensIn, "worker"
	}
	if !r.OK() {
		res.Err = r.Error
		if res.Err == "" {
			res.Err = StatusError
		}
	}
}

// clockError is how far a worker's stamps moved onto this clock can be
// off: each side's offset is off by up to its round trip, and the
// worker's round trip is not reported, so it is taken as ours (rtt), and
// never below 2 ms (both sides of a worker on this host measured a
// loaded machine's ms-long round trips).
func clockError(rtt time.Duration) time.Duration {
	return max(2*rtt, 2*time.Millisecond)
}

// Backoff bounds of the reader after a failed read.
const (
	minReadBackoff = 50 * time.Millisecond
	maxReadBackoff = time.Second
)

// read is the reader goroutine: it reads results until ctx ends and
// dispatches them.
func (t *Target) read(ctx context.Context) {
	defer close(t.done)
	if off, rtt, err := ClockOffset(ctx, t.b, time.Now, 3); err == nil {
		t.mu.Lock()
		t.offset, t.rtt = off, rtt
		t.mu.Unlock()
	}
	cursor := ""
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		results, next, err := t.b.Results(ctx, cursor, 512, t.poll)
		switch {
		case errors.Is(err, ErrLost):
			t.lose()
			cursor, backoff = "", 0
			continue
		case errors.Is(err, ErrClosed) || ctx.Err() != nil:
			return
		case err != nil:
			t.mu.Lock()
			t.stats.ReadErrors++
			t.mu.Unlock()
			backoff = min(max(2*backoff, minReadBackoff), maxReadBackoff)
			tare.Sleep(ctx, backoff)
			continue
		}
		cursor, backoff = next, 0
		received := time.Now()
		for _, r := range results {
			t.dispatch(r, received)
		}
	}
}

// dispatch hands r to the Do call waiting for its job.
func (t *Target) dispatch(r Result, received time.Time) {
	seq, err := strconv.ParseUint(r.ID, 10, 64)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case r.RunID != t.runID:
		t.stats.Foreign++
		return
	case err != nil:
		t.stats.Unknown++ // this run's, but no job of it has such an id
		return
	}
	w, ok := t.waiters[seq]
	switch {
	case ok:
		delete(t.waiters, seq)
		t.matched.add(seq)
		t.stats.Matched++
		if r.Deliveries > 1 {
			t.stats.Redelivered++
		}
		// Stamps compared by wall clock: the worker's carry no monotonic
		// reading.
		o := outcome{res: r, localOffset: t.offset, localRTT: t.rtt}
		var check tare.Result
		fill(&check, o)
		// A framework that does not say when a job started leaves Started
		// zero: no stamp to judge.
		// Within the offsets' own error of the interval, the clocks
		// agree as well as they can be measured to.
		tol := clockError(t.rtt)
		early := !check.Started.IsZero() && check.Started.Before(w.sent.Round(0).Add(-tol))
		if early || check.Done.After(received.Round(0).Add(tol)) {
			t.stats.Skewed++
		}
		w.ch <- o
	case t.matched.has(seq):
		t.stats.Duplicates++
	case t.settled.has(seq):
		t.stats.Late++
	default:
		t.stats.Unknown++
	}
}

// lose fails every waiting job: the queue's state, their jobs included, is
// gone.
func (t *Target) lose() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.Lost++
	for seq, w := range t.waiters {
		delete(t.waiters, seq)
		t.settle(seq, KindUnavailable)
		w.ch <- outcome{kind: KindUnavailable}
	}
}

// Close stops the reader and records every job still waiting as
// unfinished. It does not close the broker.
func (t *Target) Close() error {
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for seq, w := range t.waiters {
		delete(t.waiters, seq)
		t.settle(seq, KindUnfinished)
		w.ch <- outcome{kind: KindUnfinished}
	}
	return nil
}

// seqSet is a set of job sequence numbers. The load engine hands them out
// densely from 0, so a bit set holds them (a million jobs take 125 KiB);
// numbers beyond denseLimit, which only another caller would use, go to a
// map instead of growing the bit set without bound.
type seqSet struct {
	bits   []uint64
	sparse map[uint64]bool
}

const denseLimit = 1 << 27 // 16 MiB of bits at most

func (s *seqSet) add(n uint64) {
	if n >= denseLimit {
		if s.sparse == nil {
			s.sparse = map[uint64]bool{}
		}
		s.sparse[n] = true
		return
	}
	i := int(n / 64)
	if i >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, i+1-len(s.bits))...)
	}
	s.bits[i] |= 1 << (n % 64)
}

func (s *seqSet) has(n uint64) bool {
	if n >= denseLimit {
		return s.sparse[n]
	}
	i := int(n / 64)
	return i < len(s.bits) && s.bits[i]&(1<<(n%64)) != 0
}
