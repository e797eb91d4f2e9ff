package store

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
)

func TestDecodeHost(t *testing.T) {
	tests := []struct {
		name        string
		cpu, perCPU string
		want        *tare.HostSample
		bad         bool
	}{
		{"aggregate only", `{"cpu":-1,"user":40,"steal":12.5,"idle":47.5}`, "",
			&tare.HostSample{CPU: tare.CPUShares{CPU: -1, User: 40, Steal: 12.5, Idle: 47.5}}, false},
		{"per CPU", `{"cpu":-1}`, `[{"cpu":0,"steal":8},{"cpu":1,"iowait":2}]`,
			&tare.HostSample{CPU: tare.CPUShares{CPU: -1}, PerCPU: []tare.CPUShares{{CPU: 0, Steal: 8}, {CPU: 1, IOWait: 2}}}, false},
		{"empty per-CPU list", `{"cpu":-1}`, `[]`, &tare.HostSample{CPU: tare.CPUShares{CPU: -1}}, false},
		{"json null per CPU", `{"cpu":-1}`, `null`, &tare.HostSample{CPU: tare.CPUShares{CPU: -1}}, false},
		{"unknown keys are ignored", `{"cpu":-1,"guest":3}`, "", &tare.HostSample{CPU: tare.CPUShares{CPU: -1}}, false},
		{"aggregate not JSON", `steal=12`, "", nil, true},
		{"per CPU not a list", `{"cpu":-1}`, `{"cpu":0}`, nil, true},
		{"share not a number", `{"cpu":-1,"steal":"high"}`, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeHost(tt.cpu, tt.perCPU)
			if tt.bad {
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("decodeHost = %v, want an error wrapping ErrDecode", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decodeHost = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func FuzzDecodeHost(f *testing.F) {
	f.Add(`{"cpu":-1,"user":40,"steal":12.5}`, `[{"cpu":0,"steal":8}]`)
	f.Add(`{}`, ``)
	f.Add(`null`, `null`)
	f.Add(`{"cpu":1e400}`, `[1]`)
	f.Fuzz(func(t *testing.T, cpu, perCPU string) {
		h, err := decodeHost(cpu, perCPU)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		// What decodes encodes again to the same sample.
		tick := tare.Tick{Start: base, End: base, Host: h}
		args, err := tickArgs(nil, 1, 0, &tick)
		if err != nil {
			return // NaN cannot come out of JSON, but ±Inf-free floats can be large: fine
		}
		n := len(args)
		again, err := decodeHost(args[n-9].(string), args[n-8].(string)) // cpu and per_cpu, before the three ledger columns, blame and the three of the I/O evidence
		if err != nil || !reflect.DeepEqual(again.CPU, h.CPU) || len(again.PerCPU) != len(h.PerCPU) {
			t.Fatalf("round trip of %+v gave %+v, %v", h, again, err)
		}
	})
}

func TestTickArgsRejectsNaN(t *testing.T) {
	tick := makeTicks(2, 1)[0]
	tick.Host.CPU.Steal = math.NaN()
	if _, err := tickArgs(nil, 1, 0, &tick); err == nil {
		t.Error("a NaN share was encoded")
	}
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
		bad  bool
	}{
		{`{}`, nil, false},
		{`{"rate":"2/s"}`, map[string]string{"rate": "2/s"}, false},
		{`null`, nil, false},
		{`{"rate":2}`, nil, true},
		{`[`, nil, true},
	}
	for _, tt := range tests {
		got, err := decodeConfig(tt.in)
		if tt.bad != (err != nil) || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("decodeConfig(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Errorf("decodeConfig(%q) error %v does not wrap ErrDecode", tt.in, err)
		}
	}
}

// TestOwner: this process, as the host names it, survives the stored form;
// whether a named process is alive is host's TestProcessAlive.
func TestOwner(t *testing.T) {
	me := host.Processes{}.Self()
	if me.Boot == "" {
		t.Skip("no /proc here")
	}
	if o, ok := parseOwner(formatOwner(me)); !ok || o != me {
		t.Fatalf("parseOwner(%q) = %+v, %v; want %+v", formatOwner(me), o, ok, me)
	}
}

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"b/pid:[4026531836]/42/1000", true},
		{"", false},
		{"b/ns/42", false},
		{"b/ns/-1/5", false},
		{"b/ns/0/5", false},
		{"b/ns/x/5", false},
		{"b/ns/42/-5", false},
		{"/ns/42/5", false},
		{"b//42/5", false},
		{"b/ns/42/5/6", false},
	}
	for _, tt := range tests {
		if _, ok := parseOwner(tt.in); ok != tt.ok {
			t.Errorf("parseOwner(%q) ok = %v, want %v", tt.in, ok, tt.ok)
		}
	}
}

func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{"b/pid:[4026531836]/42/1000", "", "////", "a/b/1/18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, ok := parseOwner(s)
		if !ok {
			return
		}
		if again, ok := parseOwner(formatOwner(o)); !ok || again != o {
			t.Fatalf("parseOwner(%q) = %+v, which does not survive formatOwner (%q)", s, o, formatOwner(o))
		}
	})
}

func TestSummaryFixturesAreValid(t *testing.T) {
	// The fixtures must decode strictly into tare.Summary, or the round
	// trip would test less than it claims.
	for _, name := range []string{"summary_full.json", "summary_nulls.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var generic, typed map[string]any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		s := readSummaryFixture(t, name)
		out, _ := json.Marshal(s)
		if err := json.Unmarshal(out, &typed); err != nil {
			t.Fatal(err)
		}
		for k := range generic {
			if _, ok := typed[k]; !ok {
				t.Errorf("%s: key %q is not part of tare.Summary", name, k)
			}
		}
	}
}
