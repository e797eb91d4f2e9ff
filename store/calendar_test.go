package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// TestCalendarSamples: samples of several hosts share one store, each
// host's read back alone, in time order, in the span asked, every figure
// as stored (nil stays nil), and the hosts listed with their counts.
func TestCalendarSamples(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		base := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
		sample := func(host string, at time.Duration, pct float64) tare.CalendarSample {
			return tare.CalendarSample{
				Host: host, Start: base.Add(at), End: base.Add(at + 10*time.Second), Level: tare.Suspect,
				InterferencePct: tare.Float(pct), StealPct: tare.Float(0.5), NeighboursPct: tare.Float(pct - 0.5),
				BusyPct: tare.Float(pct + 2), PSISomePct: tare.Float(4), RunDelayPct: tare.Float(1.5),
				PollutedTicksPct: tare.Float(30), Ticks: 10, CostCPUMS: tare.Float(11.5),
				TopOthers: []tare.ProcessShare{{Name: "backup", PID: 4242, CPUPct: pct - 1,
					Container: &tare.Container{Name: "pgdump", Runtime: "docker"}, Processes: 2}},
			}
		}
		// Stored out of order, and the throttling not measured.
		in := []tare.CalendarSample{
			sample("node-a", 10*time.Minute, 40), sample("node-b", 0, 2), sample("node-a", 0, 60),
			sample("node-a", 24*time.Hour, 55), sample("node-b", 5*time.Minute, 3),
		}
		for _, c := range in {
			if err := s.AddCalendarSample(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.FindCalendarSamples(ctx, tare.CalendarFilter{Host: "node-a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []tare.CalendarSample{in[2], in[0], in[3]}
		if len(got) != len(want) {
			t.Fatalf("%d samples of node-a, want %d", len(got), len(want))
		}
		for i := range want {
			want[i].Start, want[i].End = want[i].Start.UTC(), want[i].End.UTC()
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("sample %d:\n got %+v\nwant %+v", i, got[i], want[i])
			}
		}
		span, err := s.FindCalendarSamples(ctx, tare.CalendarFilter{Host: "node-a", Since: base.Add(5 * time.Minute), Until: base.Add(24 * time.Hour)})
		if err != nil || len(span) != 1 || span[0].InterferencePct == nil || *span[0].InterferencePct != 40 {
			t.Errorf("node-a from 03:05 until a day later: %+v, %v; want the 03:10 sample alone (until is exclusive)", span, err)
		}
		hosts, err := s.FindCalendarHosts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantHosts := []tare.CalendarHost{
			{Host: "node-a", Samples: 3, First: base, Last: base.Add(24 * time.Hour)},
			{Host: "node-b", Samples: 2, First: base, Last: base.Add(5 * time.Minute)},
		}
		if !reflect.DeepEqual(hosts, wantHosts) {
			t.Errorf("hosts %+v, want %+v", hosts, wantHosts)
		}

		for name, bad := range map[string]tare.CalendarSample{
			"no host":              {Start: base, End: base},
			"ends before it began": {Host: "x", Start: base, End: base.Add(-time.Second)},
		} {
			var te *tare.Error
			if err := s.AddCalendarSample(ctx, bad); !errors.As(err, &te) || te.Code != tare.EINVALID {
				t.Errorf("%s: %v, want EINVALID", name, err)
			}
		}
		if _, err := s.FindCalendarSamples(ctx, tare.CalendarFilter{}); err == nil {
			t.Error("samples of no host: no error")
		}
	})
}

// TestWindowChoice: a protocol's calendar windows are kept once: the
// first choice stored wins, and a later one returns it.
func TestWindowChoice(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		none, err := s.FindWindowChoice(ctx, "checkout")
		if err != nil || none != nil {
			t.Fatalf("before any choice: %+v, %v", none, err)
		}
		first := []tare.WindowChoice{{Window: "offpeak", Choice: tare.ChoiceQuietest, From: "11:00", To: "12:00", Host: "vm-1", Predicted: 1.2,
			CalendarFrom: time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC), CalendarTo: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}}
		later := []tare.WindowChoice{{Window: "offpeak", Choice: tare.ChoiceQuietest, From: "05:00", To: "06:00", Host: "vm-1"}}
		got, err := s.KeepWindowChoice(ctx, "checkout", first)
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("kept %+v, %v; want %+v", got, err, first)
		}
		got, err = s.KeepWindowChoice(ctx, "checkout", later)
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Errorf("a second choice: kept %+v, %v; want the first", got, err)
		}
		if got, err := s.KeepWindowChoice(ctx, "search", later); err != nil || !reflect.DeepEqual(got, later) {
			t.Errorf("another protocol: %+v, %v", got, err)
		}
	})
}
