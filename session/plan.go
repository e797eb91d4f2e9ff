package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/protocol"
)

// Plan is a protocol plan file read into a Spec: the window each of its
// slots runs, and the sweep when it has one.
type Plan struct {
	*protocol.Plan
	Path  string     // absolute
	Spec  *Spec      // the load, from tare run's defaults
	Sweep *SweepSpec // nil: one load per window
	given map[string]bool
}

// ReadPlan reads the plan file at path into a Spec: every setting sets the
// field its key names, and every error names the plan's line and key. A
// relative @file body is read from the plan's directory.
func ReadPlan(path string) (*Plan, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "plan %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, tare.Errorf(tare.ENOTFOUND, "no plan file %q", path)
		}
		return nil, tare.Errorf(tare.EINVALID, "plan %s: %w", path, err)
	}
	defer f.Close()

	pl := &Plan{Path: abs, Spec: NewSpec(10, 0, 30*time.Second), given: map[string]bool{}}
	sweep := NewSweepSpec()
	fields := byKey(pl.Spec.Fields(), sweep.Fields())
	keys := make(protocol.Keys, len(fields))
	for k, f := range fields {
		keys[k] = isList(f)
	}
	if pl.Plan, err = protocol.ParsePlan(path, f, keys); err != nil {
		return nil, err
	}
	for _, s := range pl.Settings {
		field, v := fields[s.Key], s.Value
		if field.Flag == "body" && strings.HasPrefix(v, "@") && !filepath.IsAbs(v[1:]) {
			v = "@" + filepath.Join(filepath.Dir(abs), v[1:])
		}
		if err := field.Set(v); err != nil {
			return nil, pl.SettingError(s, err, tare.ErrorMessage(err))
		}
		pl.given[field.Flag] = true
	}
	pl.Spec.Load.DurationDefault = !pl.given["duration"]
	if pl.Plan.Sweep {
		pl.Sweep = &sweep
		if _, err := sweep.Plan(); err != nil {
			return nil, pl.Error(err)
		}
		if pl.Spec.Judge.SLO == "" {
			return nil, pl.Errorf("sweep", nil, "a sweep needs an slo: to hold the rate to, like slo: p95<=2s")
		}
	}
	return pl, nil
}

// Config is the plan's settings, by flag, as its runs record them, with
// extra.
func (pl *Plan) Config(extra map[string]string) map[string]string {
	given := func(flag string) bool { return pl.given[flag] }
	cfg := RunConfig(pl.Spec.Fields(), given, extra)
	if pl.Sweep != nil {
		for k, v := range RunConfig(pl.Sweep.Fields(), given, nil) {
			cfg["sweep."+k] = v
		}
	}
	return cfg
}

// Error turns an error that names a flag ("--rate must …") into one that
// names the plan's line and key.
func (pl *Plan) Error(err error) error {
	msg := tare.ErrorMessage(err)
	fields := pl.Spec.Fields()
	if pl.Sweep != nil {
		fields = append(fields, pl.Sweep.Fields()...)
	}
	for i := len(pl.Settings) - 1; i >= 0; i-- {
		s := pl.Settings[i]
		for _, f := range fields {
			rest, ok := strings.CutPrefix(msg, "--"+f.Flag)
			if f.Key == s.Key && ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
				return pl.SettingError(s, err, f.word()+rest)
			}
		}
	}
	// A key the plan did not set, or no key at all: say it in the plan's
	// words.
	for _, name := range []string{"jobs", "duration", "url", "rate"} {
		msg = strings.ReplaceAll(msg, "--"+name, name+":")
	}
	return pl.Errorf("", err, "%s", msg)
}

// byKey indexes fields by their plan key; "headers" is header too.
func byKey(lists ...[]Field) map[string]Field {
	m := map[string]Field{}
	for _, l := range lists {
		for _, f := range l {
			if f.Key != "" {
				m[f.Key] = f
			}
		}
	}
	m["headers"] = m["header"]
	return m
}

func isList(f Field) bool {
	_, ok := f.Value.(*[]string)
	return ok
}
