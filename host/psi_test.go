package host

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestPSI(t *testing.T) {
	tests := []struct {
		name           string
		t0, t1         string // proc roots of the two readings
		tick           time.Duration
		wantOK         bool
		wantSome, want *float64 // want is full
	}{
		{
			// some total 66069144 → 66287964 µs: 218820 µs of 1 s = 21.882 %;
			// full total stays 0 → 0 % (measured, not missing).
			name: "live capture", t0: "live/t0/proc", t1: "live/t1/proc", tick: time.Second,
			wantOK: true, wantSome: ptr(21.882), want: ptr(0),
		},
		{
			// no full line (kernels before 5.13): full is nil, not 0.
			// some 1000000 → 1100000 µs: 100000 µs of 500 ms = 20 %.
			name: "no full line", t0: "psi/nofull/t0", t1: "psi/nofull/t1", tick: 500 * time.Millisecond,
			wantOK: true, wantSome: ptr(20), want: nil,
		},
		{
			// some 5000000 → 4000000 goes backwards: 0.
			// full 200000 → 450000: 250000 µs of 200 ms = 125 %, clamped to 100.
			name: "backwards and over the tick", t0: "psi/backwards/t0", t1: "psi/backwards/t1", tick: 200 * time.Millisecond,
			wantOK: true, wantSome: ptr(0), want: ptr(100),
		},
		{
			name: "absent", t0: "cpu/guest/t0", t1: "cpu/guest/t1", tick: time.Second,
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p0, ok0, err := readPSI(procFS(t, filepath.Join("testdata", tt.t0)), psiCPU)
			if err != nil {
				t.Fatal(err)
			}
			p1, ok1, err := readPSI(procFS(t, filepath.Join("testdata", tt.t1)), psiCPU)
			if err != nil {
				t.Fatal(err)
			}
			if ok0 != tt.wantOK || ok1 != tt.wantOK {
				t.Fatalf("available %v, %v; want %v", ok0, ok1, tt.wantOK)
			}
			if !tt.wantOK {
				return
			}
			some, full := psiShares(p0, p1, tt.tick)
			if !nearPtr(some, tt.wantSome) || !nearPtr(full, tt.want) {
				t.Errorf("some %v full %v, want %v %v", fmtPtr(some), fmtPtr(full), fmtPtr(tt.wantSome), fmtPtr(tt.want))
			}
		})
	}
}

func TestReadPSIMalformed(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"pressure/cpu": "some avg10=x total=1\n"})
	if _, ok, err := readPSI(procFS(t, dir), psiCPU); ok || !errors.Is(err, ErrParse) {
		t.Errorf("available %v, error %v; want false and one wrapping ErrParse", ok, err)
	}
}

// TestPSIIO: the I/O pressure of a tick is the delta of io's "some" total,
// as the CPU's is of cpu's; nil (not 0) where the file is absent.
func TestPSIIO(t *testing.T) {
	tests := []struct {
		name     string
		t0, t1   string // proc roots of the two readings
		tick     time.Duration
		wantOK   bool
		wantSome *float64
	}{
		{
			// captured on the development VM around a 64 MB O_DIRECT
			// write: some total 92893424 → 92914783 µs, 21359 µs of a
			// 1 s tick = 2.1359 %
			name: "live capture", t0: "psi/io/t0", t1: "psi/io/t1", tick: time.Second,
			wantOK: true, wantSome: ptr(2.1359),
		},
		{
			// some 5000000 → 4000000 goes backwards: 0
			name: "backwards", t0: "psi/io-backwards/t0", t1: "psi/io-backwards/t1", tick: time.Second,
			wantOK: true, wantSome: ptr(0),
		},
		{
			// /proc/pressure/cpu alone (the live fixture): no I/O pressure
			name: "absent", t0: "live/t0/proc", t1: "live/t1/proc", tick: time.Second,
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p0, ok0, err := readPSI(procFS(t, filepath.Join("testdata", tt.t0)), psiIO)
			if err != nil {
				t.Fatal(err)
			}
			p1, ok1, err := readPSI(procFS(t, filepath.Join("testdata", tt.t1)), psiIO)
			if err != nil {
				t.Fatal(err)
			}
			if ok0 != tt.wantOK || ok1 != tt.wantOK {
				t.Fatalf("available %v, %v; want %v", ok0, ok1, tt.wantOK)
			}
			if !tt.wantOK {
				return
			}
			if some, _ := psiShares(p0, p1, tt.tick); !nearPtr(some, tt.wantSome) {
				t.Errorf("some %v, want %v", fmtPtr(some), fmtPtr(tt.wantSome))
			}
		})
	}
}
