package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// t0 is the fixed instant of the first reading in fixture tests.
var t0 = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

// fixtureSampler makes a sampler over a copy of testdata/<name>/t0 and
// returns it with a function that moves the copy to another moment.
func fixtureSampler(t *testing.T, name string, cfg Config) (*Sampler, func(moment string)) {
	t.Helper()
	root := t.TempDir()
	step := func(moment string) { replaceTree(t, filepath.Join("testdata", name, moment), root) }
	step("t0")
	cfg.ProcRoot = filepath.Join(root, "proc")
	cfg.CgroupRoot = filepath.Join(root, "cgroup")
	cfg.Now = func() time.Time { return t0 }
	s, err := NewSampler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, step
}

func TestSamplerFixtures(t *testing.T) {
	yes := true
	tests := []struct {
		name    string
		fixture string
		cfg     Config
		want    tare.HostSample // Start and End are t0 and t0+1s
		wantEnv tare.Env
	}{
		{
			// The live capture (see TestCPUShares, TestPSI), redis-server's
			// 5 threads, in the root cpu cgroup of a v1 hybrid layout:
			//   run delay: thread 5305 1176743930 → 1176750040 = 6110 ns,
			//              the other four unchanged: 6110 ns of 1 s = 0.000611 %
			//   throttled: root cgroup, no quota, counters at 0: 0 %
			name: "v1 live capture", fixture: "live",
			cfg: Config{SUT: []int{5305}},
			want: tare.HostSample{
				CPU: tare.CPUShares{CPU: -1, User: pct(150, 204), System: pct(10, 204), Idle: pct(44, 204)},
				PerCPU: []tare.CPUShares{
					{CPU: 0, User: pct(81, 103), System: pct(3, 103), Idle: pct(19, 103)},
					{CPU: 1, User: pct(69, 101), System: pct(7, 101), Idle: pct(25, 101)},
				},
				PSISome: ptr(21.882), PSIFull: ptr(0), Throttled: ptr(0), RunDelay: ptr(0.000611),
			},
			wantEnv: tare.Env{Hostname: "vm", VCPUs: 2, Kernel: "6.18.44-fc-v657", ClkTck: 100,
				Cgroup: "v1", PSI: true, Hypervisor: &yes},
		},
		{
			// Hand-made v2 host without PSI or cpuinfo; /proc/stat from
			// cpu/guest; pid 42 in cgroup /app:
			//   throttled_usec 9000000 → 9250000: 250 ms of 1 s = 25 %
			//   run delay 250000000 → 400000000 ns: 150 ms of 1 s = 15 %
			name: "v2 without PSI", fixture: "v2",
			cfg: Config{SUT: []int{42}},
			want: tare.HostSample{
				CPU: tare.CPUShares{CPU: -1, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13},
				PerCPU: []tare.CPUShares{{CPU: 0, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13}},
				Throttled: ptr(25), RunDelay: ptr(15),
			},
			wantEnv: tare.Env{Hostname: "box", VCPUs: 1, Kernel: "6.1.0-test", ClkTck: 100, Cgroup: "v2", HostProcesses: &yes}, // kthreadd is pid 2
		},
		{
			// The same host measuring no process: only the host figures.
			name: "no process", fixture: "v2",
			want: tare.HostSample{
				CPU: tare.CPUShares{CPU: -1, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13},
				PerCPU: []tare.CPUShares{{CPU: 0, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13}},
			},
			wantEnv: tare.Env{Hostname: "box", VCPUs: 1, Kernel: "6.1.0-test", ClkTck: 100, Cgroup: "v2", HostProcesses: &yes}, // kthreadd is pid 2
		},
		{
			// An explicit cgroup instead of the measured process's own.
			name: "explicit cgroup", fixture: "v2",
			cfg: Config{Cgroup: "/app"},
			want: tare.HostSample{
				CPU: tare.CPUShares{CPU: -1, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13},
				PerCPU: []tare.CPUShares{{CPU: 0, User: 30, Nice: 10, System: 5, Idle: 40,
					IOWait: 1, IRQ: 0.5, SoftIRQ: 0.5, Steal: 13}},
				Throttled: ptr(25),
			},
			wantEnv: tare.Env{Hostname: "box", VCPUs: 1, Kernel: "6.1.0-test", ClkTck: 100, Cgroup: "v2", HostProcesses: &yes}, // kthreadd is pid 2
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, step := fixtureSampler(t, tt.fixture, tt.cfg)
			checkEnv(t, s.Env(), tt.wantEnv)
			step("t1")
			got, err := s.Sample(t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			checkSample(t, got, tt.want)
			if w := s.Warnings(); len(w) > 0 {
				t.Errorf("warnings: %v", w)
			}
		})
	}
}

