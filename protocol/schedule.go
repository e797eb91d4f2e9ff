package protocol

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// MaxDays bounds a protocol's cycles: a year of daily windows.
const MaxDays = 366

// Schedule is when a protocol's windows run.
type Schedule struct {
	Protocol string        // the protocol id every run is stored with
	Windows  []tare.Window // in the order they are listed
	Days     int           // how many times each window runs, on consecutive days; 1 when 0
	Location *time.Location
	Seed     uint64 // draws each slot's start inside its window
	// RunLength is how long one window's load lasts, drain included: a
	// slot's start leaves room for it before the window closes.
	RunLength time.Duration
}

// Validate reports what is wrong with the schedule as a *tare.Error with
// code EINVALID: a run longer than a window cannot fit in it.
func (s Schedule) Validate() error {
	switch {
	case s.Protocol == "":
		return tare.Errorf(tare.EINVALID, "protocol id is empty: give one (id: in the plan)")
	case len(s.Windows) == 0:
		return tare.Errorf(tare.EINVALID, "protocol %s has no windows", s.Protocol)
	case s.Days < 0 || s.Days > MaxDays:
		return tare.Errorf(tare.EINVALID, "days must be from 1 to %d; got %d", MaxDays, s.Days)
	case s.RunLength <= 0:
		return tare.Errorf(tare.EINVALID, "the load of each window has no length: give a duration, or jobs at a rate")
	}
	for _, w := range s.Windows {
		if s.RunLength > Length(w) {
			return tare.Errorf(tare.EINVALID, "the load takes %s, longer than the %s window (%s, %s): shorten the load or widen the window",
				s.RunLength.Round(time.Second), w.Name, FormatWindow(w), Length(w))
		}
	}
	return nil
}

func (s Schedule) days() int { return max(s.Days, 1) }

func (s Schedule) loc() *time.Location { return cmp.Or(s.Location, time.Local) }

// SlotState is where a slot stands.
type SlotState string

// The states of a slot.
const (
	SlotDone    SlotState = "done"    // a complete run of the protocol started in it
	SlotRunning SlotState = "running" // a run of the protocol is going in it, from another process
	SlotDue     SlotState = "due"     // its start has come and the load still fits: run it now
	SlotWaiting SlotState = "waiting" // its start is to come
	SlotMissed  SlotState = "missed"  // it closed, or the load no longer fits, with no complete run
)

// Slot is one window on one day of the protocol.
type Slot struct {
	Window tare.Window
	Day    int       // 1 .. Days
	Opens  time.Time // the window's start that day
	Closes time.Time
	At     time.Time // the seeded start of the load inside the window
	State  SlotState
	Run    *tare.Run // the run that did it (done, running), or the last that tried (missed, due)
	Why    string    // for a missed slot: why, in words
}

// Key names a slot: window and the date it opens.
func (s Slot) Key() string { return s.Window.Name + "@" + s.Opens.Format("2006-01-02") }

// Cycle lays out every slot of the protocol and its state at now, from the
// protocol's stored runs (any order; runs of other protocols and windows
// are ignored). Slots are in order of their seeded start.
//
// The protocol begins with its first stored run, or now when there is none:
// each window's slots are its first Days occurrences closing after the
// first run started, or, before any run, in which the load started now
// would still fit.
func (s Schedule) Cycle(runs []tare.Run, now time.Time) []Slot {
	mine := make([]tare.Run, 0, len(runs))
	for _, r := range runs {
		if r.Protocol == s.Protocol && r.Window != "" {
			mine = append(mine, r)
		}
	}
	// cutoff: a slot counts when it closes after it.
	cutoff := now.Add(s.RunLength - time.Nanosecond)
	for _, r := range mine {
		if !r.StartedAt.IsZero() && !r.StartedAt.After(cutoff) {
			cutoff = r.StartedAt
		}
	}
	loc := s.loc()
	var slots []Slot
	for _, w := range s.Windows {
		// A window through midnight may have opened the day before.
		day := cutoff.In(loc).AddDate(0, 0, -1)
		for n := 0; n < s.days(); day = day.AddDate(0, 0, 1) {
			opens, closes := occurrence(w, day, loc)
			if !closes.After(cutoff) {
				continue
			}
			n++
			slot := Slot{Window: w, Day: n, Opens: opens, Closes: closes}
			slot.At = s.start(slot)
			s.state(&slot, mine, now)
			slots = append(slots, slot)
		}
	}
	slices.SortStableFunc(slots, func(a, b Slot) int { return a.At.Compare(b.At) })
	return slots
}

