package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestLateSendsUnderSteal: when the sends that were late fell in ticks
// whose steal exceeded its threshold, generator_starved names the steal as
// their cause and advises a quiet host, not more CPU for tare (one tick of
// 11 at 11.8 % steal delayed one arrival by 15 ms: too few stolen ticks
// for the steal signal, which must not make tare the culprit).
func TestLateSendsUnderSteal(t *testing.T) {
	for _, tt := range []struct {
		name       string
		lateSteal  float64 // steal of the tick with the late send
		want       string  // in the generator's detail
		wantAdvice string
		notAdvice  string
	}{
		{"stolen", 11.8, "the hypervisor's steal made tare send late", "Rerun when the host is quiet", "Give tare its own CPU"},
		{"not stolen", 1, "tare itself could not send on time", "Give tare its own CPU", "Rerun when the host is quiet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			steal := []float64{1, 1, 1, 1, 1, tt.lateSteal, 1, 1, 1, 1, 1}
			s, ticks := run(steal)
			for i := range ticks {
				ticks[i].SendLagMax = 300 * time.Microsecond
			}
			ticks[5].SendLagMax = 15 * time.Millisecond
			s.SendLag.P99, s.Latency.P50 = tare.Float(15), tare.Float(20)
			v := Judge(s, ticks, DefaultThresholds(), nil)
			sig := find(t, v, SignalGenerator)
			if !sig.Fired || !strings.Contains(sig.Detail, tt.want) {
				t.Errorf("generator signal fired %v: %q; want it to say %q", sig.Fired, sig.Detail, tt.want)
			}
			if st := find(t, v, SignalSteal); st.Fired {
				t.Fatalf("the steal signal fired (%s): the case is one tick too few for it", st.Detail)
			}
			advice := strings.Join(v.Advice, "\n")
			if !strings.Contains(advice, tt.wantAdvice) || strings.Contains(advice, tt.notAdvice) {
				t.Errorf("advice %q: want %q, not %q", v.Advice, tt.wantAdvice, tt.notAdvice)
			}
		})
	}
}

// TestLateSendsMaterial: late sends make a verdict only where they are a
// visible part of the latency they add to: the p99 against the p99, the
// median against the median. One late send of 48 (their p99 is the
// latest) beside a service's own 200 ms stall is not; the same lag
// inside millisecond latencies is, and so is a median lag that is a
// tenth of the median latency, whatever the tail.
func TestLateSendsMaterial(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		lagP50, lagP99         float64
		latencyP50, latencyP99 *float64
		fired                  bool
		detail                 string
	}{
		{"one late send beside a stall", 0.1, 10.6, tare.Float(1.2), tare.Float(210), false, "did not change the figures"},
		{"late sends in a fast service", 0.1, 10.6, tare.Float(1.2), tare.Float(3), true, "tare itself could not send on time"},
		{"every send late", 4, 30, tare.Float(20), tare.Float(400), true, "tare itself could not send on time"},
		{"14 ms inside 8 s latencies", 1, 14, tare.Float(8000), tare.Float(9000), false, "did not change the figures"},
		{"latency not measured", 0.1, 10.6, nil, nil, true, "tare itself could not send on time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(make([]float64, 11))
			ticks[5].SendLagMax = time.Duration(tt.lagP99 * float64(time.Millisecond))
			s.SendLag.P50, s.SendLag.P99 = tare.Float(tt.lagP50), tare.Float(tt.lagP99)
			s.Latency.P50, s.Latency.P99 = tt.latencyP50, tt.latencyP99
			sig := find(t, Judge(s, ticks, DefaultThresholds(), nil), SignalGenerator)
			if sig.Fired != tt.fired || !strings.Contains(sig.Detail, tt.detail) {
				t.Errorf("generator signal fired %v: %q; want fired %v, saying %q", sig.Fired, sig.Detail, tt.fired, tt.detail)
			}
		})
	}
}
