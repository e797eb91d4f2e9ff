package calendar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// now is the injected clock of every test: the calendars end here.
var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// host is a synthetic host: a sample every 15 minutes over days days
// before now, its interference by hour from level, with seeded noise.
type host struct {
	days  int
	every time.Duration
	seed  uint64
	level func(day, hour int) (pct float64, who string)
}

// busyAt3 is a host whose backup runs at 03:00 every day, that is quiet
// at 11:00, and has a little of everything the rest of the time.
func busyAt3(day, hour int) (float64, string) {
	switch hour {
	case 3:
		return 60, "backup"
	case 11:
		return 1, "cron"
	}
	return 8, "cron"
}

func (h host) samples() []tare.CalendarSample {
	rng := rand.New(rand.NewPCG(h.seed, 1))
	every := h.every
	if every == 0 {
		every = 15 * time.Minute
	}
	var out []tare.CalendarSample
	// Whole days, up to today's midnight.
	end := now.Truncate(24 * time.Hour)
	start := end.AddDate(0, 0, -h.days)
	for t := start; t.Before(end); t = t.Add(every) {
		day := int(t.Sub(start) / (24 * time.Hour))
		base, who := h.level(day, t.Hour())
		v := max(base*(0.8+0.4*rng.Float64()), 0)
		cost := 9 + rng.Float64()
		out = append(out, tare.CalendarSample{
			Host: "vm-1", Start: t, End: t.Add(10 * time.Second), Level: level(v),
			InterferencePct: tare.Float(v), StealPct: tare.Float(0), NeighboursPct: tare.Float(v), BusyPct: tare.Float(v + 1),
			PSISomePct: tare.Float(v / 2), RunDelayPct: tare.Float(v / 10), Ticks: 10, CostCPUMS: &cost,
			TopOthers: []tare.ProcessShare{{Name: who, PID: 100, CPUPct: v * 0.9}, {Name: "sshd", PID: 7, CPUPct: 0.2}},
		})
	}
	return out
}

func level(v float64) tare.Level {
	switch {
	case v > 50:
		return tare.Polluted
	case v > 10:
		return tare.Suspect
	}
	return tare.Clean
}

func cfg(days int) Config {
	return Config{Host: "vm-1", Loc: time.UTC, Now: now, Days: days}
}

// TestHistoryFindsTheBusyAndTheQuietHour: a host busy at 03:00 every day
// and quiet at 11:00, two weeks of samples: the calendar names both,
// sure of each, with intervals that do not overlap, the backup as the
// busiest neighbour of 03:00, and the weekdays (each seen twice).
func TestHistoryFindsTheBusyAndTheQuietHour(t *testing.T) {
	samples := host{days: 14, seed: 1, level: busyAt3}.samples()
	c := Build(samples, cfg(28))
	if !c.Enough || c.Quietest == nil || c.Busiest == nil {
		t.Fatalf("enough %v, quietest %v, busiest %v; findings %q", c.Enough, c.Quietest, c.Busiest, c.Findings)
	}
	if c.Busiest.Hour != 3 || c.Quietest.Hour != 11 {
		t.Errorf("busiest %02d:00, quietest %02d:00; want 03:00 and 11:00", c.Busiest.Hour, c.Quietest.Hour)
	}
	for _, r := range []*tare.HourRank{c.Busiest, c.Quietest} {
		if r.Sure < 95 || !(r.Low <= r.Mean && r.Mean <= r.High) || r.Ranks != [2]int{1, 1} {
			t.Errorf("hour %02d: sure %.0f%%, mean %.2f in [%.2f, %.2f], ranks %v; want sure, the mean inside its interval, rank 1",
				r.Hour, r.Sure, r.Mean, r.Low, r.High, r.Ranks)
		}
	}
	if c.Busiest.Low <= c.Quietest.High {
		t.Errorf("the busiest hour's interval [%.1f, %.1f] overlaps the quietest's [%.1f, %.1f]", c.Busiest.Low, c.Busiest.High, c.Quietest.Low, c.Quietest.High)
	}
	if c.Days != 14 || c.Samples != len(samples) || len(c.Hours) != 24 || len(c.Cells) != 14*24 {
		t.Errorf("days %d, samples %d (of %d), hours %d, cells %d", c.Days, c.Samples, len(samples), len(c.Hours), len(c.Cells))
	}
	h3 := c.Hours[3]
	if len(h3.Neighbours) == 0 || h3.Neighbours[0].Name != "backup" || h3.Samples != 14*4 || h3.Days != 14 {
		t.Errorf("03:00: neighbours %+v, %d samples on %d days; want backup first, 56 samples on 14 days", h3.Neighbours, h3.Samples, h3.Days)
	}
	if sp := h3.InterferencePct; sp.Mean == nil || !(*sp.P10 <= *sp.Mean && *sp.Mean <= *sp.P90) {
		t.Errorf("03:00 spread %+v: want p10 <= mean <= p90", sp)
	}
	if h3.Levels[tare.Polluted]+h3.Levels[tare.Suspect] != h3.Samples {
		t.Errorf("03:00 verdicts %v: every sample of the backup's hour is suspect or polluted", h3.Levels)
	}
	if len(c.Weekdays) != 7 || c.Weekdays[0].Weekday != "Monday" || c.Weekdays[0].Days != 2 {
		t.Errorf("weekdays %+v: want seven, Monday first, each on 2 dates", c.Weekdays)
	}
	joined := strings.Join(c.Findings, "\n")
	for _, want := range []string{"The quietest hour is 11:00–12:00", "The busiest hour is 03:00–04:00", "The hours differ beyond day-to-day chance"} {
		if !strings.Contains(joined, want) {
			t.Errorf("findings lack %q:\n%s", want, joined)
		}
	}
	if c.Cost == nil || c.Cost.SamplesPerDay != 96 || c.Cost.CPUMSPerSample < 9 || c.Cost.CPUMSPerSample > 10 {
		t.Errorf("cost %+v: want 96 samples a day at 9–10 ms", c.Cost)
	}
}

