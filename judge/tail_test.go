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
	for _, tt := range []struct {
		name  string
		tail  *tare.Tail
		fired bool
		want  []string
	}{
		{"a niced batch job moved the p99", newTail(1e-6, 0.95), true,
			[]string{"the p99 tail: 31 of 36 requests overlapped waits behind `nightly-batch` (pids 812, 813), 2.10ms each on average", "requests with no outside wait: p99 0.90ms", "would have been 0.95ms rather than 2.80ms"}},
		{"overlapped no more than chance", newTail(0.3, 0.95), false, []string{"no outside wait moved the tail"}},
		{"moved the p99 too little", newTail(1e-6, 2.5), false, []string{"too little to change"}},
		{"no probe", nil, false, []string{"the scheduler probe did not measure the waits"}},
		{"the code's own spikes", func() *tare.Tail { tl := newTail(0.9, 2.7); tl.Slowest[0].Overlapped = 1; return tl }(), true,
			[]string{"the p99 (2.80ms) is", "the code's own spikes"}},
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
			if tt.fired {
				v := Judge(s, nil, DefaultThresholds(), nil)
				if v.Level != tare.Polluted || !strings.Contains(strings.Join(v.Advice, " "), "Stop `nightly-batch` (pids 812, 813)") {
					t.Errorf("verdict %s, advice %q; want polluted, naming the batch job", v.Level, v.Advice)
				}
			}
		})
	}
}
