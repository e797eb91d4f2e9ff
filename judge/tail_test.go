package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestTail(t *testing.T) {
	batch := tare.TailOwner{Owner: tare.OwnerOther, Name: "nightly-batch", PIDs: []int{812, 813}, Root: 812, Requests: 31, WaitMS: 2.1}
	newTail := func(p1, unwaitedP99 float64) *tare.Tail {
		return &tare.Tail{
			Requests: 3600, Overlapped: 400,
			Quiet:    tare.PercentilesMS{P50: tare.Float(0.5), P95: tare.Float(0.8), P99: tare.Float(0.9)},
			Unwaited: tare.PercentilesMS{P50: tare.Float(0.5), P95: tare.Float(0.8), P99: tare.Float(unwaitedP99)},
			Sampled:  3600,
			Slowest: []tare.TailSlice{
				{Pct: 1, Requests: 36, Overlapped: 31, WaitMS: tare.Float(2.1), Behind: []tare.TailOwner{batch}, P: p1},
				{Pct: 5, Requests: 180, Overlapped: 40, WaitMS: tare.Float(1), Behind: []tare.TailOwner{batch}, P: 0.2},
			},
		}
	}
	summary := func(tl *tare.Tail) *tare.Summary {
		return &tare.Summary{Tail: tl, Latency: tare.LatencyMS{P50: tare.Float(0.5), P95: tare.Float(0.85), P99: tare.Float(2.8)}}
	}
	// A burst of steal in one tick: 21 of the slowest 36 lived in it, a
	// tenth of the run's requests did, and 87 ms were taken from one CPU.
	stolen := func(stealMS float64) *tare.Tail {
		tl := newTail(0.9, 2.7)
		tl.Slowest[0].Overlapped = 1
		tl.Stolen, tl.Unstolen = 360, tare.PercentilesMS{P50: tare.Float(0.5), P95: tare.Float(0.8), P99: tare.Float(1.4)}
		tl.Slowest[0].Stolen, tl.Slowest[0].StolenP, tl.Slowest[0].StealMS = 21, 1e-12, tare.Float(stealMS)
		tl.Slowest[1].StolenP = 1
		return tl
	}
	// A hog that started mid-run: 30 of the slowest 36 lived in the ticks
	// it ran in, two thirds of the run's requests did, and the service
	// hardly waited behind it.
	resize := tare.TailOwner{Owner: tare.OwnerOther, Name: "image-resize", PIDs: []int{901}, Root: 901, Requests: 30}
	crowded := func(p float64) *tare.Tail {
		tl := newTail(0.9, 2.7)
		tl.Slowest[0].Overlapped = 1
		tl.Crowded, tl.Uncrowded = 2400, tare.PercentilesMS{P50: tare.Float(0.5), P95: tare.Float(0.8), P99: tare.Float(1.2)}
		tl.Slowest[0].Crowded, tl.Slowest[0].CrowdedP, tl.Slowest[0].CrowdedBy = 30, p, []tare.TailOwner{resize}
		tl.Slowest[1].CrowdedP = 1
		return tl
	}
	const stopBatch, stealAdvice = "Stop `nightly-batch` (pids 812, 813)", "The hypervisor took the CPU from the slowest requests"
	for _, tt := range []struct {
		name   string
		tail   *tare.Tail
		fired  bool
		want   []string
		advice string // of a fired signal that is not a finding
	}{
		{"a niced batch job moved the p99", newTail(1e-6, 0.95), true,
			[]string{"the p99 tail: 31 of 36 requests overlapped waits behind `nightly-batch` (pids 812, 813), 2.10ms each on average", "requests with no outside wait: p99 0.90ms", "would have been 0.95ms rather than 2.80ms"}, stopBatch},
		{"overlapped no more than chance", newTail(0.3, 0.95), false, []string{"no outside wait moved the tail"}, ""},
		// A neighbour crowding the service all run long: most requests
		// overlapped some wait, the slowest no more often, but for more
		// of their lives.
		{"overlapped as often, for more of their lives", func() *tare.Tail {
			tl := newTail(0.3, 0.95)
			tl.Slowest[0].ShareP = tare.Float(1e-5)
			return tl
		}(), true, []string{"not more often than chance gives requests drawn at random (p = 0.3), but for more of their lives", "Mann-Whitney, p < 0.0001", "would have been 0.95ms rather than 2.80ms"}, stopBatch},
		{"overlapped as often, for no more of their lives", func() *tare.Tail {
			tl := newTail(0.3, 0.95)
			tl.Slowest[0].ShareP = tare.Float(0.4)
			return tl
		}(), false, []string{"(p = 0.3; by the share of their latency they waited, p = 0.4, threshold 0.01): no outside wait moved the tail"}, ""},
		{"moved the p99 too little", newTail(1e-6, 2.5), false, []string{"too little to change"}, ""},
		// The run's p99 (2.8 ms) counts the slow requests of a tick the
		// probe did not measure whole; those it did, slowest 1.1 ms,
		// were moved too little by their waits.
		{"the slow requests were of a tick not measured", func() *tare.Tail {
			tl := newTail(1e-6, 0.95)
			tl.Measured = &tare.PercentilesMS{P50: tare.Float(0.5), P95: tare.Float(0.8), P99: tare.Float(1.1)}
			return tl
		}(), false, []string{"would have been 0.95ms rather than 1.10ms (×1.16", "too little to change"}, ""},
		{"no probe", nil, false, []string{"the scheduler probe did not measure the waits"}, ""},
		{"the code's own spikes", func() *tare.Tail { tl := newTail(0.9, 2.7); tl.Slowest[0].Overlapped = 1; return tl }(), true,
			[]string{"the p99 (2.80ms) is", "the code's own spikes"}, ""},
		{"a burst of steal moved the p99", stolen(87), true,
			[]string{"the p99 tail: 21 of 36 requests lived in ticks in which the hypervisor took a CPU away", "up to 87.0ms from one CPU", "the p99 was 1.40ms rather than 2.80ms (×2.00"}, stealAdvice},
		// 0.5 ms taken cannot make a 2.8 ms p99 of a 0.5 ms p50: the
		// slowest lived in those ticks, yet the spikes are the code's.
		// (Requests of one tick share its fate, so "more than chance" on
		// requests overstates how unlikely a tick's slow ones are: it
		// does not overrule the finding unless the ticks moved the tail.)
		{"steal too short to hold the tail up", stolen(0.5), true, []string{"the code's own spikes"}, ""},
		{"a hog that started mid-run moved the p99", crowded(1e-6), true,
			[]string{"the p99 tail: 30 of 36 requests lived in ticks in which other processes used 25% of a CPU or more, busiest `image-resize` (pid 901)", "the p99 was 1.20ms rather than 2.80ms (×2.33"}, "Stop `image-resize` (pid 901)"},
		{"crowded ticks no slower than chance makes them", crowded(0.2), true, []string{"the code's own spikes"}, ""},
		// A hog keeping both vCPUs busy drew the hypervisor's steal: the
		// tail names the hog, not only the steal.
		{"a hog and the steal it drew", func() *tare.Tail {
			tl := crowded(1e-6)
			st := stolen(87)
			tl.Stolen, tl.Unstolen = st.Stolen, st.Unstolen
			tl.Slowest[0].Stolen, tl.Slowest[0].StolenP, tl.Slowest[0].StealMS = 21, 1e-12, tare.Float(87)
			return tl
		}(), true, []string{"the hypervisor took a CPU away", "; and, in the same run, the p99 tail: 30 of 36 requests lived in ticks in which other processes used 25% of a CPU or more, busiest `image-resize` (pid 901)"},
			"Stop `image-resize` (pid 901)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := summary(tt.tail)
			sig := tail(s, DefaultThresholds())
			if sig.Fired != tt.fired {
				t.Errorf("fired = %v, want %v: %s", sig.Fired, tt.fired, sig.Detail)
			}
			for _, w := range tt.want {
				if !strings.Contains(sig.Detail, w) {
					t.Errorf("detail %q does not say %q", sig.Detail, w)
				}
			}
			if sig.Finding {
				if v := Judge(s, nil, DefaultThresholds(), nil); v.Level != tare.Clean {
					t.Errorf("level %s on a finding, want clean", v.Level)
				}
				return
			}
			if strings.Contains(sig.Detail, "code's own") != strings.Contains(tt.want[0], "code's own") {
				t.Errorf("detail %q: the code's own spikes said where they should not be, or not where they should", sig.Detail)
			}
			if tt.fired {
				v := Judge(s, nil, DefaultThresholds(), nil)
				if v.Level != tare.Polluted || !strings.Contains(strings.Join(v.Advice, " "), tt.advice) {
					t.Errorf("verdict %s, advice %q; want polluted, advising %q", v.Level, v.Advice, tt.advice)
				}
			}
		})
	}
}
