package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestFailures(t *testing.T) {
	const target = "GET http://127.0.0.1:9/"
	tests := []struct {
		name     string
		req      tare.Requests
		kinds    map[string]int
		queue    bool
		fired    bool
		finding  bool
		level    tare.Level
		value    *float64
		detail   string
		advice   string // a line the advice must hold (unfired: none of the failures' lines)
		noAdvice string // a line it must not
	}{
		{name: "nothing sent", req: tare.Requests{}, level: tare.Clean,
			detail: "failures were not counted (no request was sent)"},
		{name: "all dropped", req: tare.Requests{Total: 5, Dropped: 5}, level: tare.Clean,
			detail: "failures were not counted (no request was sent)"},
		{name: "all ok", req: tare.Requests{Total: 200, OK: 200}, level: tare.Clean, value: tare.Float(0),
			detail: "all 200 requests succeeded"},
		{name: "a few failed", req: tare.Requests{Total: 200, OK: 197, Errors: 3}, kinds: map[string]int{"http 503": 2, "timeout": 1},
			level: tare.Clean, value: tare.Float(1.5), detail: "3 of 200 requests failed (2 http 503, 1 timeout; threshold 50%)"},
		{name: "exactly half", req: tare.Requests{Total: 200, OK: 100, Errors: 100}, kinds: map[string]int{"http 503": 100},
			level: tare.Clean, value: tare.Float(50), detail: "100 of 200 requests failed (100 http 503; threshold 50%)"},
		{name: "most failed", req: tare.Requests{Total: 200, OK: 48, Errors: 152}, kinds: map[string]int{"http 503": 152},
			fired: true, finding: true, level: tare.Clean, value: tare.Float(76),
			detail: "152 of 200 requests failed (152 http 503), more than 50%: latency figures are mostly of failures",
			advice: "Most requests failed: find out why"},
		{name: "all refused", req: tare.Requests{Total: 200, Errors: 200}, kinds: map[string]int{"refused": 200},
			fired: true, level: tare.Suspect, value: tare.Float(100),
			detail:   "no request succeeded: 200 of 200 failed (200 refused): the target (GET http://127.0.0.1:9/) never answered; these figures describe no service",
			advice:   "Check the target before reading any figure",
			noAdvice: "Treat these figures with care"},
		{name: "all refused, dropped left out", req: tare.Requests{Total: 210, Errors: 200, Dropped: 10}, kinds: map[string]int{"refused": 200},
			fired: true, level: tare.Suspect, value: tare.Float(100),
			detail: "no request succeeded: 200 of 200 failed (200 refused): the target (GET http://127.0.0.1:9/) never answered; these figures describe no service"},
		{name: "all 503", req: tare.Requests{Total: 200, Errors: 200}, kinds: map[string]int{"http 503": 190, "http 500": 10},
			fired: true, level: tare.Suspect, value: tare.Float(100),
			detail: "no request succeeded: 200 of 200 failed (190 http 503, 10 http 500): the target (GET http://127.0.0.1:9/) answered every request with an error status; these figures describe no service"},
		{name: "all failed, many kinds", req: tare.Requests{Total: 100, Errors: 100},
			kinds: map[string]int{"refused": 40, "timeout": 30, "reset": 20, "eof": 6, "stream cut": 4},
			fired: true, level: tare.Suspect, value: tare.Float(100),
			detail: "no request succeeded: 100 of 100 failed (40 refused, 30 timeout, 20 reset, 10 more of 2 other kinds): the target (GET http://127.0.0.1:9/) served none of them; these figures describe no service"},
		{name: "queue, the workers' model refused", req: tare.Requests{Total: 20, Errors: 20}, kinds: map[string]int{"refused": 20}, queue: true,
			fired: true, level: tare.Suspect, value: tare.Float(100),
			detail: "no request succeeded: 20 of 20 failed (20 refused): the workers behind the target (queue tare) succeeded at no job; these figures describe no service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run([]float64{0, 0, 0, 0, 0, 0})
			s.Run.Target = target
			if tt.queue {
				s.Queue, s.Run.Target = &tare.QueueSummary{}, "queue tare"
			}
			s.Requests, s.ErrorKinds = tt.req, tt.kinds
			v := Judge(s, ticks, DefaultThresholds(), nil)
			sig := v.Signals[0]
			if sig.Name != SignalFailures {
				t.Fatalf("first signal %q, want %q", sig.Name, SignalFailures)
			}
			if sig.Fired != tt.fired || sig.Finding != tt.finding || v.Level != tt.level {
				t.Errorf("fired %v finding %v level %s; want %v %v %s", sig.Fired, sig.Finding, v.Level, tt.fired, tt.finding, tt.level)
			}
			if (sig.Value == nil) != (tt.value == nil) || sig.Value != nil && *sig.Value != *tt.value {
				t.Errorf("value %v, want %v", fmtPtr(sig.Value), fmtPtr(tt.value))
			}
			if sig.Detail != tt.detail {
				t.Errorf("detail\n got %q\nwant %q", sig.Detail, tt.detail)
			}
			advice := strings.Join(v.Advice, "\n")
			if tt.advice != "" && !strings.Contains(advice, tt.advice) {
				t.Errorf("advice %q: want %q", advice, tt.advice)
			}
			if !tt.fired && (strings.Contains(advice, "Check the target") || strings.Contains(advice, "Most requests failed")) {
				t.Errorf("advice %q: want no line about failures", advice)
			}
			if tt.noAdvice != "" && strings.Contains(advice, tt.noAdvice) {
				t.Errorf("advice %q: want no %q", advice, tt.noAdvice)
			}
		})
	}
}

// TestFailuresNeverPollute: nothing succeeding is suspect on a quiet host,
// and leaves a polluted host's verdict polluted, never the other way.
func TestFailuresNeverPollute(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steal []float64
		want  tare.Level
	}{
		{"quiet host", []float64{0, 0, 0, 0, 0, 0}, tare.Suspect},
		{"stolen host", []float64{40, 40, 40, 40, 40, 40}, tare.Polluted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(tt.steal)
			s.Requests, s.ErrorKinds = tare.Requests{Total: 50, Errors: 50}, map[string]int{"refused": 50}
			if v := Judge(s, ticks, DefaultThresholds(), nil); v.Level != tt.want {
				t.Errorf("level %s, want %s", v.Level, tt.want)
			}
			sig := failures(s)
			if got := LevelOf(sig); got != tare.Suspect {
				t.Errorf("LevelOf(failures) %s, want suspect", got)
			}
			sig.Finding = true
			if got := LevelOf(sig); got != tare.Clean {
				t.Errorf("LevelOf(a finding) %s, want clean", got)
			}
		})
	}
}

// TestStepNothingSucceeded: a sweep step with no success is saturated with
// the failures' words, not as load shed.
func TestStepNothingSucceeded(t *testing.T) {
	s, ticks := run([]float64{0, 0, 0, 0})
	s.Run.Target = "GET http://127.0.0.1:9/"
	s.Requests, s.ErrorKinds = tare.Requests{Total: 40, Errors: 40}, map[string]int{"refused": 40}
	st := Step(s, ticks, nil, DefaultSweepRules())
	want := "no request succeeded: 40 of 40 failed (40 refused): the target (GET http://127.0.0.1:9/) never answered; these figures describe no service"
	if st.Status != tare.StepSaturated || len(st.Reasons) == 0 || st.Reasons[0] != want {
		t.Errorf("status %s reasons %q; want saturated, %q", st.Status, st.Reasons, want)
	}
}

func fmtPtr(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
