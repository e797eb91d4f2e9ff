package protocol

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// testKeys are load keys as tare's session gives them, a few of them.
var testKeys = Keys{"url": false, "method": false, "header": true, "headers": true, "body": false, "timeout": false,
	"rate": false, "arrival": false, "seed": false, "jobs": false, "max-inflight": false, "tick": false, "slo": false, "label": false,
	"thresholds.steal": false, "sweep.from": false, "sweep.to": false, "sweep.step": false}

func TestParsePlan(t *testing.T) {
	f, err := os.Open("testdata/checkout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ParsePlan("testdata/checkout.yaml", f, testKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "checkout" || p.Days != 3 || p.TZ != "Europe/Paris" || p.Loc.String() != "Europe/Paris" || p.DivergencePct != 25 {
		t.Errorf("id %q days %d tz %q (%v) divergence %g", p.ID, p.Days, p.TZ, p.Loc, p.DivergencePct)
	}
	var got []string
	for _, s := range p.Settings {
		got = append(got, s.Key+"="+s.Value+"@"+itoa(s.Line))
	}
	want := "url=http://127.0.0.1:8080/checkout@2 method=POST@3 header=Content-Type: application/json@5 header=X-Team: payments@6 " +
		`body={"cart": 42}@7 timeout=10s@8 rate=2/s@9 arrival=poisson@10 seed=7@11 jobs=500@12 max-inflight=200@13 tick=1s@14 ` +
		"slo=p95<=2s@15 thresholds.steal=15@17 sweep.from=1/s@26 sweep.to=20/s@27 sweep.step=2/s@28"
	if strings.Join(got, " ") != want {
		t.Errorf("settings\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	var ws []string
	for _, w := range p.Windows {
		ws = append(ws, w.Name+" "+FormatWindow(w))
	}
	if strings.Join(ws, ", ") != "peak 14:00-16:00, offpeak 02:00-04:00, mid 08:30-10:30" {
		t.Errorf("windows %v", ws)
	}
	if !p.Sweep {
		t.Error("the plan's sweep: section not seen")
	}
	if p.Line("windows.mid") != 22 || p.Line("thresholds.divergence") != 18 || p.Line("nothing") != 0 {
		t.Errorf("lines: windows.mid %d, thresholds.divergence %d", p.Line("windows.mid"), p.Line("thresholds.divergence"))
	}
}

func TestParsePlanDefaults(t *testing.T) {
	p, err := ParsePlan("/plans/nightly.yml", strings.NewReader("url: http://127.0.0.1:9/\n"), testKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "nightly" || p.Days != 1 || p.Loc != time.Local || p.TZ != "" || p.Sweep || len(p.Windows) != 3 || p.Windows[0].Name != tare.WindowPeak {
		t.Errorf("defaults: %+v", p)
	}
}

func TestParsePlanErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty", "", "plan p.yaml: the file is empty"},
		{"not a mapping", "- url\n", "plan p.yaml, line 1: a plan is a mapping"},
		{"unknown key", "url: x\nrps: 5\n", `plan p.yaml, line 2, key rps: unknown key "rps"; a plan takes arrival, body`},
		{"twice", "url: x\nrate: 1/s\nrate: 2/s\n", "plan p.yaml, line 3, key rate: rate is given twice (first at line 2)"},
		{"list for a scalar", "url: x\nrate: [1, 2]\n", "line 2, key rate: rate must be a single value; got a list"},
		{"no value", "url: x\nrate:\n", "line 2, key rate: rate has no value"},
		{"bad window", "url: x\nwindows:\n  peak: 2pm-4pm\n  mid: 08:00-10:00\n", `line 3, key windows.peak: a window must look like 14:00-16:00: time of day "2pm" is not HH:MM`},
		{"hour out of range", "url: x\nwindows: {peak: 14:00-25:00, mid: 08:00-10:00}\n", `time of day "25:00" is not HH:MM`},
		{"empty window", "url: x\nwindows: {peak: 14:00-14:00, mid: 08:00-10:00}\n", "is empty"},
		{"unknown window", "url: x\nwindows:\n  lunch: 12:00-13:00\n", `line 3, key windows.lunch: unknown window "lunch"; the protocol's windows are peak, offpeak and mid`},
		{"one window", "url: x\nwindows:\n  peak: 14:00-16:00\n", "line 2, key windows: give at least two windows"},
		{"days", "url: x\ndays: 0\n", `line 2, key days: days must be a whole number from 1 to 366; got "0"`},
		{"tz", "url: x\ntz: Mars/Olympus\n", `line 2, key tz: time zone "Mars/Olympus" is not an IANA name`},
		{"threshold", "url: x\nthresholds:\n  stael: 5\n", `line 3, key thresholds.stael: unknown threshold "stael"`},
		{"divergence", "url: x\nthresholds: {divergence: -3}\n", `key thresholds.divergence: divergence must be a percentage above 0`},
		{"sweep key", "url: x\nsweep:\n  form: 1/s\n", `line 3, key sweep.form: unknown key "form" in sweep`},
		{"sweep scalar", "url: x\nsweep: yes\n", "key sweep: sweep must be a mapping"},
		{"id", "url: x\nid: my protocol\n", `line 2, key id: protocol id "my protocol" must be letters`},
		{"no url", "rate: 2/s\n", "plan p.yaml, key url: the plan names no target"},
		{"syntax", "url: x\nrate: \"unterminated\n", "plan p.yaml, line 2: not valid YAML: found unexpected end of stream"},
		{"two documents", "url: x\n---\nurl: y\n", "line 2: more than one YAML document"},
		{"header list of lists", "url: x\nheader:\n  - [a, b]\n", "line 3, key header: each header must be a string; got a list"},
		{"windows word", "url: x\nwindows: quiet\n", `line 2, key windows: windows must be auto (chosen from the host's calendar) or a mapping`},
		{"another window's choice", "url: x\nwindows: {peak: quietest, mid: typical}\n", `line 2, key windows.peak: the peak window can only be the host's busiest hours (peak: busiest, or auto); "quietest" is another window's`},
		{"a word that is no choice", "url: x\nwindows: {offpeak: quietist, mid: typical}\n", `key windows.offpeak: a window must look like 14:00-16:00; got "quietist", or quietest (chosen from the host's calendar)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePlan("p.yaml", strings.NewReader(tt.yaml), testKeys, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrPlan) || tare.ErrorCode(err) != tare.EINVALID || tare.ErrorMessage(err) != err.Error() {
				t.Errorf("error %v: want it to wrap ErrPlan and an EINVALID *tare.Error with the same message", err)
			}
		})
	}
}

// TestParsePlanAuto: windows: auto chooses every window from the host's
// calendar, a window's choice word chooses that one, and the default
// window stands for each until then.
func TestParsePlanAuto(t *testing.T) {
	tests := []struct {
		yaml    string
		auto    string
		windows string
	}{
		{"url: x\nwindows: auto\n", "peak=busiest offpeak=quietest mid=typical", "peak 14:00-16:00, offpeak 02:00-04:00, mid 08:00-10:00"},
		{"url: x\nwindows: {offpeak: quietest, peak: 13:00-15:00}\n", "offpeak=quietest", "offpeak 02:00-04:00, peak 13:00-15:00"},
		{"url: x\nwindows: {peak: busiest, offpeak: auto, mid: 09:00-10:00}\n", "peak=busiest offpeak=quietest", "peak 14:00-16:00, offpeak 02:00-04:00, mid 09:00-10:00"},
		{"url: x\nwindows: {mid: typical, offpeak: 01:00-02:00}\n", "mid=typical", "mid 08:00-10:00, offpeak 01:00-02:00"},
		{"url: x\nwindows: {peak: 14:00-16:00, offpeak: 02:00-04:00}\n", "", "peak 14:00-16:00, offpeak 02:00-04:00"},
	}
	for _, tt := range tests {
		p, err := ParsePlan("p.yaml", strings.NewReader(tt.yaml), testKeys, nil)
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		var auto []string
		for _, a := range p.Auto {
			auto = append(auto, a.Window+"="+a.Choice)
		}
		if strings.Join(auto, " ") != tt.auto || WindowList(p.Windows) != tt.windows {
			t.Errorf("%q: auto %q, windows %q; want %q, %q", tt.yaml, auto, WindowList(p.Windows), tt.auto, tt.windows)
		}
	}
}

// TestParsePlanRetired: a retired key, anywhere in the plan, is ignored
// with a warning naming its line, its key and why, and is not listed among
// the keys to use; a misspelt key beside it is still an error.
func TestParsePlanRetired(t *testing.T) {
	retired := Retired{"thresholds.old": "the new threshold judges that"}
	keys := Keys{"url": false, "thresholds.steal": false} // as session gives them: the retired apart
	p, err := ParsePlan("p.yaml", strings.NewReader("url: http://127.0.0.1:9/\nthresholds:\n  steal: 5\n  old: 7\n"), keys, retired)
	if err != nil {
		t.Fatal(err)
	}
	want := "plan p.yaml, line 4, key thresholds.old: no longer used, and ignored: the new threshold judges that; remove it"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
	for _, s := range p.Settings {
		if s.Key == "thresholds.old" {
			t.Errorf("the retired key is among the settings: %+v", p.Settings)
		}
	}
	_, err = ParsePlan("p.yaml", strings.NewReader("url: x\nthresholds:\n  stael: 5\n"), keys, retired)
	if err == nil || !strings.HasSuffix(err.Error(), `unknown threshold "stael"; use one of steal or divergence`) {
		t.Errorf("error %v: want the thresholds to use, and not the retired one", err)
	}
}

func TestParsePlanAlias(t *testing.T) {
	p, err := ParsePlan("p.yaml", strings.NewReader("url: &u http://127.0.0.1:9/\nlabel: *u\n"), testKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Settings[1].Value != "http://127.0.0.1:9/" {
		t.Errorf("alias: %+v", p.Settings)
	}
}

func FuzzParsePlan(f *testing.F) {
	seed, err := os.ReadFile("testdata/checkout.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(seed), "", "url: x\n", "url: x\nwindows: {peak: 23:00-01:00, offpeak: 02:00-04:00}\n",
		"url: &a x\nlabel: *a\n", "- a\n- b\n", "url: x\ndays: 366\ntz: UTC\n", "{url: [x]}", "url: x\n---\n", "url: !!binary aGk=\n",
		"a: &a [*a]\n", "url: x\nsweep: {from: 1/s, to: 2/s}\n", "url: x\nthresholds: {divergence: 1e3}\n",
		"url: x\nwindows: auto\n", "url: x\nwindows: {offpeak: quietest, peak: busiest, mid: 08:00-10:00}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlan("fuzz.yaml", strings.NewReader(s), testKeys, Retired{"thresholds.old": "why"})
		if err != nil {
			if !errors.Is(err, ErrPlan) || tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("error %v does not wrap ErrPlan and EINVALID", err)
			}
			return
		}
		if !ValidID(p.ID) || len(p.Windows) < 2 || p.Days < 1 || p.Days > MaxDays || p.Loc == nil {
			t.Fatalf("accepted a plan out of range: %+v", p)
		}
		for _, w := range p.Windows {
			if Length(w) <= 0 || Length(w) >= 24*time.Hour {
				t.Fatalf("window %+v has length %v", w, Length(w))
			}
		}
		for _, a := range p.Auto {
			if autoChoice[a.Window] != a.Choice || !slices.ContainsFunc(p.Windows, func(w tare.Window) bool { return w.Name == a.Window }) {
				t.Fatalf("auto window %+v: not one of the plan's windows, or a choice it cannot make", a)
			}
		}
		for _, st := range p.Settings {
			if _, known := testKeys[st.Key]; st.Line < 1 || !known {
				t.Fatalf("setting %+v has no line or an unknown key", st)
			}
		}
	})
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return fmtInt(n/10) + string(rune('0'+n%10))
}

func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{"14:00-16:00", "23:30-01:00", "2:00-4:00", "14:00", "-", "24:00-01:00", "14:00-14:00", " 08:00 - 10:00 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		from, to, err := ParseSpan(s)
		if err != nil {
			if !errors.Is(err, ErrPlan) {
				t.Fatalf("error %v does not wrap ErrPlan", err)
			}
			return
		}
		w := tare.Window{From: from, To: to}
		if from < 0 || from >= 24*time.Hour || to < 0 || to >= 24*time.Hour || from == to {
			t.Fatalf("%q parsed to %v-%v", s, from, to)
		}
		f2, t2, err := ParseSpan(FormatWindow(w))
		if err != nil || f2 != from || t2 != to {
			t.Fatalf("round trip of %q through %q: %v-%v, %v", s, FormatWindow(w), f2, t2, err)
		}
	})
}
