package judge

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name   string
		by     *tare.CPUBy
		level  tare.Level
		detail string
	}{
		{"quiet", &tare.CPUBy{Others: 1.2, Kernel: 1, Idle: 97.8, TopOthers: []tare.ProcessShare{{Name: "sshd", PID: 600, CPUPct: 1.2}}}, tare.Clean, "1% of the host's CPU time"},
		{"a build beside", &tare.CPUBy{Others: 30, Idle: 70, TopOthers: []tare.ProcessShare{{Name: "cc1", PID: 9, CPUPct: 30}}}, tare.Suspect, "`cc1` (pid 9) 60% of a CPU"},
		{"hogs on every core", &tare.CPUBy{Others: 97, Idle: 3, TopOthers: []tare.ProcessShare{{Name: "sh", PID: 7, CPUPct: 49}, {Name: "sh", PID: 8, CPUPct: 48}}}, tare.Polluted, "`sh` (pid 8) 96% of a CPU"},
		{"a container beside", &tare.CPUBy{Others: 31, Idle: 69, TopOthers: []tare.ProcessShare{{Name: "redis-server", PID: 9, CPUPct: 31, Processes: 1,
			Container: &tare.Container{ID: "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5", Runtime: "docker", Name: "redis-cache", Image: "redis:7"}}}},
			tare.Suspect, "busiest: container `redis-cache` (docker 863e2e323075, redis:7), `redis-server` (pid 9) 62% of a CPU"},
		{"not measured", nil, tare.Clean, "not measured"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, ticks := run(make([]float64, 10))
			s.Env.VCPUs = 2
			s.Host.CPUBy = tt.by
			s.Verdict = Judge(s, ticks, DefaultThresholds(), nil)
			v := Check(s, DefaultThresholds())
			sig := find(t, v, SignalBusy)
			if v.Level != tt.level || !strings.Contains(sig.Detail, tt.detail) {
				t.Errorf("level %s, busy %q; want %s and %q", v.Level, sig.Detail, tt.level, tt.detail)
			}
		})
	}
}
