package protocol

import (
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// paris is the zone of the tests: one with daylight saving.
var paris = mustZone("Europe/Paris")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// at is a wall-clock instant in Paris.
func at(month time.Month, day, hour, min int) time.Time {
	return time.Date(2026, month, day, hour, min, 0, 0, paris)
}

func schedule() Schedule {
	return Schedule{Protocol: "checkout", Windows: DefaultWindows(), Days: 1, Location: paris, Seed: 7, RunLength: 10 * time.Minute}
}

// layout is the slots as "window day opens state" lines.
func layout(slots []Slot) string {
	var out []string
	for _, s := range slots {
		out = append(out, s.Window.Name+" "+s.Opens.Format("01-02 15:04")+" "+string(s.State))
	}
	return strings.Join(out, ", ")
}

func TestCycle(t *testing.T) {
	complete := func(window string, started time.Time) tare.Run {
		return tare.Run{ID: window + "-run", Protocol: "checkout", Window: window, StartedAt: started, Status: tare.StatusComplete}
	}
	tests := []struct {
		name string
		edit func(*Schedule)
		runs []tare.Run
		now  time.Time
		want string
	}{
		{"fresh, before the peak", nil, nil, at(12, 1, 13, 0),
			"peak 12-01 14:00 waiting, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"fresh, the load no longer fits in today's peak", nil, nil, at(12, 1, 15, 55),
			"offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting, peak 12-02 14:00 waiting"},
		{"fresh, inside the peak past its seeded start", nil, nil, at(12, 1, 15, 45),
			"peak 12-01 14:00 due, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"peak done", nil, []tare.Run{complete("peak", at(12, 1, 14, 37))}, at(12, 1, 16, 30),
			"peak 12-01 14:00 done, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"off-peak passed while tare was down", nil, []tare.Run{complete("peak", at(12, 1, 14, 37))}, at(12, 2, 5, 0),
			"peak 12-01 14:00 done, offpeak 12-02 02:00 missed, mid 12-02 08:00 waiting"},
		{"runs of other protocols do not count", nil, []tare.Run{{Protocol: "other", Window: "peak", StartedAt: at(12, 1, 14, 37), Status: tare.StatusComplete}}, at(12, 1, 13, 0),
			"peak 12-01 14:00 waiting, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"interrupted, window still open: run again", nil, []tare.Run{{ID: "i", Protocol: "checkout", Window: "peak", StartedAt: at(12, 1, 14, 37), Status: tare.StatusInterrupted}}, at(12, 1, 15, 0),
			"peak 12-01 14:00 due, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"running in another process", nil, []tare.Run{{ID: "r", Protocol: "checkout", Window: "peak", StartedAt: at(12, 1, 14, 37), Status: tare.StatusRunning}}, at(12, 1, 14, 40),
			"peak 12-01 14:00 running, offpeak 12-02 02:00 waiting, mid 12-02 08:00 waiting"},
		{"three days", func(s *Schedule) { s.Days = 3; s.Windows = s.Windows[:2] }, nil, at(12, 1, 13, 0),
			"peak 12-01 14:00 waiting, offpeak 12-02 02:00 waiting, peak 12-02 14:00 waiting, offpeak 12-03 02:00 waiting, peak 12-03 14:00 waiting, offpeak 12-04 02:00 waiting"},
		{"a window through midnight", func(s *Schedule) {
			s.Windows = []tare.Window{{Name: "peak", From: 23 * time.Hour, To: time.Hour}, {Name: "mid", From: 8 * time.Hour, To: 10 * time.Hour}}
		}, nil, at(12, 2, 0, 30), "peak 12-01 23:00 due, mid 12-02 08:00 waiting"},
		{"spring forward: off-peak on the night the clocks skip 02:00", nil, nil, at(3, 28, 23, 0),
			"offpeak 03-29 03:00 waiting, mid 03-29 08:00 waiting, peak 03-29 14:00 waiting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schedule()
			if tt.edit != nil {
				tt.edit(&s)
			}
			slots := s.Cycle(tt.runs, tt.now)
			if got := layout(slots); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			for _, sl := range slots {
				if sl.At.Before(sl.Opens) || sl.At.Add(s.RunLength).After(sl.Closes) {
					t.Errorf("%s: start %s leaves no room for the load in %s–%s", sl.Key(), sl.At, sl.Opens, sl.Closes)
				}
			}
		})
	}
}

