package arrival

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// MaxRate is the highest rate a process accepts, per second: one arrival a
// nanosecond, the resolution of the offsets.
const MaxRate = 1e9

// Rate is a mean arrival rate, per second. Its text form is a number over a
// unit of time, "200/s", "12/m", "3/h", and it implements flag.Value (and
// pflag.Value) and encoding.TextUnmarshaler, so flags and plan files parse it
// the same way.
type Rate float64

// ParseRate parses a rate: a positive number, then optionally "/" and a unit
// of time, with no unit meaning per second. The unit is s, m or h (also sec,
// min, hr, second, minute, hour and their plurals), a Go duration unit such
// as ms, or a whole Go duration: "5/10s" is half a request per second.
// Bad input is a *tare.Error with code tare.EINVALID whose message reads
// well after the flag name.
func ParseRate(s string) (Rate, error) {
	num, unit, hasUnit := strings.Cut(strings.TrimSpace(s), "/")
	num = strings.TrimSpace(num)
	per := time.Second
	if hasUnit {
		var ok bool
		if per, ok = parseUnit(unit); !ok {
			return 0, badRate(s)
		}
	}
	// ParseFloat alone would take "inf", "NaN", "0x1p4" and "1_000".
	if num == "" || strings.Trim(num, "0123456789.eE+-") != "" {
		return 0, badRate(s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil && !math.IsInf(v, 0) { // out of range is "too high" below
		return 0, badRate(s)
	}
	r := v / per.Seconds()
	switch {
	case !(r > 0):
		return 0, tare.Errorf(tare.EINVALID, "rate must be positive, like 200/s or 12/m; got %q", s)
	case r > MaxRate:
		return 0, tare.Errorf(tare.EINVALID, "rate must be at most %s; got %q", Rate(MaxRate), s)
	}
	return Rate(r), nil
}

func badRate(s string) error {
	return tare.Errorf(tare.EINVALID, "rate must look like 200/s, 12/m or 3/h; got %q", s)
}

// parseUnit reads the part after the slash.
func parseUnit(u string) (time.Duration, bool) {
	u = strings.ToLower(strings.TrimSpace(u))
	switch u {
	case "s", "sec", "secs", "second", "seconds":
		return time.Second, true
	case "m", "min", "mins", "minute", "minutes":
		return time.Minute, true
	case "h", "hr", "hrs", "hour", "hours":
		return time.Hour, true
	case "":
		return 0, false
	}
	if u[0] < '0' || u[0] > '9' {
		u = "1" + u // "ms" is one millisecond
	}
	d, err := time.ParseDuration(u)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// String formats r in the largest of per second, per minute or per hour
// that gives at least one: 200/s, 12/m, 3/h.
func (r Rate) String() string {
	v := float64(r)
	switch {
	case v >= 1 || v <= 0 || math.IsNaN(v):
		return formatNumber(v) + "/s"
	case v*60 >= 1:
		return formatNumber(v*60) + "/m"
	}
	return formatNumber(v*3600) + "/h"
}

// formatNumber prints ten significant digits at most, so 0.2·60 is 12, not
// 12.000000000000002.
func formatNumber(v float64) string {
	return strconv.FormatFloat(v, 'g', 10, 64)
}

// Set parses s into r, for flag.Value.
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Type names the value in pflag's usage text.
func (r *Rate) Type() string { return "rate" }

// UnmarshalText parses text as ParseRate does, for plan files.
func (r *Rate) UnmarshalText(text []byte) error { return r.Set(string(text)) }

// MarshalText writes r in the form UnmarshalText reads.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