// TestTooFewDays: below MinDays days the calendar names no hour and says
// why; from MinDays on it ranks them.
func TestTooFewDays(t *testing.T) {
	tests := []struct {
		days   int
		enough bool
	}{{1, false}, {MinDays - 1, false}, {MinDays, true}, {MinDays + 3, true}}
	for _, tt := range tests {
		c := Build(host{days: tt.days, seed: 2, level: busyAt3}.samples(), cfg(28))
		if c.Enough != tt.enough || (c.Quietest != nil) != tt.enough || (c.Busiest != nil) != tt.enough {
			t.Errorf("%d days: enough %v, quietest %v, busiest %v; want enough %v", tt.days, c.Enough, c.Quietest, c.Busiest, tt.enough)
		}
		if tell := strings.Contains(strings.Join(c.Findings, " "), "Too few days to tell"); tell == tt.enough {
			t.Errorf("%d days: findings %q", tt.days, c.Findings)
		}
		if tt.enough && (c.Busiest.Hour != 3 || c.Quietest.Hour != 11) {
			t.Errorf("%d days: busiest %02d:00, quietest %02d:00", tt.days, c.Busiest.Hour, c.Quietest.Hour)
		}
		if tt.days < 2*7 && c.Weekdays != nil {
			t.Errorf("%d days: split by weekday, which needs every weekday twice", tt.days)
		}
	}
}

// TestFlatHostIsNotSure: a host as busy at every hour gives some hour as
// the quietest, but not surely, and says the hours do not differ.
func TestFlatHostIsNotSure(t *testing.T) {
	flat := func(day, hour int) (float64, string) { return 5, "cron" }
	c := Build(host{days: 10, seed: 3, level: flat}.samples(), cfg(28))
	if !c.Enough {
		t.Fatalf("not enough: %q", c.Findings)
	}
	if c.Quietest.Sure >= 95 || c.Busiest.Sure >= 95 {
		t.Errorf("sure of the quietest (%.0f%%) or the busiest (%.0f%%) hour of a flat host", c.Quietest.Sure, c.Busiest.Sure)
	}
	joined := strings.Join(c.Findings, "\n")
	if !strings.Contains(joined, "does not tell its hours apart") || !strings.Contains(joined, "not sure") || c.HourEffectP == nil || *c.HourEffectP < 0.05 {
		t.Errorf("findings of a flat host:\n%s", joined)
	}
}

