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
