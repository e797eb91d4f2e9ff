package stats

import (
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// blamed is a second of host sample with schedstat's run delay sched and
// the ledger, and, unless measured is nil, the probe's blame: measured
// wait behind `sh` (pid 7) and the system under test, and its run delay.
func blamed(from float64, sched float64, measured *[2]float64) tare.HostSample {
	s := sample(from, from+1, 0)
	s.RunDelay, s.SUTRunDelay = tare.Float(sched), tare.Float(sched)
	s.CPUBy = &tare.CPUBy{SystemUnderTest: 20, Others: 30, Idle: 50, TopOthers: []tare.ProcessShare{{Name: "sh", PID: 7, CPUPct: 30}}}
	if measured != nil {
		s.Blame = &tare.Blame{Source: tare.BlameMeasured, WaitPct: measured[0] + measured[1], RunDelayPct: tare.Float(sched + measured[0]/20),
			Behind: []tare.Behind{
				{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7}, WaitPct: measured[0]},
				{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{5}, WaitPct: measured[1]},
			},
			OthersByCPU: []tare.CPUWait{{CPU: 0, WaitPct: measured[0]}}, DroppedEvents: 1}
	}
	return s
}

func TestSummaryBlame(t *testing.T) {
	t.Run("measured", func(t *testing.T) {
		r := newRecorder(t, Config{})
		// The second tick's probe run delay is 12 + 3 = 15 against 12: out
		// of 5 %. A last sample of 20 ms is not compared.
		for _, s := range []tare.HostSample{blamed(0, 10, &[2]float64{8, 2}), blamed(1, 12, &[2]float64{60, 4})} {
			r.AddHost(s)
		}
		last := blamed(2, 50, &[2]float64{0, 0})
		last.End = last.Start.Add(20 * time.Millisecond)
		r.AddHost(last)
		b := r.Summary(sec(3), 3*time.Second).Blame
		w := 1 / 2.02 // the two whole seconds against the 20 ms
		want := &tare.Blame{Source: tare.BlameMeasured, WaitPct: *round((10+64)*w, 2), DroppedEvents: 3,
			Behind: []tare.Behind{
				{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7}, WaitPct: *round(68*w, 2)},
				{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{5}, WaitPct: *round(6*w, 2)},
			},
			OthersByCPU: []tare.CPUWait{{CPU: 0, WaitPct: *round(68*w, 2)}},
			Schedstat:   &tare.TruthCheck{WaitPct: 11, ProbeWaitPct: 12.7, Ticks: 2, Disagreed: 1}}
		if !reflect.DeepEqual(b, want) {
			t.Errorf("blame =\n%+v %+v\nwant\n%+v %+v", b, b.Schedstat, want, want.Schedstat)
		}
	})
	t.Run("estimated", func(t *testing.T) {
		r := newRecorder(t, Config{})
		for _, s := range []tare.HostSample{blamed(0, 10, nil), blamed(1, 30, nil)} {
			r.AddHost(s)
		}
		b := r.Summary(sec(2), 2*time.Second).Blame
		// Neighbours 30 of the 50 % processes used: 60 % of each tick's
		// run delay, behind sh; the rest the system under test's.
		want := &tare.Blame{Source: tare.BlameEstimated, WaitPct: 20, Behind: []tare.Behind{
			{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7}, WaitPct: 12, Root: 7},
			{Owner: tare.OwnerSUT, Name: "", PIDs: []int{}, WaitPct: 8},
		}}
		if !reflect.DeepEqual(b, want) {
			t.Errorf("blame = %+v, want %+v", b, want)
		}
	})
	t.Run("probe missing in a tick", func(t *testing.T) {
		r := newRecorder(t, Config{})
		for _, s := range []tare.HostSample{blamed(0, 10, &[2]float64{8, 2}), blamed(1, 30, nil)} {
			r.AddHost(s)
		}
		b := r.Summary(sec(2), 2*time.Second).Blame
		if b == nil || b.Source != tare.BlameEstimated || b.Why != "the scheduler probe's counts were missing in 1 of 2 ticks" || b.WaitPct != 20 {
			t.Errorf("blame = %+v, want estimated throughout, saying why", b)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		r := newRecorder(t, Config{})
		r.AddHost(sample(0, 1, 0))
		if b := r.Summary(sec(1), time.Second).Blame; b != nil {
			t.Errorf("blame = %+v without run delay or a probe, want nil", b)
		}
	})
}
