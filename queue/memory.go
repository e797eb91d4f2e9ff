package queue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryConfig tunes a Memory broker; its zero value means the defaults.
type MemoryConfig struct {
	Queue      string           // the queue's name, for key names and messages; default "tare"
	MaxResults int              // results kept for readers; default DefaultMaxResults
	Now        func() time.Time // the broker's clock; default time.Now
}

// Memory is an in-process Broker with the semantics of the Redis one:
// delivery to one consumer at a time, pending until completed, claim after
// idle with delivery counts, depth, stop signal, registrations with a TTL.
// It backs `tare demo` when no Redis is given. It is safe for concurrent
// use.
type Memory struct {
	queue      string
	maxResults int
	now        func() time.Time

	mu      sync.Mutex // guards every field below
	closed  bool
	nextID  uint64
	waiting []*memEntry          // never delivered, in enqueue order
	pending map[string]*memEntry // delivered, not completed, by delivery id
	results []Result             // published results, oldest first
	base    int                  // absolute index of results[0]: earlier ones were trimmed
	stopped bool
	workers map[string]memWorker
	// gen counts cleanups; it is part of every results cursor, so a reader
	// holding a cursor from before a cleanup gets ErrLost, as from Redis.
	gen int
	// wake is closed and replaced whenever a job or a result arrives, so
	// blocked Fetch and Results calls look again.
	wake chan struct{}
}

type memEntry struct {
	id        string
	seq       uint64
	job       Job
	added     time.Time // broker clock
	consumer  string
	delivered time.Time // last delivery or touch, broker clock
	count     int
}

type memWorker struct {
	info    WorkerInfo
	expires time.Time
}

var _ Broker = (*Memory)(nil)