// start is the slot's seeded start: an offset in [0, length − run length]
// drawn from the seed, the protocol, the window and the date, to the
// second.
func (s Schedule) start(slot Slot) time.Time {
	room := slot.Closes.Sub(slot.Opens) - s.RunLength
	if room <= 0 {
		return slot.Opens
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s", s.Protocol, slot.Window.Name, slot.Opens.Format("2006-01-02"))
	rng := rand.New(rand.NewPCG(s.Seed, h.Sum64()))
	off := time.Duration(rng.Int64N(int64(room/time.Second)+1)) * time.Second
	return slot.Opens.Add(off)
}

// state sets the slot's state from the runs that started inside it.
func (s Schedule) state(slot *Slot, runs []tare.Run, now time.Time) {
	var tried *tare.Run
	for i := range runs {
		r := &runs[i]
		if r.Window != slot.Window.Name || r.StartedAt.Before(slot.Opens) || !r.StartedAt.Before(slot.Closes) {
			continue
		}
		switch r.Status {
		case tare.StatusComplete:
			slot.State, slot.Run = SlotDone, r
			return
		case tare.StatusRunning:
			slot.State, slot.Run = SlotRunning, r
		default:
			if tried == nil || r.StartedAt.After(tried.StartedAt) {
				tried = r
			}
		}
	}
	if slot.State == SlotRunning {
		return
	}
	slot.Run = tried
	switch {
	case now.Add(s.RunLength).After(slot.Closes):
		slot.State = SlotMissed
		slot.Why = "the window passed while tare was not running"
		if now.Before(slot.Closes) {
			slot.Why = fmt.Sprintf("too late to fit the %s load before the window closes", s.RunLength.Round(time.Second))
		}
		if tried != nil {
			slot.Why = fmt.Sprintf("run %s was %s and the window passed", tried.ID, tried.Status)
		}
	case !now.Before(slot.At):
		slot.State = SlotDue
	default:
		slot.State = SlotWaiting
	}
}

// Next returns the slot to act on: the earliest due one, else the earliest
// waiting or running one (to wait for), and false when every slot is done
// or missed: the cycle is over.
func Next(slots []Slot) (Slot, bool) {
	var next *Slot
	for i := range slots {
		sl := &slots[i]
		switch sl.State {
		case SlotDue:
			return *sl, true
		case SlotWaiting, SlotRunning:
			if next == nil || waitUntil(*sl).Before(waitUntil(*next)) {
				next = sl
			}
		}
	}
	if next == nil {
		return Slot{}, false
	}
	return *next, true
}

// waitUntil is when a slot next needs looking at: its start, or for one
// another process is running, its close.
func waitUntil(s Slot) time.Time {
	if s.State == SlotRunning {
		return s.Closes
	}
	return s.At
}

// The keys of Config.
const (
	ConfigWindows   = "protocol.windows"
	ConfigDays      = "protocol.days"
	ConfigTZ        = "protocol.tz"
	ConfigSeed      = "protocol.seed"
	ConfigRunLength = "protocol.run_length"
	// ConfigCalendar holds the windows chosen from the host's calendar,
	// with their evidence (JSON []tare.WindowChoice); absent when the plan
	// gave every window as times.
	ConfigCalendar = "protocol.calendar"
)

// Config records the schedule in a run's configuration, so that the
// protocol's status can be read back from the store alone.
func (s Schedule) Config() map[string]string {
	var ws []string
	for _, w := range s.Windows {
		ws = append(ws, w.Name+"="+FormatWindow(w))
	}
	return map[string]string{
		ConfigWindows:   strings.Join(ws, ","),
		ConfigDays:      strconv.Itoa(s.days()),
		ConfigTZ:        s.loc().String(),
		ConfigSeed:      strconv.FormatUint(s.Seed, 10),
		ConfigRunLength: s.RunLength.String(),
	}
}

// ScheduleFromConfig reads back the schedule Config recorded in a run of
// protocol id. It wraps ErrPlan when the record is missing or damaged.
func ScheduleFromConfig(id string, cfg map[string]string) (Schedule, error) {
	s := Schedule{Protocol: id}
	bad := func(key string, err error) (Schedule, error) {
		return Schedule{}, badValue("protocol %s: run configuration %s %q: %v", id, key, cfg[key], err)
	}
	for _, part := range strings.Split(cfg[ConfigWindows], ",") {
		name, span, ok := strings.Cut(part, "=")
		w, known := defaultWindow(name)
		if !ok || !known {
			return bad(ConfigWindows, fmt.Errorf("want peak=14:00-16:00,…"))
		}
		var err error
		if w.From, w.To, err = ParseSpan(span); err != nil {
			return bad(ConfigWindows, err)
		}
		s.Windows = append(s.Windows, w)
	}
	var err error
	if s.Days, err = strconv.Atoi(cfg[ConfigDays]); err != nil {
		return bad(ConfigDays, err)
	}
	if s.Location, err = time.LoadLocation(cfg[ConfigTZ]); err != nil {
		return bad(ConfigTZ, err)
	}
	if s.Seed, err = strconv.ParseUint(cfg[ConfigSeed], 10, 64); err != nil {
		return bad(ConfigSeed, err)
	}
	if s.RunLength, err = time.ParseDuration(cfg[ConfigRunLength]); err != nil {
		return bad(ConfigRunLength, err)
	}
	return s, nil
}