// TestSpanAndZone: samples before the span, or after now (the injected
// clock), are left out; the hours are the zone's.
func TestSpanAndZone(t *testing.T) {
	samples := host{days: 10, seed: 4, level: busyAt3}.samples()
	late := samples[len(samples)-1]
	late.Start = now.Add(time.Hour)
	samples = append(samples, late)
	c := Build(samples, cfg(7))
	if c.Days != 7 || c.Samples != 6*96+48 {
		// From now − 7 days (12:00) to the last sample, before today's
		// midnight: 6 whole dates and half of one.
		t.Errorf("7 days to %s: %d dates, %d samples; want 7 dates and %d samples", now, c.Days, c.Samples, 6*96+48)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	c = Build(samples, Config{Host: "vm-1", Loc: paris, Now: now, Days: 28})
	if c.Busiest == nil || c.Busiest.Hour != 4 || c.Quietest.Hour != 12 || c.TZ != "Europe/Paris" {
		t.Errorf("in Paris (UTC+1 in December): busiest %+v, quietest %+v; want 04:00 and 12:00", c.Busiest, c.Quietest)
	}
}

// TestDeterministic: the same samples give the same calendar, byte for
// byte: the bootstrap is seeded.
func TestDeterministic(t *testing.T) {
	samples := host{days: 9, seed: 5, level: busyAt3}.samples()
	a, _ := json.Marshal(Build(samples, cfg(28)))
	b, _ := json.Marshal(Build(samples, cfg(28)))
	if string(a) != string(b) {
		t.Error("two builds of the same samples differ")
	}
}

// TestChoose: windows: auto takes the busiest hours for peak, the
// quietest for off-peak, and the most typical for mid, as long as the load
// (in whole hours), none overlapping another or a window given as times.
func TestChoose(t *testing.T) {
	samples := host{days: 14, seed: 6, level: busyAt3}.samples()
	auto := []Want{{"peak", tare.ChoiceBusiest}, {"offpeak", tare.ChoiceQuietest}, {"mid", tare.ChoiceTypical}}
	tests := []struct {
		name   string
		wants  []Want
		fixed  []tare.Window
		length time.Duration
		want   map[string]string // window → from-to
	}{
		{"auto, a 20-minute load", auto, nil, 20 * time.Minute, map[string]string{"peak": "03:00-04:00", "offpeak": "11:00-12:00"}},
		{"auto, a 90-minute load", auto, nil, 90 * time.Minute, nil},
		{"offpeak only", []Want{{"offpeak", tare.ChoiceQuietest}}, []tare.Window{{Name: "peak", From: 14 * time.Hour, To: 16 * time.Hour}}, time.Hour,
			map[string]string{"offpeak": "11:00-12:00"}},
		{"a fixed window in the way", []Want{{"offpeak", tare.ChoiceQuietest}}, []tare.Window{{Name: "peak", From: 10*time.Hour + 30*time.Minute, To: 11*time.Hour + 30*time.Minute}}, time.Hour,
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := Choose(samples, cfg(28), tt.wants, tt.fixed, tt.length)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings %q: the busy and the quiet hour are far apart", warnings)
			}
			if len(got) != len(tt.wants) {
				t.Fatalf("%d windows chosen, want %d", len(got), len(tt.wants))
			}
			var taken [24]bool
			for _, w := range tt.fixed {
				hoursOf(w, &taken)
			}
			for i, c := range got {
				if c.Window != tt.wants[i].Window || c.Choice != tt.wants[i].Choice {
					t.Errorf("choice %d: %s %s, want %s %s (in the plan's order)", i, c.Window, c.Choice, tt.wants[i].Window, tt.wants[i].Choice)
				}
				if want, ok := tt.want[c.Window]; ok && c.From+"-"+c.To != want {
					t.Errorf("%s: %s-%s, want %s", c.Window, c.From, c.To, want)
				}
				var w tare.Window
				w.From, w.To = clockOf(t, c.From), clockOf(t, c.To)
				var mine [24]bool
				hoursOf(w, &mine)
				for h := range 24 {
					if mine[h] && taken[h] {
						t.Errorf("%s %s-%s overlaps another window at %02d:00", c.Window, c.From, c.To, h)
					}
					taken[h] = taken[h] || mine[h]
				}
				if c.Host != "vm-1" || c.Days != 14 || c.Samples == 0 || !(c.Low <= c.Predicted && c.Predicted <= c.High) || c.DayLow > c.DayHigh ||
					!strings.Contains(c.Detail, c.From+"-"+c.To) {
					t.Errorf("%s: evidence %+v", c.Window, c)
				}
			}
			if tt.length > time.Hour {
				for _, c := range got {
					if span := c.From + "-" + c.To; c.Window == "peak" && span != "02:00-04:00" && span != "03:00-05:00" ||
						c.Window == "offpeak" && span != "10:00-12:00" && span != "11:00-13:00" {
						t.Errorf("%s %s: want two hours around 03:00 for peak, 11:00 for off-peak", c.Window, span)
					}
				}
			}
			if tt.name == "a fixed window in the way" && got[0].From == "11:00" {
				t.Errorf("offpeak chose 11:00 under the fixed window 10:30-11:30")
			}
			if tt.name == "auto, a 20-minute load" {
				for _, c := range got {
					if c.Choice != tare.ChoiceTypical && c.Sure < 95 {
						t.Errorf("%s: sure %.0f%% of a clear-cut host", c.Window, c.Sure)
					}
				}
			}
		})
	}
}

