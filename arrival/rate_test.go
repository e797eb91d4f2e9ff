package arrival

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64 // per second
		wantErr string  // substring of the error message
	}{
		{name: "per second", in: "200/s", want: 200},
		{name: "per minute", in: "12/m", want: 0.2},
		{name: "per hour", in: "3/h", want: 3.0 / 3600},
		{name: "fraction", in: "0.5/s", want: 0.5},
		{name: "min", in: "1500/min", want: 25},
		{name: "sec", in: "2/sec", want: 2},
		{name: "minute", in: "120/minute", want: 2},
		{name: "hours", in: "7200/hours", want: 2},
		{name: "hr", in: "36/hr", want: 0.01},
		{name: "bare number is per second", in: "200", want: 200},
		{name: "spaces", in: " 200 / s ", want: 200},
		{name: "upper case unit", in: "200/S", want: 200},
		{name: "exponent", in: "1e3/s", want: 1000},
		{name: "leading plus", in: "+5/s", want: 5},
		{name: "millisecond", in: "2/ms", want: 2000},
		{name: "go duration", in: "5/10s", want: 0.5},
		{name: "go compound duration", in: "3/1m30s", want: 3.0 / 90},
		{name: "max rate", in: "1e9/s", want: 1e9},

		{name: "word", in: "fast", wantErr: `rate must look like 200/s, 12/m or 3/h; got "fast"`},
		{name: "empty", in: "", wantErr: `got ""`},
		{name: "unit only", in: "/s", wantErr: "must look like"},
		{name: "slash only", in: "5/", wantErr: "must look like"},
		{name: "unknown unit", in: "5/parsec", wantErr: "must look like"},
		{name: "two slashes", in: "5/s/s", wantErr: "must look like"},
		{name: "zero duration", in: "5/0s", wantErr: "must look like"},
		{name: "negative duration", in: "5/-1s", wantErr: "must look like"},
		{name: "NaN", in: "NaN/s", wantErr: "must look like"},
		{name: "infinity", in: "inf", wantErr: "must look like"},
		{name: "hex float", in: "0x1p4/s", wantErr: "must look like"},
		{name: "underscore", in: "1_000/s", wantErr: "must look like"},
		{name: "trailing junk", in: "200x/s", wantErr: "must look like"},
		{name: "two dots", in: "1.2.3/s", wantErr: "must look like"},
		{name: "zero", in: "0/s", wantErr: `rate must be positive, like 200/s or 12/m; got "0/s"`},
		{name: "negative", in: "-5/s", wantErr: "must be positive"},
		{name: "underflows to zero", in: "1e-400/s", wantErr: "must be positive"},
		{name: "above max", in: "2e9/s", wantErr: `rate must be at most 1000000000/s; got "2e9/s"`},
		{name: "overflows", in: "1e400/s", wantErr: "at most"},
		{name: "per nanosecond is above max", in: "2/ns", wantErr: "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseRate(%q) = %v, want an error", tt.in, got)
				}
				if code := tare.ErrorCode(err); code != tare.EINVALID {
					t.Errorf("error code = %q, want %q", code, tare.EINVALID)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRate(%q): %v", tt.in, err)
			}
			if math.Abs(float64(got)-tt.want) > 1e-12*tt.want {
				t.Errorf("ParseRate(%q) = %v, want %v", tt.in, float64(got), tt.want)
			}
		})
	}
}

func TestRateString(t *testing.T) {
	tests := []struct {
		name string
		r    Rate
		want string
	}{
		{"per second", 200, "200/s"},
		{"fraction per second", 2.5, "2.5/s"},
		{"exactly one", 1, "1/s"},
		{"per minute", 0.2, "12/m"},
		{"half per second", 0.5, "30/m"},
		{"per hour", 3.0 / 3600, "3/h"},
		{"below one per hour", 0.5 / 3600, "0.5/h"},
		{"max", MaxRate, "1000000000/s"},
		{"zero", 0, "0/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.String(); got != tt.want {
				t.Errorf("Rate(%v).String() = %q, want %q", float64(tt.r), got, tt.want)
			}
		})
	}
}

func TestRateAsFlagAndText(t *testing.T) {
	var r Rate
	fs := flag.NewFlagSet("tare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&r, "rate", "arrival rate")
	if err := fs.Parse([]string{"--rate", "12/m"}); err != nil {
		t.Fatal(err)
	}
	if r != 0.2 {
		t.Errorf("--rate 12/m set %v, want 0.2", float64(r))
	}
	if err := fs.Parse([]string{"--rate", "fast"}); err == nil || !strings.Contains(err.Error(), `got "fast"`) {
		t.Errorf("--rate fast: error %v, want one quoting the value", err)
	}
	if got := r.Type(); got != "rate" {
		t.Errorf("Type() = %q", got)
	}

	var plan struct{ Rate Rate }
	if err := json.Unmarshal([]byte(`{"Rate": "3/h"}`), &plan); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"Rate":"3/h"}` {
		t.Errorf("round trip through JSON = %s", out)
	}
	err = json.Unmarshal([]byte(`{"Rate": "-1/s"}`), &plan)
	var terr *tare.Error
	if !errors.As(err, &terr) || terr.Code != tare.EINVALID {
		t.Errorf("unmarshal -1/s: error %v, want a *tare.Error with code %q", err, tare.EINVALID)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{
		"200/s", "12/m", "3/h", "0.5/s", "1500/min", "200", " 7 / hours ",
		"5/10s", "1/500ms", "1e9/s", "2e9/s", "0/s", "-1/s", "fast", "", "/",
		"NaN", "inf/s", "0x1p4/s", "1_0/s", "1e-400/s", "5/s/s", "1/1m30s", "3/µs",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("ParseRate(%q): error %v has code %q, want %q", s, err, tare.ErrorCode(err), tare.EINVALID)
			}
			return
		}
		v := float64(r)
		if !(v > 0) || v > MaxRate {
			t.Fatalf("ParseRate(%q) = %v, outside (0, %v]", s, v, MaxRate)
		}
		if v < 1e-300 {
			return // String's per-hour form of a subnormal rate need not survive
		}
		back, err := ParseRate(r.String())
		if err != nil {
			t.Fatalf("ParseRate(%q) = %v, whose String %q does not parse: %v", s, v, r.String(), err)
		}
		if rel := math.Abs(float64(back)-v) / v; rel > 1e-9 {
			t.Fatalf("ParseRate(%q) = %v, String %q parses back to %v", s, v, r.String(), float64(back))
		}
	})
}
