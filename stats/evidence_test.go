package stats

import (
	"reflect"
	"testing"

	"github.com/tare-dev/tare"
)

// TestTicksKeepIOEvidence: a tick's host sample keeps the sampler's I/O
// pressure, I/O by process and fixed-work time; two samples in one tick
// mix the figures by length, as they do PSI, and add up each process's
// bytes.
func TestTicksKeepIOEvidence(t *testing.T) {
	r := newRecorder(t, Config{})
	h0 := sample(0, 1, 0)
	h0.PSIIOSome, h0.FixedWorkUS = tare.Float(8), tare.Float(20)
	h0.IOBy = []tare.ProcessIO{{Name: "pg_dump", PID: 7, Bytes: 1000}}
	h10 := sample(1, 1.5, 0)
	h10.PSIIOSome, h10.FixedWorkUS = tare.Float(10), tare.Float(20)
	h10.IOBy = []tare.ProcessIO{{Name: "pg_dump", PID: 7, Bytes: 100}, {Name: "postgres", PID: 9, Bytes: 500}}
	h11 := sample(1.5, 2, 0)
	h11.PSIIOSome, h11.FixedWorkUS = tare.Float(30), tare.Float(40)
	h11.IOBy = []tare.ProcessIO{{Name: "postgres", PID: 9, Bytes: 700}, {Name: "tar", PID: 11, Bytes: 50}}
	for _, h := range []tare.HostSample{h0, h10, h11} {
		r.AddHost(h)
	}
	ticks := r.Ticks()
	if len(ticks) != 2 || ticks[0].Host == nil || ticks[1].Host == nil {
		t.Fatalf("ticks %+v, want two with host samples", ticks)
	}
	a, b := ticks[0].Host, ticks[1].Host
	near(t, "tick 0 I/O pressure", a.PSIIOSome, 8, 0)
	near(t, "tick 0 fixed work", a.FixedWorkUS, 20, 0)
	if !reflect.DeepEqual(a.IOBy, h0.IOBy) {
		t.Errorf("tick 0 IOBy %+v, want %+v", a.IOBy, h0.IOBy)
	}
	near(t, "tick 1 I/O pressure", b.PSIIOSome, 20, 1e-9)
	near(t, "tick 1 fixed work", b.FixedWorkUS, 30, 1e-9)
	want := []tare.ProcessIO{{Name: "postgres", PID: 9, Bytes: 1200}, {Name: "pg_dump", PID: 7, Bytes: 100}, {Name: "tar", PID: 11, Bytes: 50}}
	if !reflect.DeepEqual(b.IOBy, want) {
		t.Errorf("tick 1 IOBy %+v, want %+v", b.IOBy, want)
	}
	// Ticks returns copies.
	a.IOBy[0].Bytes, *a.FixedWorkUS, *a.PSIIOSome = 0, 0, 0
	if again := r.Ticks()[0].Host; again.IOBy[0].Bytes != 1000 || *again.FixedWorkUS != 20 || *again.PSIIOSome != 8 {
		t.Errorf("changing the result of Ticks changed the recorder: %+v", again)
	}
}
