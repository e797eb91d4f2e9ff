package stats

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// FuzzRecorder feeds arbitrary streams of results, host samples and depth
// samples, with instants before the start, far beyond the timeline and out
// of order, and checks that nothing panics and the counts stay consistent.
//
// Each event is 8 bytes: kind, then three little-endian int16 offsets in
// units of 10 ms, then a flag byte.
func FuzzRecorder(f *testing.F) {
	f.Add([]byte{0, 10, 0, 1, 0, 5, 0, 0, 1, 0, 0, 100, 0, 5, 0, 40})
	f.Add([]byte{0, 0xff, 0xff, 0, 0x80, 0xff, 0x7f, 3, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{2, 5, 0, 0, 0, 0, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewRecorder(Config{Start: t0, Tick: 100 * time.Millisecond, MaxTicks: 300})
		if err != nil {
			t.Fatal(err)
		}
		off := func(b []byte) time.Duration {
			return time.Duration(int16(binary.LittleEndian.Uint16(b))) * 10 * time.Millisecond
		}
		fed := 0
		for ; len(data) >= 8; data = data[8:] {
			a, b, c, flag := off(data[1:]), off(data[3:]), off(data[5:]), data[7]
			switch data[0] % 4 {
			case 0:
				res := &tare.Result{Scheduled: t0.Add(a), Dropped: flag&1 != 0}
				if !res.Dropped {
					res.Sent = res.Scheduled.Add(b)
					res.Done = res.Sent.Add(c)
					if flag&2 != 0 {
						res.Err = "timeout"
					}
					if flag&4 != 0 {
						res.Started = res.Sent
					}
					if flag&8 != 0 {
						res.FirstByte = res.Sent.Add(c / 2)
						res.OutputTokens = int(flag >> 4)
					}
					if flag&16 != 0 {
						res.Done = time.Time{}
					}
				}
				r.AddResult(res)
				fed++
			case 1:
				h := sample(0, 0, float64(flag%101))
				h.Start, h.End = t0.Add(a), t0.Add(a+b)
				if flag&1 != 0 {
					h.PSISome = tare.Float(float64(flag % 50))
				}
				r.AddHost(h)
			case 2:
				r.AddDepth(t0.Add(a), float64(int8(flag)))
			case 3:
				r.Summary(t0.Add(a), b)
				r.Ticks()
			}
		}

		s := r.Summary(t0.Add(time.Minute), time.Minute)
		q := s.Requests
		if q.Total != fed || q.OK+q.Errors+q.Dropped != q.Total {
			t.Fatalf("Requests = %+v, want %d that add up", q, fed)
		}
		ticks := r.Ticks()
		if len(ticks) > 300 {
			t.Fatalf("%d ticks, want at most MaxTicks 300", len(ticks))
		}
		var arrivals, completions, errs, dropped int
		for i, tk := range ticks {
			arrivals += tk.Arrivals
			completions += tk.Completions
			errs += tk.Errors
			dropped += tk.Dropped
			if tk.InFlight < 0 {
				t.Fatalf("tick %d InFlight = %d, want ≥ 0", i, tk.InFlight)
			}
		}
		if arrivals != q.Total || completions != q.OK+q.Errors || errs != q.Errors || dropped != q.Dropped {
			t.Fatalf("ticks add up to %d arrivals, %d completions, %d errors, %d dropped; want %+v", arrivals, completions, errs, dropped, q)
		}
		if n := len(ticks); n > 0 && ticks[n-1].InFlight != 0 {
			t.Fatalf("last tick InFlight = %d, want 0: every request fed has finished", ticks[n-1].InFlight)
		}
		if l := s.Latency; l.P50 != nil && !(*l.P50 <= *l.P95 && *l.P95 <= *l.P99 && *l.P99 <= *l.Max) {
			t.Fatalf("latency percentiles out of order: %g %g %g max %g", *l.P50, *l.P95, *l.P99, *l.Max)
		}
		if c := s.CleanLatency; c != nil && c.Requests > int(r.latency.n) {
			t.Fatalf("clean requests %d exceed the %d latencies", c.Requests, r.latency.n)
		}
		Attribute(ticks)
	})
}
