package settings

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
)

// TestValuesReadAsPflags: each kind parses, prints and names itself as
// pflag's own value of that kind, so --help, a bad flag's message and a
// run's recorded configuration read as they did when pflag held them.
func TestValuesReadAsPflags(t *testing.T) {
	tests := []struct {
		name   string
		ours   func() Value
		theirs func(fs *pflag.FlagSet) pflag.Value
		inputs []string // set in order; a list takes them all
	}{
		{"string", func() Value { return String(new(string)) }, func(fs *pflag.FlagSet) pflag.Value { fs.String("f", "", ""); return fs.Lookup("f").Value }, []string{"a b"}},
		{"strings", func() Value { return Strings(&[]string{"default"}) }, func(fs *pflag.FlagSet) pflag.Value {
			fs.StringArray("f", []string{"default"}, "")
			return fs.Lookup("f").Value
		}, []string{"X: 1", "Y: a,b"}},
		{"int", func() Value { return Int(new(int)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Int("f", 0, ""); return fs.Lookup("f").Value }, []string{"-42"}},
		{"int bad", func() Value { return Int(new(int)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Int("f", 0, ""); return fs.Lookup("f").Value }, []string{"many"}},
		{"ints", func() Value { return Ints(new([]int)) }, func(fs *pflag.FlagSet) pflag.Value { fs.IntSlice("f", nil, ""); return fs.Lookup("f").Value }, []string{"1,2", "3"}},
		{"uint64", func() Value { return Uint64(new(uint64)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Uint64("f", 0, ""); return fs.Lookup("f").Value }, []string{"-1"}},
		{"float64", func() Value { return Float64(new(float64)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Float64("f", 0, ""); return fs.Lookup("f").Value }, []string{"1e6"}},
		{"percent", func() Value { return Percent(new(float64)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Float64("f", 0, ""); return fs.Lookup("f").Value }, []string{"12.5"}},
		{"probability", func() Value { return Probability(new(float64)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Float64("f", 0, ""); return fs.Lookup("f").Value }, []string{"0.01"}},
		{"bool", func() Value { return Bool(new(bool)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Bool("f", false, ""); return fs.Lookup("f").Value }, []string{"maybe"}},
		{"duration", func() Value { return Duration(new(time.Duration)) }, func(fs *pflag.FlagSet) pflag.Value { fs.Duration("f", 0, ""); return fs.Lookup("f").Value }, []string{"1m30s"}},
		{"enum", func() Value { return Enum(new(string), "auto", "off") }, func(fs *pflag.FlagSet) pflag.Value { fs.String("f", "", ""); return fs.Lookup("f").Value }, []string{"off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := tt.ours(), tt.theirs(pflag.NewFlagSet("t", pflag.ContinueOnError))
			if ours.String() != theirs.String() || ours.Type() != theirs.Type() {
				t.Errorf("before: %q of type %q; pflag's %q of type %q", ours.String(), ours.Type(), theirs.String(), theirs.Type())
			}
			for _, in := range tt.inputs {
				errOurs, errTheirs := ours.Set(in), theirs.Set(in)
				if (errOurs == nil) != (errTheirs == nil) {
					t.Errorf("Set(%q): error %v; pflag's %v", in, errOurs, errTheirs)
				}
			}
			if ours.String() != theirs.String() {
				t.Errorf("after %q: %q; pflag's %q", tt.inputs, ours.String(), theirs.String())
			}
			if l, ok := theirs.(pflag.SliceValue); ok {
				if got, want := fmt.Sprint(ours.(pflag.SliceValue).GetSlice()), fmt.Sprint(l.GetSlice()); got != want {
					t.Errorf("items %s; pflag's %s", got, want)
				}
			}
		})
	}
}

// TestCheck: a value with a rule of its own is refused naming its field,
// whoever set it.
func TestCheck(t *testing.T) {
	share, p, word := 150.0, 0.0, "maybe"
	tests := []struct {
		field Field
		want  string
	}{
		{Field{Flag: "steal-ticks", Value: Percent(&share)}, "--steal-ticks must be a percentage from 0 to 100; got 150"},
		{Field{Flag: "latency-p", Value: Probability(&p)}, "--latency-p must be a probability above 0 and at most 1, like 0.01; got 0"},
		{Field{Flag: "sched-probe", Value: Enum(&word, "auto", "off")}, `--sched-probe must be auto or off; got "maybe"`},
		{Field{Flag: "fail-on", Value: Enum(&word, "polluted", "suspect", "slo")}, `--fail-on must be polluted, suspect or slo; got "maybe"`},
	}
	for _, tt := range tests {
		err := Check(Field{Flag: "ok", Value: Percent(new(float64))}, tt.field)
		if err == nil || err.Error() != tt.want || tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("%s: %v; want %q", tt.field.Flag, err, tt.want)
		}
	}
	if err := Check(Field{Flag: "retired", Value: Percent(&share), Retired: "gone"}); err != nil {
		t.Errorf("a retired field: %v; want it unchecked", err)
	}
}

// TestErrorWords: an error keeps the settings it names as names, so the
// command line and a plan each word them in their terms.
func TestErrorWords(t *testing.T) {
	key := func(flag string) string {
		if flag == "pid" {
			return Flag(flag) // no plan key
		}
		return flag + ":"
	}
	tests := []struct {
		name      string
		err       error
		flags     string // the command line's words
		plan      string // a plan's
		field     string
		planField string // the rest after the field, in the plan's words
	}{
		{"one field", Errorf("tick", "must be %s or more; got %s", 100*time.Millisecond, 10*time.Millisecond),
			"--tick must be 100ms or more; got 10ms", "tick: must be 100ms or more; got 10ms", "tick", " must be 100ms or more; got 10ms"},
		{"names another", Errorf("stages", "sets the rate of every moment: drop %s %s", Name("rate"), "2/s"),
			"--stages sets the rate of every moment: drop --rate 2/s", "stages: sets the rate of every moment: drop rate: 2/s", "stages", " sets the rate of every moment: drop rate: 2/s"},
		{"about several", Errorf("", "give one target: %s or %s (not %s)", Name("url"), Name("queue"), Name("pid")),
			"give one target: --url or --queue (not --pid)", "give one target: url: or queue: (not --pid)", "", ""},
		{"a colon", Errorf("http2", ": the server chose %s", "http/1.1"), "--http2: the server chose http/1.1", "http2:: the server chose http/1.1", "http2", ": the server chose http/1.1"},
		{"wrong", Wrong("jobs", "a whole number", `"many"`), `--jobs must be a whole number; got "many"`, `jobs: must be a whole number; got "many"`, "jobs", ` must be a whole number; got "many"`},
		{"flagged, the field first", Flagged(tare.Errorf(tare.EINVALID, "rate must be positive; got %q", "0/s"), "rate"),
			`--rate must be positive; got "0/s"`, `rate: must be positive; got "0/s"`, "rate", ` must be positive; got "0/s"`},
		{"flagged, another package's flags", Flagged(tare.Errorf(tare.EINVALID, "--http2 needs https://, or give --h2c; 100%% sure"), "url"),
			"--url: --http2 needs https://, or give --h2c; 100% sure", "url:: http2: needs https://, or give h2c:; 100% sure", "url", ": http2: needs https://, or give h2c:; 100% sure"},
		{"flagged, the first word", Flagged(tare.Errorf(tare.EINVALID, "prompts file x: empty"), ""),
			"--prompts file x: empty", "prompts: file x: empty", "prompts", " file x: empty"},
		{"another package's message", tare.Errorf(tare.EINVALID, "--to must be at least --from (10/s); got 5/s"),
			"--to must be at least --from (10/s); got 5/s", "to: must be at least from: (10/s); got 5/s", "to", " must be at least from: (10/s); got 5/s"},
		{"another package's list", tare.Errorf(tare.EINVALID, "--http2, --h2c and --max-streams apply to --url"),
			"--http2, --h2c and --max-streams apply to --url", "http2:, h2c: and max-streams: apply to url:", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tare.ErrorMessage(tt.err); got != tt.flags {
				t.Errorf("command line: %q; want %q", got, tt.flags)
			}
			e := As(tt.err)
			if got := e.Words(key); got != tt.plan {
				t.Errorf("plan: %q; want %q", got, tt.plan)
			}
			if e.Field != tt.field || tt.field != "" && e.Rest(key) != tt.planField {
				t.Errorf("field %q, rest %q; want %q, %q", e.Field, e.Rest(key), tt.field, tt.planField)
			}
		})
	}
	cause := errors.New("disk")
	if err := Flagged(tare.Errorf(tare.ENOTFOUND, "cgroup gone: %w", cause), "cgroup"); !errors.Is(err, cause) || tare.ErrorCode(err) != tare.ENOTFOUND {
		t.Errorf("flagged: %v, code %s; want the cause kept and its code", err, tare.ErrorCode(err))
	}
}

// TestRecord: the settings given, as a run records them: lists one item a
// line, credentials redacted, extra added.
func TestRecord(t *testing.T) {
	headers, pids, url, token := []string{"Authorization: Bearer s3cret", "X-Team: a"}, []int{12, 34}, "http://u:pw@127.0.0.1:9/", "s3cret"
	fields := []Field{
		{Flag: "header", Value: Strings(&headers)},
		{Flag: "pid", Value: Ints(&pids)},
		{Flag: "url", Value: String(&url)},
		{Flag: "api-token", Value: String(&token)},
		{Flag: "unset", Value: String(new(string))},
	}
	got := Record(Given(fields, func(flag string) bool { return flag != "unset" }), map[string]string{"protocol.plan": "/p.yaml"})
	want := map[string]string{
		"header": "Authorization: " + tare.Redacted + "\nX-Team: a", "pid": "12\n34",
		"url": tare.RedactConfig(map[string]string{"url": url})["url"], "api-token": tare.Redacted, "protocol.plan": "/p.yaml",
	}
	if !maps.Equal(got, want) {
		t.Errorf("recorded\n%v\nwant\n%v", got, want)
	}
	if strings.Contains(fmt.Sprint(got), "s3cret") {
		t.Errorf("a secret recorded: %v", got)
	}
}
