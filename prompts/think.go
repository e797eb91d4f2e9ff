package prompts

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Think is the time a user takes between an answer and their next turn:
// fixed, or drawn per turn from an exponential of that mean or a uniform
// range, a pure function of the seed, the conversation and the turn.
type Think struct {
	Kind     string        // "fixed", "exp" or "uniform"
	Min, Max time.Duration // fixed: Min; exp: Min the mean; uniform: the range
}

const thinkForm = `must be a duration (fixed, like 2s), exp:MEAN (exponential, like exp:2s) or uniform:MIN..MAX (like uniform:1s..5s)`

// maxThink bounds a think time, drawn or given.
const maxThink = time.Hour

// ParseThink reads a think time. Bad input is a *tare.Error with code
// tare.EINVALID whose message reads well after the flag's name.
func ParseThink(s string) (Think, error) {
	bad := tare.Errorf(tare.EINVALID, "%s; got %q", thinkForm, s)
	kind, rest, dist := strings.Cut(strings.TrimSpace(s), ":")
	if !dist {
		kind, rest = "fixed", kind
	}
	var t Think
	var err error
	switch kind {
	case "fixed", "exp":
		t.Min, err = time.ParseDuration(strings.TrimSpace(rest))
		t.Max = t.Min
	case "uniform":
		lo, hi, ok := strings.Cut(rest, "..")
		if !ok {
			return Think{}, bad
		}
		t.Min, err = time.ParseDuration(strings.TrimSpace(lo))
		if err == nil {
			t.Max, err = time.ParseDuration(strings.TrimSpace(hi))
		}
	default:
		return Think{}, bad
	}
	if err != nil || t.Min < 0 || t.Max < t.Min || t.Max > maxThink {
		return Think{}, bad
	}
	t.Kind = kind
	return t, nil
}

// String is the form ParseThink reads.
func (t Think) String() string {
	switch t.Kind {
	case "exp":
		return "exp:" + t.Min.String()
	case "uniform":
		return fmt.Sprintf("uniform:%v..%v", t.Min, t.Max)
	}
	return t.Min.String()
}

// Draw is the think time before turn (from 1) of conversation conv.
func (t Think) Draw(seed, conv uint64, turn int) time.Duration {
	u := uniform(seed, conv, streamThink+uint64(turn)<<8)
	switch t.Kind {
	case "exp":
		return min(time.Duration(-math.Log(1-u)*float64(t.Min)), t.Longest())
	case "uniform":
		return t.Min + time.Duration(u*float64(t.Max-t.Min))
	}
	return t.Min
}

// Longest is the longest think time Draw gives: an exponential's is cut
// at ten times its mean.
func (t Think) Longest() time.Duration {
	if t.Kind == "exp" {
		return min(10*t.Min, maxThink)
	}
	return t.Max
}
