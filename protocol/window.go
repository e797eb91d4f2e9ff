package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// DefaultWindows returns the three windows of the protocol (docs/json.md,
// Definitions), peak first.
func DefaultWindows() []tare.Window {
	return []tare.Window{
		{Name: tare.WindowPeak, From: 14 * time.Hour, To: 16 * time.Hour, Purpose: "worst-case latency: what users see by day"},
		{Name: tare.WindowOffpeak, From: 2 * time.Hour, To: 4 * time.Hour, Purpose: "best-case latency: the code on a quiet host"},
		{Name: tare.WindowMid, From: 8 * time.Hour, To: 10 * time.Hour, Purpose: "typical latency: the baseline for capacity math"},
	}
}

// defaultWindow returns the default window of that name.
func defaultWindow(name string) (tare.Window, bool) {
	for _, w := range DefaultWindows() {
		if w.Name == name {
			return w, true
		}
	}
	return tare.Window{}, false
}

// Length is how long the window lasts: To − From, or through midnight when
// To is not after From.
func Length(w tare.Window) time.Duration {
	if w.To > w.From {
		return w.To - w.From
	}
	return 24*time.Hour - w.From + w.To
}

// FormatWindow writes a window the way a plan file gives it: 14:00-16:00.
func FormatWindow(w tare.Window) string {
	return clock(w.From) + "-" + clock(w.To)
}

func clock(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// ParseSpan parses "HH:MM-HH:MM" into offsets from midnight. Its errors
// wrap ErrPlan.
func ParseSpan(s string) (from, to time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, badValue("a window must look like 14:00-16:00; got %q", s)
	}
	if from, err = ParseClock(a); err == nil {
		to, err = ParseClock(b)
	}
	if err != nil {
		return 0, 0, badValue("a window must look like 14:00-16:00: %v", err)
	}
	if from == to {
		return 0, 0, badValue("window %q is empty: its end must differ from its start", s)
	}
	return from, to, nil
}

// ParseClock parses a time of day, "HH:MM" (24-hour), into an offset from
// midnight. Its errors wrap ErrPlan.
func ParseClock(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || len(h) < 1 || len(h) > 2 || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, badValue("time of day %q is not HH:MM, like 02:00 or 14:30", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

// occurrence is the window's slot that opens on the given date (year,
// month, day taken in loc): wall-clock times, so daylight-saving changes
// keep 14:00 at 14:00.
func occurrence(w tare.Window, date time.Time, loc *time.Location) (opens, closes time.Time) {
	y, m, d := date.In(loc).Date()
	at := func(day int, off time.Duration) time.Time {
		return time.Date(y, m, day, int(off/time.Hour), int(off%time.Hour/time.Minute), 0, 0, loc)
	}
	opens = at(d, w.From)
	if w.To > w.From {
		return opens, at(d, w.To)
	}
	return opens, at(d+1, w.To)
}

// valueError is a bad value in a plan, before the plan error that names its
// line and key wraps it: its message is the value's problem alone.
type valueError struct{ msg string }

func badValue(format string, args ...any) error {
	return &valueError{msg: fmt.Sprintf(format, args...)}
}

func (e *valueError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrPlan) hold.
func (e *valueError) Is(target error) bool { return target == ErrPlan }
