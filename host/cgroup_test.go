package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseCgroupCPUStat(t *testing.T) {
	tests := []struct {
		name    string
		file    string // fixture under testdata, or
		text    string // inline input
		want    cgroupCPUStat
		wantErr bool
	}{
		{name: "v1 captured", file: "cgroup/v1/t0/cpu.stat",
			want: cgroupCPUStat{Periods: 20, Throttled: 20, ThrottledNS: 1594168094, HasPeriods: true, HasThrottling: true}},
		{name: "v1 root of this VM", file: "live/t0/cgroup/cpu/cpu.stat",
			want: cgroupCPUStat{HasPeriods: true, HasThrottling: true}},
		{name: "v2 throttled_usec in ns", file: "cgroup/v2/t0/cpu.stat",
			want: cgroupCPUStat{Periods: 1200, Throttled: 300, ThrottledNS: 9000000 * 1000, HasPeriods: true, HasThrottling: true}},
		{name: "v2 without cpu controller", file: "cgroup/v2-nocpu/cpu.stat",
			want: cgroupCPUStat{}},
		{name: "empty", text: "", want: cgroupCPUStat{}},
		{name: "unknown keys skipped", text: "future_key not-a-number\nnr_periods 3\n\n",
			want: cgroupCPUStat{Periods: 3, HasPeriods: true}},
		{name: "no trailing newline", text: "nr_throttled 1\nthrottled_time 5",
			want: cgroupCPUStat{Throttled: 1, ThrottledNS: 5, HasThrottling: true}},
		{name: "bad number", text: "nr_periods 12x\n", wantErr: true},
		{name: "negative", text: "throttled_usec -1\n", wantErr: true},
		{name: "no value", text: "nr_throttled\n", wantErr: true},
		{name: "usec overflow", text: "throttled_usec 18446744073709551615\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.text)
			if tt.file != "" {
				var err error
				if b, err = os.ReadFile(filepath.Join("testdata", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseCgroupCPUStat(b)
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v, want one wrapping ErrParse", err)
				}
				if !strings.Contains(err.Error(), strings.TrimSpace(tt.text)) {
					t.Errorf("error %q does not quote the input", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseCgroupCPUStat(f *testing.F) {
	for _, name := range []string{"cgroup/v1/t0/cpu.stat", "cgroup/v2/t1/cpu.stat", "cgroup/v2-nocpu/cpu.stat"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("nr_periods 1 2\nthrottled_usec 99999999999999999\n"))
	f.Add([]byte("throttled_time\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseCgroupCPUStat(b)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		if !st.HasPeriods && (st.Periods != 0) || !st.HasThrottling && st.ThrottledNS != 0 {
			t.Fatalf("counter without its flag: %+v", st)
		}
		th := throttleOf(cgroupCPUStat{HasPeriods: true, HasThrottling: true}, st, time.Second)
		for _, p := range []*float64{th.Time, th.Periods} {
			if p != nil && (*p < 0 || *p > 100) {
				t.Fatalf("share %v out of [0, 100] for %+v", *p, st)
			}
		}
	})
}

func TestThrottleOf(t *testing.T) {
	read := func(name string) cgroupCPUStat {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		st, err := parseCgroupCPUStat(b)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	tests := []struct {
		name        string
		prev, cur   cgroupCPUStat
		tick        time.Duration
		wantTime    *float64
		wantPeriods *float64
		wantN       uint64
	}{
		{
			// Captured from a v1 cgroup with cfs_quota_us 20000 of
			// cfs_period_us 100000 holding a busy loop, 1 s apart:
			//   throttled_time 1594168094 → 2391147415: 796979321 ns of 1 s = 79.6979321 %
			//   nr_throttled 20 → 30 of nr_periods 20 → 30: 10/10 = 100 %
			name: "v1 captured", prev: read("cgroup/v1/t0/cpu.stat"), cur: read("cgroup/v1/t1/cpu.stat"),
			tick: time.Second, wantTime: ptr(79.6979321), wantPeriods: ptr(100), wantN: 10,
		},
		{
			// throttled_usec 9000000 → 9250000: 250 ms of 1 s = 25 %
			// nr_throttled 300 → 304 of nr_periods 1200 → 1210: 4/10 = 40 %
			name: "v2", prev: read("cgroup/v2/t0/cpu.stat"), cur: read("cgroup/v2/t1/cpu.stat"),
			tick: time.Second, wantTime: ptr(25), wantPeriods: ptr(40), wantN: 4,
		},
		{
			// root cgroup, no quota: no period elapsed, so no period share,
			// but the time share is a measured 0.
			name: "no quota", prev: read("live/t0/cgroup/cpu/cpu.stat"), cur: read("live/t1/cgroup/cpu/cpu.stat"),
			tick: time.Second, wantTime: ptr(0), wantPeriods: nil,
		},
		{
			name: "v2 without cpu controller", prev: read("cgroup/v2-nocpu/cpu.stat"), cur: read("cgroup/v2-nocpu/cpu.stat"),
			tick: time.Second, wantTime: nil, wantPeriods: nil,
		},
		{
			// 250 ms of throttling over a 100 ms tick (two CPUs' run queues
			// throttled at once): capped at 100 %.
			name: "over the tick", prev: read("cgroup/v2/t0/cpu.stat"), cur: read("cgroup/v2/t1/cpu.stat"),
			tick: 100 * time.Millisecond, wantTime: ptr(100), wantPeriods: ptr(40), wantN: 4,
		},
		{
			// the cgroup was made again: counters restart, deltas clamp to 0.
			name: "recreated", prev: read("cgroup/v1/t1/cpu.stat"), cur: read("cgroup/v1/t0/cpu.stat"),
			tick: time.Second, wantTime: ptr(0), wantPeriods: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := throttleOf(tt.prev, tt.cur, tt.tick)
			if !nearPtr(got.Time, tt.wantTime) || !nearPtr(got.Periods, tt.wantPeriods) || got.Throttled != tt.wantN {
				t.Errorf("time %v periods %v throttled %d, want %v %v %d",
					fmtPtr(got.Time), fmtPtr(got.Periods), got.Throttled,
					fmtPtr(tt.wantTime), fmtPtr(tt.wantPeriods), tt.wantN)
			}
		})
	}
}

// cgroup layouts, as directory trees under a fake cgroup root.
var (
	// this VM: each v1 controller mounted alone, v2 at unified
	layoutV1Split = map[string]string{
		"cpu/cpu.stat":                   "nr_periods 0\n",
		"cpu/app/cpu.stat":               "nr_periods 0\n",
		"cpuacct/cpuacct.usage":          "0\n",
		"unified/cgroup.controllers":     "",
		"unified/app/cgroup.controllers": "",
	}
	// systemd hybrid: cpu and cpuacct co-mounted
	layoutHybrid = map[string]string{
		"cpu,cpuacct/cpu.stat":                "nr_periods 0\n",
		"cpu,cpuacct/system.slice/x/cpu.stat": "nr_periods 0\n",
		"unified/cgroup.controllers":          "",
	}
	// unified v2 only
	layoutV2 = map[string]string{
		"cgroup.controllers":                "cpu io memory\n",
		"user.slice/app/cpu.stat":           "usage_usec 1\n",
		"user.slice/app/cgroup.controllers": "cpu\n",
	}
)

func TestFindCgroup(t *testing.T) {
	tests := []struct {
		name    string
		layout  map[string]string
		lines   string // /proc/<pid>/cgroup
		want    string // directory, relative to the root
		version string
		wantErr bool
	}{
		{name: "v1 split, this VM", layout: layoutV1Split,
			lines: "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/app\n0::/app\n", want: "cpu/app", version: "v1"},
		{name: "v1 co-mounted", layout: layoutHybrid,
			lines: "4:cpu,cpuacct:/system.slice/x\n0::/system.slice/x\n", want: "cpu,cpuacct/system.slice/x", version: "v1"},
		{name: "v1 listed as cpuacct,cpu", layout: layoutHybrid,
			lines: "4:cpuacct,cpu:/system.slice/x\n", want: "cpu,cpuacct/system.slice/x", version: "v1"},
		{name: "v2 unified", layout: layoutV2,
			lines: "0::/user.slice/app\n", want: "user.slice/app", version: "v2"},
		{name: "v2 at unified/ when cpu is not on v1", layout: layoutV1Split,
			lines: "0::/app\n", want: "unified/app", version: "v2"},
		{name: "cgroup missing on disk", layout: layoutV1Split,
			lines: "1:cpu:/elsewhere\n", wantErr: true},
		{name: "no cpu line", layout: layoutV1Split,
			lines: "2:cpuacct:/\n", wantErr: true},
		{name: "v2 line, no v2 mount", layout: map[string]string{"cpu,cpuacct/cpu.stat": ""},
			lines: "0::/\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.layout)
			proc := t.TempDir()
			writeFiles(t, proc, map[string]string{"7/cgroup": tt.lines})
			got, err := pidCgroup(procFS(t, proc), root, 7)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("found %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tt.want); got.Path != want || got.Version != tt.version {
				t.Errorf("got %+v, want %s %s", got, want, tt.version)
			}
		})
	}
}

func TestExplicitCgroup(t *testing.T) {
	tests := []struct {
		name    string
		layout  map[string]string
		cgroup  string // "$root" is replaced by the cgroup root
		want    string
		version string
		wantErr bool
	}{
		{name: "hierarchy path, v1", layout: layoutV1Split, cgroup: "/app", want: "cpu/app", version: "v1"},
		{name: "hierarchy path, co-mounted", layout: layoutHybrid, cgroup: "/system.slice/x", want: "cpu,cpuacct/system.slice/x", version: "v1"},
		{name: "hierarchy path, v2", layout: layoutV2, cgroup: "user.slice/app", want: "user.slice/app", version: "v2"},
		{name: "directory, v1", layout: layoutV1Split, cgroup: "$root/cpu/app", want: "cpu/app", version: "v1"},
		{name: "directory, v2", layout: layoutV2, cgroup: "$root/user.slice/app", want: "user.slice/app", version: "v2"},
		{name: "missing", layout: layoutV2, cgroup: "/nope", wantErr: true},
		{name: "missing directory", layout: layoutV2, cgroup: "$root/nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.layout)
			got, err := explicitCgroup(root, strings.ReplaceAll(tt.cgroup, "$root", root))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("found %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tt.want); got.Path != want || got.Version != tt.version {
				t.Errorf("got %+v, want %s %s", got, want, tt.version)
			}
		})
	}
}

func TestCgroupLayout(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layout map[string]string
		want   string
	}{
		{"v1 split", layoutV1Split, "v1"},
		{"hybrid", layoutHybrid, "v1"},
		{"v2", layoutV2, "v2"},
		{"nothing", map[string]string{"x": ""}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.layout)
			if got := cgroupLayout(root); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