func clockOf(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.Parse("15:04", s)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(d.Hour()) * time.Hour
}

// TestChooseTooFewDays: with too few days, windows: auto refuses, saying
// so, and what to do.
func TestChooseTooFewDays(t *testing.T) {
	samples := host{days: 3, seed: 7, level: busyAt3}.samples()
	_, _, err := Choose(samples, cfg(28), []Want{{"offpeak", tare.ChoiceQuietest}}, nil, time.Hour)
	var te *tare.Error
	if !errors.As(err, &te) || te.Code != tare.EINVALID {
		t.Fatalf("error %v, want an EINVALID tare.Error", err)
	}
	for _, want := range []string{"too few days to tell", "3 days", "takes 5", "tare check --every"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// TestChooseNoSpan: a load longer than any span sampled on enough days
// leaves nothing to choose, and says so.
func TestChooseNoSpan(t *testing.T) {
	// Samples from 08:00 to 17:00 only: no 10-hour span was sampled.
	var day []tare.CalendarSample
	for _, s := range (host{days: 6, seed: 9, level: busyAt3}).samples() {
		if h := s.Start.Hour(); h >= 8 && h < 17 {
			day = append(day, s)
		}
	}
	_, _, err := Choose(day, cfg(28), []Want{{"peak", tare.ChoiceBusiest}}, nil, 10*time.Hour)
	if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(fmt.Sprint(err), "no 10 hours of host vm-1's day was sampled") {
		t.Errorf("error %v", err)
	}
}

// TestChooseCannotTellApart: on a flat host the windows are chosen, with
// a warning that the calendar cannot tell them apart.
func TestChooseCannotTellApart(t *testing.T) {
	flat := func(day, hour int) (float64, string) { return 5, "cron" }
	_, warnings, err := Choose(host{days: 8, seed: 8, level: flat}.samples(), cfg(28),
		[]Want{{"peak", tare.ChoiceBusiest}, {"offpeak", tare.ChoiceQuietest}}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "cannot tell its hours apart") {
		t.Errorf("warnings %q", warnings)
	}
}

// TestVerify: a window measured as the calendar predicted, or not, says
// which and why.
func TestVerify(t *testing.T) {
	quiet := tare.WindowChoice{Window: "offpeak", Choice: tare.ChoiceQuietest, From: "11:00", To: "12:00", Predicted: 1, DayLow: 0.8, DayHigh: 1.2}
	busy := tare.WindowChoice{Window: "peak", Choice: tare.ChoiceBusiest, From: "03:00", To: "04:00", Predicted: 60, DayLow: 50, DayHigh: 70}
	mid := tare.WindowChoice{Window: "mid", Choice: tare.ChoiceTypical, From: "16:00", To: "17:00", Predicted: 8, DayLow: 6.5, DayHigh: 9.5}
	tests := []struct {
		name     string
		choice   tare.WindowChoice
		measured *float64
		want     *bool
		words    string
	}{
		{"quiet as predicted", quiet, tare.Float(1.5), ptr(true), "as quiet as predicted"},
		{"quiet, a little over, within slack", quiet, tare.Float(2.1), ptr(true), "as quiet as predicted"},
		{"busier than predicted", quiet, tare.Float(30), ptr(false), "busier than predicted"},
		{"busy as predicted", busy, tare.Float(65), ptr(true), "as busy as predicted"},
		{"busy, busier still", busy, tare.Float(90), ptr(true), "as busy as predicted"},
		{"the backup did not run", busy, tare.Float(3), ptr(false), "quieter than predicted"},
		{"typical", mid, tare.Float(8), ptr(true), "as typical as predicted"},
		{"not typical", mid, tare.Float(40), ptr(false), "busier than predicted"},
		{"not measured", quiet, nil, nil, "cannot be set against the calendar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Verify([]tare.WindowChoice{tt.choice}, map[string]*float64{tt.choice.Window: tt.measured})
			if len(got) != 1 {
				t.Fatalf("%d checks", len(got))
			}
			g := got[0]
			if (g.AsPredicted == nil) != (tt.want == nil) || g.AsPredicted != nil && *g.AsPredicted != *tt.want {
				t.Errorf("as predicted %v, want %v", g.AsPredicted, tt.want)
			}
			if !strings.Contains(g.Verdict, tt.words) || !strings.Contains(g.Verdict, tt.choice.From+"-"+tt.choice.To) {
				t.Errorf("verdict %q lacks %q or the window", g.Verdict, tt.words)
			}
		})
	}
}

func ptr(b bool) *bool { return &b }

// TestSample: a check's summary becomes a calendar sample: steal plus the
// neighbours' CPU as its interference, its verdict, its busiest processes
// and its cost; nothing measured stays nil.
func TestSample(t *testing.T) {
	start := now.Add(-10 * time.Second)
	s := tare.Summary{
		Run: tare.Run{StartedAt: start, EndedAt: now},
		Host: tare.HostSummary{
			CPUBusyPct: tare.Float(40), Steal: tare.StealStats{Mean: tare.Float(3)}, PSISomePct: tare.Float(12), Ticks: 10,
			CPUBy: &tare.CPUBy{Others: 20, Unattributed: 5, Steal: 3, Tare: 1, Kernel: 2, Idle: 69,
				TopOthers: []tare.ProcessShare{{Name: "backup", PID: 9, CPUPct: 19}}},
		},
		Verdict: tare.Verdict{Level: tare.Suspect},
	}
	cost := 12 * time.Millisecond
	c := Sample("vm-1", &s, &cost)
	if c.Host != "vm-1" || !c.Start.Equal(start) || !c.End.Equal(now) || c.Level != tare.Suspect || c.Ticks != 10 {
		t.Errorf("sample %+v", c)
	}
	if c.InterferencePct == nil || *c.InterferencePct != 28 || *c.NeighboursPct != 25 || *c.StealPct != 3 || *c.CostCPUMS != 12 {
		t.Errorf("interference %v (want 28: steal 3 + others 20 + unattributed 5), neighbours %v, steal %v, cost %v",
			c.InterferencePct, c.NeighboursPct, c.StealPct, c.CostCPUMS)
	}
	if c.ThrottledPct != nil || c.RunDelayPct != nil || len(c.TopOthers) != 1 {
		t.Errorf("throttled %v, run delay %v (not measured: nil), top %+v", c.ThrottledPct, c.RunDelayPct, c.TopOthers)
	}
	s.Host.CPUBy = nil
	if c := Sample("vm-1", &s, nil); c.InterferencePct != nil || c.CostCPUMS != nil {
		t.Errorf("without the ledger or the cost: interference %v, cost %v; want nil", c.InterferencePct, c.CostCPUMS)
	}
}

// TestGolden pins the calendar of two weeks of the busy-at-03:00 host as
// JSON (testdata/busy-at-3.golden.json, which the report's tests draw).
func TestGolden(t *testing.T) {
	c := Build(host{days: 14, seed: 1, level: busyAt3}.samples(), cfg(28))
	c.OtherHosts = []tare.CalendarHost{{Host: "vm-2", Samples: 96, First: now.AddDate(0, 0, -1), Last: now}}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "busy-at-3.golden.json", append(b, '\n'))
}
