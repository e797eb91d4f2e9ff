package queue

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// PendingJob is one job of a framework queue that has no final state yet.
type PendingJob struct {
	Job     Job
	Started time.Time // when the framework said it started; zero until then
	Exact   bool      // Started is the worker's own stamp, not when tare heard of the start
	Worker  string
	// Deliveries is how many times a worker started the job, when the
	// framework says (BullMQ's attemptsStarted); 0 counts as 1.
	Deliveries int
}

// PendingJobs are a framework queue's jobs waiting for their final state,
// by framework id, and the results found for them, until Results hands
// them to the Target.
type PendingJobs struct {
	mu     sync.Mutex // guards jobs and done
	jobs   map[string]*PendingJob
	done   []Result
	notify chan struct{} // a result was added to done; buffered 1
}

// NewPendingJobs returns an empty PendingJobs.
func NewPendingJobs() *PendingJobs {
	return &PendingJobs{jobs: map[string]*PendingJob{}, notify: make(chan struct{}, 1)}
}

// Add makes job j, framework id id, pending.
func (p *PendingJobs) Add(id string, j Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs[id] = &PendingJob{Job: j}
}

// Remove forgets a job that was never enqueued.
func (p *PendingJobs) Remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.jobs, id)
}

// IDs returns the framework ids of the pending jobs.
func (p *PendingJobs) IDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.jobs))
}

// Has reports whether job id is pending.
func (p *PendingJobs) Has(id string) bool {
	return p.Update(id, func(*PendingJob) {})
}

// Update calls f with job id, under the lock that guards it, when it is
// pending, and reports whether it was: for an adapter that corrects a
// job's stamps by what only it knows (BullMQ's attempts, for one).
func (p *PendingJobs) Update(id string, f func(j *PendingJob)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if ok {
		f(j)
	}
	return ok
}

// Start records that job id started at t on worker, unless a start is
// known already; exact says t is the worker's own stamp, which replaces
// one that is not.
func (p *PendingJobs) Start(id string, t time.Time, worker string, exact bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if j, ok := p.jobs[id]; ok && (j.Started.IsZero() || exact && !j.Exact) {
		j.Started, j.Worker, j.Exact = t, worker, exact
	}
}

// OlderThan reports whether job id, pending, was enqueued age or more
// before now.
func (p *PendingJobs) OlderThan(id string, age time.Duration, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	return ok && now.Sub(j.Job.Enqueued) >= age
}

// Finish turns job id into a result (done at done, failed with kind, or
// ok when kind is ""), once: a second final state of the same job is
// dropped.
func (p *PendingJobs) Finish(id string, done time.Time, worker, kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if !ok {
		return
	}
	delete(p.jobs, id)
	if worker == "" {
		worker = j.Worker
	}
	r := Result{ID: j.Job.ID, RunID: j.Job.RunID, Worker: worker, Start: j.Started, Done: done, Status: StatusOK, Deliveries: max(1, j.Deliveries)}
	if kind != "" {
		r.Status, r.Error = StatusError, kind
	}
	if r.Done.IsZero() {
		r.Done = time.Now()
	}
	if !j.Exact && r.Start.After(r.Done) {
		// tare heard of the start after the worker had finished (the
		// generator was slow to read): the start was no later than that.
		r.Start = r.Done
	}
	p.done = append(p.done, r)
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Take returns up to limit results found, waiting up to block for one.
func (p *PendingJobs) Take(ctx context.Context, limit int, block time.Duration) []Result {
	deadline := time.NewTimer(max(block, 0))
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if n := min(len(p.done), max(limit, 1)); n > 0 {
			out := append([]Result(nil), p.done[:n]...)
			p.done = p.done[n:]
			p.mu.Unlock()
			return out
		}
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Lose forgets every pending job: the queue's state, theirs included, is
// gone, and the Target fails them all.
func (p *PendingJobs) Lose() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.jobs)
}

// OldestStarted is the age of the oldest job that started and has not
// finished, since its enqueue; and how many such jobs there are.
func (p *PendingJobs) OldestStarted(now time.Time) (time.Duration, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest time.Duration
	var n int64
	for _, j := range p.jobs {
		if j.Started.IsZero() {
			continue
		}
		n++
		oldest = max(oldest, now.Sub(j.Job.Enqueued))
	}
	return oldest, n
}