func checkEnv(t *testing.T, got, want tare.Env) {
	t.Helper()
	same := func(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	gh, wh, gp, wp := got.Hypervisor, want.Hypervisor, got.HostProcesses, want.HostProcesses
	got.Hypervisor, want.Hypervisor, got.HostProcesses, want.HostProcesses = nil, nil, nil, nil
	if got != want || !same(gh, wh) || !same(gp, wp) {
		t.Errorf("env %+v (hypervisor %s, host processes %s), want %+v (hypervisor %s, host processes %s)", got, boolOf(gh), boolOf(gp), want, boolOf(wh), boolOf(wp))
	}
}

func checkSample(t *testing.T, got, want tare.HostSample) {
	t.Helper()
	if !got.Start.Equal(t0) || !got.End.Equal(t0.Add(time.Second)) {
		t.Errorf("tick %v – %v, want %v – %v", got.Start, got.End, t0, t0.Add(time.Second))
	}
	checkShares(t, "aggregate", got.CPU, want.CPU)
	if len(got.PerCPU) != len(want.PerCPU) {
		t.Fatalf("PerCPU %+v, want %+v", got.PerCPU, want.PerCPU)
	}
	for i := range got.PerCPU {
		checkShares(t, "per cpu", got.PerCPU[i], want.PerCPU[i])
	}
	for _, f := range []struct {
		name      string
		got, want *float64
	}{
		{"PSISome", got.PSISome, want.PSISome},
		{"PSIFull", got.PSIFull, want.PSIFull},
		{"Throttled", got.Throttled, want.Throttled},
		{"RunDelay", got.RunDelay, want.RunDelay},
	} {
		if !nearPtr(f.got, f.want) {
			t.Errorf("%s %v, want %v", f.name, fmtPtr(f.got), fmtPtr(f.want))
		}
	}
}

// TestSampleKeepsReading: a reading that yields no sample is not a
// reference, so the next sample spans both ticks.
func TestSampleKeepsReading(t *testing.T) {
	s, step := fixtureSampler(t, "v2", Config{SUT: []int{42}})
	if _, err := s.Sample(t0.Add(time.Second)); !errors.Is(err, errNoCPUTime) {
		t.Fatalf("sample with no CPU time: error %v, want %v", err, errNoCPUTime)
	}
	if _, err := s.Sample(t0); err == nil {
		t.Fatal("sample at the same instant as the previous one: no error")
	}
	step("t1")
	got, err := s.Sample(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 150 ms of run delay and 250 ms of throttling, now over 2 s.
	if !got.Start.Equal(t0) || !nearPtr(got.RunDelay, ptr(7.5)) || !nearPtr(got.Throttled, ptr(12.5)) {
		t.Errorf("start %v run delay %v throttled %v; want %v 7.5 12.5", got.Start, fmtPtr(got.RunDelay), fmtPtr(got.Throttled), t0)
	}
}

// TestSampleProcessExits: a measured process that is gone makes RunDelay
// unavailable, not 0.
func TestSampleProcessExits(t *testing.T) {
	s, step := fixtureSampler(t, "v2", Config{SUT: []int{42}})
	step("t1")
	if err := os.RemoveAll(filepath.Join(filepath.Dir(s.cfg.ProcRoot), "proc", "42")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.RunDelay != nil {
		t.Errorf("run delay %v after the process exited, want nil", *got.RunDelay)
	}
}

func TestNewSamplerErrors(t *testing.T) {
	live := filepath.Join("testdata", "live", "t0")
	tests := []struct {
		name     string
		cfg      Config
		wantCode string
	}{
		{name: "tick too short", cfg: Config{Tick: 50 * time.Millisecond}, wantCode: tare.EINVALID},
		{name: "negative tick", cfg: Config{Tick: -time.Second}, wantCode: tare.EINVALID},
		{name: "pid zero", cfg: Config{SUT: []int{0}}, wantCode: tare.EINVALID},
		{name: "no such pid", cfg: Config{SUT: []int{999999}}, wantCode: tare.ENOTFOUND},
		{name: "no such cgroup", cfg: Config{Cgroup: "/nope"}, wantCode: tare.ENOTFOUND},
		{name: "no proc", cfg: Config{ProcRoot: filepath.Join(live, "nope")}, wantCode: tare.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.ProcRoot == "" {
				tt.cfg.ProcRoot = filepath.Join(live, "proc")
			}
			tt.cfg.CgroupRoot = filepath.Join(live, "cgroup")
			s, err := NewSampler(tt.cfg)
			if err == nil {
				t.Fatalf("NewSampler(%+v) = %v, want an error", tt.cfg, s)
			}
			if code := tare.ErrorCode(err); code != tt.wantCode {
				t.Errorf("error %q has code %q, want %q", err, code, tt.wantCode)
			}
		})
	}
}

// TestNewSamplerNoCgroup: when the measured process's cgroup cannot be
// found, the sampler still runs, Throttled is nil and Warnings says why.
func TestNewSamplerNoCgroup(t *testing.T) {
	root := t.TempDir()
	replaceTree(t, filepath.Join("testdata", "v2", "t0"), root)
	if err := os.RemoveAll(filepath.Join(root, "cgroup", "app")); err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(Config{ProcRoot: filepath.Join(root, "proc"), CgroupRoot: filepath.Join(root, "cgroup"),
		SUT: []int{42}, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings()) != 1 {
		t.Errorf("warnings %v, want one about the cgroup", s.Warnings())
	}
	replaceTree(t, filepath.Join("testdata", "v2", "t1"), root)
	got, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.Throttled != nil || got.RunDelay == nil {
		t.Errorf("throttled %v run delay %v, want nil and set", fmtPtr(got.Throttled), fmtPtr(got.RunDelay))
	}
}

// TestRun samples the live machine at the shortest tick.
func TestRun(t *testing.T) {
	s, err := NewSampler(Config{Tick: tare.MinTick, SUT: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make(chan tare.HostSample)
	go s.Run(ctx, out)
	var got []tare.HostSample
	for hs := range out {
		got = append(got, hs)
		if len(got) == 3 {
			cancel()
		}
	}
	if len(got) < 3 {
		t.Fatalf("%d samples before the deadline, want 3 (warnings: %v)", len(got), s.Warnings())
	}
	env := s.Env()
	for i, hs := range got {
		if i > 0 && !hs.Start.Equal(got[i-1].End) {
			t.Errorf("sample %d starts at %v, the previous ended at %v", i, hs.Start, got[i-1].End)
		}
		if !hs.End.After(hs.Start) {
			t.Errorf("sample %d: end %v not after start %v", i, hs.End, hs.Start)
		}
		if len(hs.PerCPU) == 0 || len(hs.PerCPU) > env.VCPUs {
			t.Errorf("sample %d: %d CPUs, machine has %d", i, len(hs.PerCPU), env.VCPUs)
		}
		if hs.RunDelay == nil {
			t.Errorf("sample %d: no run delay for this very process", i)
		}
		if env.PSI && hs.PSISome == nil {
			t.Errorf("sample %d: PSI available but PSISome nil", i)
		}
		t.Logf("sample %d: %v busy %.1f %% steal %.1f %% psi %v throttled %v run delay %v", i,
			hs.End.Sub(hs.Start).Round(time.Millisecond), hs.CPU.Busy(), hs.CPU.Steal,
			fmtPtr(hs.PSISome), fmtPtr(hs.Throttled), fmtPtr(hs.RunDelay))
	}
	t.Logf("env %+v", env)
}

// TestRunCancelled: Run closes its channel even when no tick ever came.
func TestRunCancelled(t *testing.T) {
	s, err := NewSampler(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := make(chan tare.HostSample)
	go s.Run(ctx, out)
	for range out {
	}
}

// BenchmarkSample is the cost of one tick against the live /proc, the
// whose-CPU ledger of every process included: this process measured as
// tare, its parent as the system under test. At 1 s ticks the sampler uses
// ns/op / 1e9 of a core (%core@1s). For a host with 500 processes:
//
//	for i in $(seq 420); do sleep 90 & done; go test -run NONE -bench Sample ./host/
func BenchmarkSample(b *testing.B) {
	s, err := NewSampler(Config{Tare: []int{os.Getpid()}, SUT: []int{os.Getppid()}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		// Back-to-back readings often see no new jiffy: the error is the
		// expected errNoCPUTime, and the reading cost is the same.
		_, _ = s.Sample(time.Now())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "%core@1s")
}

// TestNewSamplerNoThrottling: a v2 cgroup without the cpu controller has no
// throttling counters: Throttled is nil, not 0, and Warnings says why.
func TestNewSamplerNoThrottling(t *testing.T) {
	root := t.TempDir()
	nocpu, err := os.ReadFile(filepath.Join("testdata", "cgroup", "v2-nocpu", "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	replaceTree(t, filepath.Join("testdata", "v2", "t0"), root)
	writeFiles(t, root, map[string]string{"cgroup/app/cpu.stat": string(nocpu)})
	s, err := NewSampler(Config{ProcRoot: filepath.Join(root, "proc"), CgroupRoot: filepath.Join(root, "cgroup"),
		SUT: []int{42}, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings()) != 1 {
		t.Errorf("warnings %v, want one about the cpu controller", s.Warnings())
	}
	replaceTree(t, filepath.Join("testdata", "v2", "t1"), root)
	writeFiles(t, root, map[string]string{"cgroup/app/cpu.stat": string(nocpu)})
	got, err := s.Sample(t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.Throttled != nil {
		t.Errorf("throttled %v, want nil", *got.Throttled)
	}
}

// boolOf prints a *bool: true, false or unknown.
func boolOf(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return strconv.FormatBool(*b)
}
