package schedprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Stretch is one charge of the probe passed on as it was made (Options.
// Stretches): the waiters of Group waited on CPU from Start to End behind
// Holder, Waited in all (k threads waiting all of it wait k times it).
// Start is the mean waiter's arrival (exact for one waiter, the usual
// case), or the switch before End if later.
type Stretch struct {
	Start, End time.Duration // on the kernel's CLOCK_MONOTONIC (Monotonic)
	CPU        int
	Group      int // the waiters'
	Waited     time.Duration
	// Holder is who held the CPU. Its Comm is empty: the charge of the
	// same holder (Counts.Charges) names it.
	Holder Holder
}

// stretchSize is the size of bpf/probe.bpf.c's struct stretch.
const stretchSize = 40

// maxStretches bounds the stretches kept for a consumer that does not
// call Stretches (about 5 MB); past it they are counted as lost.
const maxStretches = 1 << 16

// flushWait is how long Stretches waits for the reader to drain the ring
// buffer: a reader kept off its CPU longer leaves the rest for the next
// call. A few microseconds as a rule; on a host with 25 threads runnable
// per CPU, a woken thread waited up to a hundred milliseconds.
const flushWait = 250 * time.Millisecond

// Monotonic is the clock of Stretch's times: CLOCK_MONOTONIC, which the
// program reads (bpf_ktime_get_ns).
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("read CLOCK_MONOTONIC: %v", err)) // cannot fail on Linux
	}
	return time.Duration(ts.Nano())
}

// stretchReader drains the ring buffer into got, in its own goroutine.
type stretchReader struct {
	rd      *ringbuf.Reader
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	flushed chan struct{} // a flush was answered

	mu       sync.Mutex
	got      []Stretch
	spare    []Stretch // what take handed over the time before: got's next array
	dropped  uint64    // past maxStretches
	asked    uint64    // flushes asked for
	answered uint64    // the last flush answered
	err      error     // why run stopped early
}

func startStretches(rd *ringbuf.Reader) *stretchReader {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stretchReader{rd: rd, cancel: cancel, done: make(chan struct{}), flushed: make(chan struct{}, 1)}
	go s.run(ctx)
	return s
}

// run reads until the reader is closed. The program wakes it only when a
// quarter of the ring is in use; Stretches flushes it to drain the rest.
func (s *stretchReader) run(ctx context.Context) {
	defer close(s.done)
	var rec ringbuf.Record
	for ctx.Err() == nil {
		err := s.rd.ReadInto(&rec)
		switch {
		case err == nil:
			s.keep(rec.RawSample)
		case errors.Is(err, ringbuf.ErrFlushed):
			s.mu.Lock()
			s.answered = s.asked
			s.mu.Unlock()
			select {
			case s.flushed <- struct{}{}:
			default:
			}
		case errors.Is(err, os.ErrClosed):
			return
		default:
			s.mu.Lock()
			s.err = fmt.Errorf("read the scheduler probe's stretches: %w", err)
			s.mu.Unlock()
			return
		}
	}
}

func (s *stretchReader) keep(raw []byte) {
	st, ok := decodeStretch(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || len(s.got) >= maxStretches {
		s.dropped++
		return
	}
	s.got = append(s.got, st)
}

// decodeStretch reads a struct stretch.
func decodeStretch(b []byte) (Stretch, bool) {
	if len(b) < stretchSize {
		return Stretch{}, false
	}
	e := binary.NativeEndian
	s := Stretch{
		Start:  time.Duration(e.Uint64(b[0:])),
		End:    time.Duration(e.Uint64(b[8:])),
		Waited: time.Duration(e.Uint64(b[16:])),
		CPU:    int(e.Uint32(b[28:])),
		Group:  int(b[32]),
		Holder: Holder{TGID: int(e.Uint32(b[24:])), Kind: Kind(b[33])},
	}
	if s.Holder.Kind == Watched {
		s.Holder.Group = int(b[34])
	}
	return s, true
}

// take drains the ring buffer (waiting up to flushWait for the reader)
// and hands over what was read, with how many were dropped.
func (s *stretchReader) take() ([]Stretch, uint64, error) {
	s.mu.Lock()
	s.asked++
	want := s.asked
	s.mu.Unlock()
	if err := s.rd.Flush(); err != nil {
		return nil, 0, fmt.Errorf("drain the scheduler probe's stretches: %w", err)
	}
	timeout := time.NewTimer(flushWait)
	defer timeout.Stop()
wait:
	for {
		s.mu.Lock()
		answered := s.answered >= want
		s.mu.Unlock()
		if answered {
			break
		}
		select {
		case <-s.flushed:
		case <-s.done:
			break wait
		case <-timeout.C:
			break wait
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, dropped, err := s.got, s.dropped, s.err
	// Two arrays in turn: the caller is done with what it took the time
	// before, and a tick's stretches are appended without growing one
	// anew (at 2,000 requests/s, most of what tare allocated).
	s.got, s.spare, s.dropped, s.err = s.spare[:0], got, 0, nil
	return got, dropped, err
}

// stop ends run and waits for it.
func (s *stretchReader) stop() error {
	s.cancel()
	err := s.rd.Close()
	<-s.done
	return err
}

// Stretches hands over the stretches read since the last call (Options.
// Stretches; none without), in the order read, and how many were lost
// meanwhile: refused by the full ring buffer, or past what is kept for a
// caller that does not call (about 65,000). It drains the ring buffer
// first, so every stretch that ended before the call is there, unless the
// reader was kept off its CPU for flushWait (250 ms). The slice is the
// caller's until the next call, which reuses its array.
func (p *Probe) Stretches() ([]Stretch, uint64, error) {
	if p.stretches == nil {
		return nil, 0, nil
	}
	got, lost, err := p.stretches.take()
	var perCPU []uint64
	if lerr := p.objs.Counters.Lookup(uint32(lostStretches), &perCPU); lerr != nil {
		return got, lost, errors.Join(err, fmt.Errorf("read the scheduler probe's lost stretches: %w", lerr))
	}
	var refused uint64
	for _, v := range perCPU {
		refused += v
	}
	lost += refused - p.refused
	p.refused = refused
	return got, lost, err
}