func TestCycleMissedWhy(t *testing.T) {
	s := schedule()
	runs := []tare.Run{
		{ID: "p", Protocol: "checkout", Window: "peak", StartedAt: at(12, 1, 14, 37), Status: tare.StatusComplete},
		{ID: "o", Protocol: "checkout", Window: "offpeak", StartedAt: at(12, 2, 2, 41), Status: tare.StatusInterrupted},
	}
	slots := s.Cycle(runs, at(12, 2, 9, 55))
	want := map[string]string{
		"offpeak": "run o was interrupted and the window passed",
		"mid":     "too late to fit the 10m0s load before the window closes",
	}
	for _, sl := range slots {
		if w, ok := want[sl.Window.Name]; ok && (sl.State != SlotMissed || sl.Why != w) {
			t.Errorf("%s: %s %q, want missed %q", sl.Window.Name, sl.State, sl.Why, w)
		}
	}
	if _, ok := Next(slots); ok {
		t.Errorf("every slot done or missed, yet Next has one")
	}
}

// TestSeededStart: the start inside a window depends on the seed, the
// protocol, the window and the day, and on nothing else: a restart draws
// the same one.
func TestSeededStart(t *testing.T) {
	s := schedule()
	first := s.Cycle(nil, at(12, 1, 13, 0))
	again := s.Cycle(nil, at(12, 1, 13, 30))
	if first[0].At != again[0].At {
		t.Errorf("start moved between two looks: %s then %s", first[0].At, again[0].At)
	}
	s.Seed = 8
	other := s.Cycle(nil, at(12, 1, 13, 0))
	s.Seed, s.Protocol = 7, "search"
	renamed := s.Cycle(nil, at(12, 1, 13, 0))
	if other[0].At == first[0].At && renamed[0].At == first[0].At {
		t.Errorf("seed and protocol do not move the start: %s", first[0].At)
	}
	// Over many days the starts spread over the window's room.
	s = schedule()
	s.Days, s.Windows = 200, s.Windows[:1]
	early, late := 0, 0
	for _, sl := range s.Cycle(nil, at(1, 1, 0, 0)) {
		off := sl.At.Sub(sl.Opens)
		if off < 55*time.Minute {
			early++
		} else {
			late++
		}
	}
	if early < 70 || late < 70 {
		t.Errorf("starts not spread over 1h50m of room: %d in the first 55 min, %d after", early, late)
	}
}

func TestScheduleValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Schedule)
		want string
	}{
		{"ok", func(*Schedule) {}, ""},
		{"too long", func(s *Schedule) { s.RunLength = 3 * time.Hour }, "the load takes 3h0m0s, longer than the peak window (14:00-16:00, 2h0m0s)"},
		{"no length", func(s *Schedule) { s.RunLength = 0 }, "has no length"},
		{"no id", func(s *Schedule) { s.Protocol = "" }, "protocol id is empty"},
		{"days", func(s *Schedule) { s.Days = 400 }, "days must be from 1 to 366"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schedule()
			tt.edit(&s)
			err := s.Validate()
			if (tt.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestScheduleConfig(t *testing.T) {
	s := schedule()
	s.Days = 3
	back, err := ScheduleFromConfig(s.Protocol, s.Config())
	if err != nil {
		t.Fatal(err)
	}
	if layout(back.Cycle(nil, at(12, 1, 13, 0))) != layout(s.Cycle(nil, at(12, 1, 13, 0))) || back.Seed != 7 || back.RunLength != s.RunLength {
		t.Errorf("round trip: %+v", back)
	}
	cfg := s.Config()
	cfg[ConfigWindows] = "lunch=12:00-13:00"
	if _, err := ScheduleFromConfig("x", cfg); err == nil || !strings.Contains(err.Error(), "protocol.windows") {
		t.Errorf("damaged windows: %v", err)
	}
}

func TestCron(t *testing.T) {
	s := schedule()
	s.Days = 3
	got := strings.Join(s.Cron([]string{"/usr/local/bin/tare", "protocol", "run", "/etc/tare/checkout.yaml", "--quiet"}, ""), "\n")
	want := `# tare protocol checkout: peak 14:00-16:00, offpeak 02:00-04:00, mid 08:00-10:00 (Europe/Paris), 3 days
# Each line starts at its window's opening; tare waits for the seeded start inside it, runs the
# window, stores it and exits. After the last day the lines do nothing: remove them then.
CRON_TZ=Europe/Paris
0 14 * * * /usr/local/bin/tare protocol run /etc/tare/checkout.yaml --quiet --window peak
0 2 * * * /usr/local/bin/tare protocol run /etc/tare/checkout.yaml --quiet --window offpeak
0 8 * * * /usr/local/bin/tare protocol run /etc/tare/checkout.yaml --quiet --window mid`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
