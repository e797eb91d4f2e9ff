package peer

import (
	"fmt"
	"slices"
	"time"
)

// bucket is the resolution of the stall finder.
const bucket = 10 * time.Millisecond

// Stall is the longest stretch in which a tool sent nothing while some of
// its requests were in flight: its workers were all waiting (a closed loop,
// or an open loop out of workers) instead of sending on schedule.
type Stall struct {
	At       time.Time     // where it began
	Length   time.Duration // its length, to 10 ms
	InFlight int           // requests in flight all through it, at least
	// Significant: long enough not to be a gap between arrivals: at least
	// 200 ms and 20 mean intervals between sends.
	Significant bool
}

func (s Stall) describe(tool string) string {
	return fmt.Sprintf("%s sent nothing for %s from %s while %d requests were in flight (its workers were all waiting)",
		tool, s.Length, s.At.UTC().Format("15:04:05.00"), s.InFlight)
}

// stallFinder counts sends and completions per 10 ms bucket. Results come
// in any order (vegeta writes them as they complete), so a difference map
// (+1 at the send, −1 at the completion) is kept and summed at the end: the
// in-flight count of each bucket. Its size is bounded by the buckets that
// saw an event, two per result at most.
type stallFinder struct {
	sends, flight map[int64]int32
	n             int
	first, last   time.Time
}

func (s *stallFinder) add(sent, done time.Time) {
	if sent.IsZero() {
		return
	}
	if s.sends == nil {
		s.sends, s.flight = map[int64]int32{}, map[int64]int32{}
	}
	b, e := sent.UnixNano()/int64(bucket), done.UnixNano()/int64(bucket)
	s.sends[b]++
	// In flight during the buckets strictly after the send's and before
	// the completion's: those it spanned whole.
	if e > b+1 {
		s.flight[b+1]++
		s.flight[e]--
	}
	if s.n == 0 || sent.Before(s.first) {
		s.first = sent
	}
	if s.n == 0 || sent.After(s.last) {
		s.last = sent
	}
	s.n++
}

func (s *stallFinder) longest() Stall {
	if s.n < 2 {
		return Stall{}
	}
	lo, hi := s.first.UnixNano()/int64(bucket), s.last.UnixNano()/int64(bucket)
	// Between two buckets that saw an event nothing changes: walk the
	// events, not the buckets, so a bogus timestamp years away costs nothing.
	keys := make([]int64, 0, len(s.flight)+len(s.sends))
	for k := range s.flight {
		keys = append(keys, k)
	}
	for k := range s.sends {
		if _, ok := s.flight[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var (
		best     Stall
		flight   int32
		runStart int64 = -1
		runMin   int32
	)
	flush := func(end int64) {
		if runStart < 0 {
			return
		}
		if l := time.Duration(end-runStart) * bucket; l > best.Length {
			best = Stall{At: time.Unix(0, runStart*int64(bucket)), Length: l, InFlight: int(runMin)}
		}
		runStart = -1
	}
	extend := func(from int64) {
		if runStart < 0 {
			runStart, runMin = from, flight
		}
		runMin = min(runMin, flight)
	}
	for i, k := range keys {
		flight += s.flight[k]
		if k < lo {
			continue
		}
		if k > hi {
			break
		}
		if s.sends[k] > 0 || flight <= 0 {
			flush(k)
		} else {
			extend(k)
		}
		next := hi + 1
		if i+1 < len(keys) && keys[i+1] < next {
			next = keys[i+1]
		}
		if next > k+1 { // buckets k+1 … next−1: no event, no send
			if flight > 0 {
				extend(k + 1)
			} else {
				flush(k + 1)
			}
		}
	}
	flush(hi + 1)
	mean := s.last.Sub(s.first) / time.Duration(s.n-1)
	best.Significant = best.Length >= 200*time.Millisecond && best.Length >= 20*mean
	return best
}