// NewMemory returns an empty in-memory queue.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		queue:      cfg.Queue,
		maxResults: cfg.MaxResults,
		now:        cfg.Now,
		pending:    map[string]*memEntry{},
		workers:    map[string]memWorker{},
		wake:       make(chan struct{}),
	}
	if m.queue == "" {
		m.queue = "tare"
	}
	if m.maxResults <= 0 {
		m.maxResults = DefaultMaxResults
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Queue returns the queue's name.
func (m *Memory) Queue() string { return m.queue }

// notify wakes blocked readers; m.mu must be held.
func (m *Memory) notify() {
	close(m.wake)
	m.wake = make(chan struct{})
}

// Enqueue adds a job at the tail.
func (m *Memory) Enqueue(ctx context.Context, job Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.nextID++
	m.waiting = append(m.waiting, &memEntry{
		id:    strconv.FormatUint(m.nextID, 10),
		seq:   m.nextID,
		job:   job,
		added: m.now(),
	})
	m.notify()
	return nil
}

// wait blocks until wake is closed, block passes or ctx ends, and reports
// whether to look again.
func wait(ctx context.Context, wake <-chan struct{}, deadline *time.Timer) bool {
	select {
	case <-wake:
		return true
	case <-deadline.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// Fetch delivers up to limit jobs never delivered before.
func (m *Memory) Fetch(ctx context.Context, consumer string, limit int, block time.Duration) ([]Delivery, error) {
	if err := validateConsumer(consumer); err != nil {
		return nil, err
	}
	limit = max(limit, 1)
	var timer *time.Timer
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if n := min(limit, len(m.waiting)); n > 0 {
			now := m.now()
			out := make([]Delivery, 0, n)
			for _, e := range m.waiting[:n] {
				e.consumer, e.delivered, e.count = consumer, now, 1
				m.pending[e.id] = e
				out = append(out, Delivery{ID: e.id, Job: e.job, Count: 1})
			}
			m.waiting = slices.Delete(m.waiting, 0, n)
			m.mu.Unlock()
			return out, nil
		}
		wake := m.wake
		m.mu.Unlock()
		if block <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		if timer == nil {
			timer = time.NewTimer(block)
			defer timer.Stop()
		}
		if !wait(ctx, wake, timer) {
			return nil, nil
		}
	}
}

// Claim takes over up to limit jobs idle for minIdle, oldest first.
func (m *Memory) Claim(ctx context.Context, consumer string, minIdle time.Duration, limit int) ([]Delivery, error) {
	if err := validateConsumer(consumer); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	now := m.now()
	var idle []*memEntry
	for _, e := range m.pending {
		if now.Sub(e.delivered) >= minIdle {
			idle = append(idle, e)
		}
	}
	slices.SortFunc(idle, func(a, b *memEntry) int { return cmp.Compare(a.seq, b.seq) })
	var out []Delivery
	for _, e := range idle[:min(limit, len(idle))] {
		e.consumer, e.delivered = consumer, now
		e.count++
		out = append(out, Delivery{ID: e.id, Job: e.job, Count: e.count})
	}
	return out, nil
}

// Touch resets the idle time of pending jobs, whoever holds them, as
// Redis's XCLAIM does.
func (m *Memory) Touch(ctx context.Context, consumer string, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	now := m.now()
	for _, id := range ids {
		if e, ok := m.pending[id]; ok {
			e.consumer, e.delivered = consumer, now
		}
	}
	return nil
}

// Complete acknowledges d and publishes res, if d is still pending.
func (m *Memory) Complete(ctx context.Context, d Delivery, res Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.pending[d.ID]; !ok {
		return fmt.Errorf("complete job %q (entry %s): %w", res.ID, d.ID, ErrNotPending)
	}
	delete(m.pending, d.ID)
	m.results = append(m.results, res)
	if over := len(m.results) - m.maxResults; over > 0 {
		m.results = slices.Delete(m.results, 0, over)
		m.base += over
	}
	m.notify()
	return nil
}

// Ack acknowledges deliveries without a result.
func (m *Memory) Ack(ctx context.Context, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, id := range ids {
		delete(m.pending, id)
	}
	return nil
}

// Results returns results after cursor, "<generation>-<absolute index>".
func (m *Memory) Results(ctx context.Context, cursor string, limit int, block time.Duration) ([]Result, string, error) {
	gen, from := -1, 0
	if cursor != "" {
		g, i, ok := strings.Cut(cursor, "-")
		var err1, err2 error
		gen, err1 = strconv.Atoi(g)
		from, err2 = strconv.Atoi(i)
		if !ok || err1 != nil || err2 != nil || gen < 0 || from < 0 {
			return nil, cursor, fmt.Errorf("results cursor %q: want \"\" or a cursor Results returned", cursor)
		}
	}
	limit = max(limit, 1)
	var timer *time.Timer
	for {
		m.mu.Lock()
		switch {
		case m.closed:
			m.mu.Unlock()
			return nil, cursor, ErrClosed
		case gen >= 0 && gen != m.gen:
			m.mu.Unlock()
			return nil, "", fmt.Errorf("read results of queue %q: %w (cleaned up)", m.queue, ErrLost)
		}
		i := max(from-m.base, 0) // results trimmed away are skipped
		if i < len(m.results) {
			out := slices.Clone(m.results[i:min(len(m.results), i+limit)])
			next := fmt.Sprintf("%d-%d", m.gen, m.base+i+len(out))
			m.mu.Unlock()
			return out, next, nil
		}
		wake, next := m.wake, fmt.Sprintf("%d-%d", m.gen, m.base+i)
		m.mu.Unlock()
		// A first call returns at once with a cursor that carries the
		// generation, so a cleanup that follows is seen as a loss.
		if block <= 0 || ctx.Err() != nil || gen < 0 {
			return nil, next, nil
		}
		if timer == nil {
			timer = time.NewTimer(block)
			defer timer.Stop()
		}
		if !wait(ctx, wake, timer) {
			return nil, next, nil
		}
	}
}

// Time is the broker's clock.
func (m *Memory) Time(ctx context.Context) (time.Time, error) { return m.now(), nil }

// Depth returns the backlog now.
func (m *Memory) Depth(ctx context.Context) (Depth, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Depth{}, ErrClosed
	}
	d := Depth{Waiting: int64(len(m.waiting)), Pending: int64(len(m.pending))}
	var oldest time.Time
	for _, e := range m.pending {
		if oldest.IsZero() || e.added.Before(oldest) {
			oldest = e.added
		}
	}
	if !oldest.IsZero() {
		d.OldestPending = max(m.now().Sub(oldest), 0)
	}
	return d, nil
}

// Stop raises the stop signal.
func (m *Memory) Stop(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.stopped = true
	return nil
}

// Stopped reports whether Stop was called.
func (m *Memory) Stopped(ctx context.Context) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	return m.stopped, nil
}

// Register records or refreshes a worker for ttl.
func (m *Memory) Register(ctx context.Context, w WorkerInfo, ttl time.Duration) error {
	if err := validateConsumer(w.Name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.workers[w.Name] = memWorker{info: w, expires: m.now().Add(ttl)}
	return nil
}

// Unregister forgets a worker.
func (m *Memory) Unregister(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.workers, name)
	return nil
}

// Workers lists the workers whose registration has not expired.
func (m *Memory) Workers(ctx context.Context) ([]WorkerInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	now := m.now()
	var out []WorkerInfo
	for name, w := range m.workers {
		if !now.Before(w.expires) {
			delete(m.workers, name)
			continue
		}
		out = append(out, w.info)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Cleanup empties the queue and returns the names the same state has in
// Redis.
func (m *Memory) Cleanup(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	p := KeyPrefix(m.queue)
	var keys []string
	if m.nextID > 0 {
		keys = append(keys, p+keyJobs)
	}
	if len(m.results)+m.base > 0 {
		keys = append(keys, p+keyResults)
	}
	if m.stopped {
		keys = append(keys, p+keyStop)
	}
	for name := range m.workers {
		keys = append(keys, p+keyWorker+name)
	}
	slices.Sort(keys)
	m.nextID, m.waiting, m.pending = 0, nil, map[string]*memEntry{}
	m.results, m.base = nil, 0
	m.gen++
	m.stopped = false
	m.workers = map[string]memWorker{}
	m.notify() // blocked readers look again and see the loss
	return keys, nil
}

// Close makes every later call fail with ErrClosed and wakes blocked ones.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.notify()
	}
	return nil
}
