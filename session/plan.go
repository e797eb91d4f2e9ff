package session

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/settings"
)

// Plan is a protocol plan file read into a Spec: the window each of its
// slots runs, and the sweep when it has one.
type Plan struct {
	*protocol.Plan
	Path  string     // absolute
	Spec  *Spec      // the load, from tare run's defaults
	Sweep *SweepSpec // nil: one load per window
	// Chosen are the windows ChooseWindows chose from the host's
	// calendar, with their evidence.
	Chosen []tare.WindowChoice
	given  map[string]bool
}

// ReadPlan reads the plan file at path into a Spec: every setting sets the
// field its key names, and every error names the plan's line and key; a
// retired key is ignored, and said in Warnings. A
// relative @file body, targets, prompts, CA, certificate or key file is
// read from the plan's directory, wherever tare runs from (cron starts it in $HOME).
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
	keys, retired := make(protocol.Keys, len(fields)), protocol.Retired{}
	for k, f := range fields {
		if f.Retired != "" {
			retired[k] = f.Retired
			continue
		}
		keys[k] = f.List()
	}
	if pl.Plan, err = protocol.ParsePlan(path, f, keys, retired); err != nil {
		return nil, err
	}
	for _, s := range pl.Settings {
		field, v := fields[s.Key], s.Value
		switch dir := filepath.Dir(abs); {
		case field.Flag == "body" && strings.HasPrefix(v, "@") && !filepath.IsAbs(v[1:]):
			v = "@" + filepath.Join(dir, v[1:])
		case slices.Contains([]string{"targets", "prompts", "unix-socket", "cacert", "cert", "key"}, field.Flag) && v != "" && !filepath.IsAbs(v):
			v = filepath.Join(dir, v)
		}
		if err := field.Value.Set(v); err != nil {
			msg := tare.ErrorMessage(err) // the value's own words, when it has them
			if _, own := errors.AsType[*tare.Error](err); !own {
				msg = field.Word() + settings.As(settings.Invalid(field.Flag, field.Value, v, err)).Rest(pl.name)
			}
			return nil, pl.SettingError(s, err, msg)
		}
		pl.given[field.Flag] = true
	}
	pl.Spec.Load.DurationDefault, pl.Spec.Load.RateDefault = !pl.given["duration"], !pl.given["rate"]
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

// Schedule is the plan's schedule, with the protocol id, the time zone
// and the days the command line gives instead of the plan's ("" and 0:
// the plan's own). Windows to choose from the calendar (windows: auto)
// are the defaults until ChooseWindows sets them.
func (pl *Plan) Schedule(id, tz string, days int) (protocol.Schedule, error) {
	id = cmp.Or(id, pl.ID)
	if !protocol.ValidID(id) {
		return protocol.Schedule{}, settings.Errorf("id", "%q must be letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	loc := pl.Loc
	if tz != "" {
		var err error
		if loc, err = protocol.LoadTZ(tz); err != nil {
			return protocol.Schedule{}, Flagged(err, "tz")
		}
	}
	switch {
	case days == 0:
		days = pl.Days
	case days < 1 || days > protocol.MaxDays:
		return protocol.Schedule{}, settings.Errorf("days", "must be from 1 to %d; got %d", protocol.MaxDays, days)
	}
	s := protocol.Schedule{Protocol: id, Windows: slices.Clone(pl.Windows), Days: days, Location: loc, Seed: pl.Spec.Load.Seed, RunLength: pl.runLength()}
	if len(pl.Auto) > 0 {
		return s, nil // validated once ChooseWindows has set the windows
	}
	return s, s.Validate()
}

// runLength is how long one window takes: the load, its drain and the
// sampling tail, or every step of a sweep with its pauses.
func (pl *Plan) runLength() time.Duration {
	spec := pl.Spec
	one := spec.Load.Length()
	one += one/10 + 2*spec.Host.Tick + min(spec.Target.Timeout, 30*time.Second)
	if pl.Sweep == nil {
		return one
	}
	plan, _ := pl.Sweep.Plan()
	return time.Duration(plan.MaxSteps()) * (one + pl.Sweep.Cooldown)
}

// SlotRun is the run of one slot of schedule s: the plan's label (marked
// for a dry run), the window, the protocol, and the configuration with
// the schedule in it, so that tare protocol status can read it back.
func (pl *Plan) SlotRun(s protocol.Schedule, slot protocol.Slot, dry bool) tare.Run {
	extra := s.Config()
	extra["protocol.plan"] = pl.Path
	if len(pl.Chosen) > 0 {
		b, _ := json.Marshal(pl.Chosen) // plain fields: it cannot fail
		extra[protocol.ConfigCalendar] = string(b)
	}
	label := cmp.Or(pl.Spec.Load.Label, pl.ID)
	if dry {
		extra["protocol.dry_run"] = "true"
		label = "dry run: " + label
	}
	return tare.Run{Label: label, Window: slot.Window.Name, Protocol: s.Protocol, Config: pl.Config(extra)}
}

// Compare compares protocol id's stored windows by the plan's rules and
// slo; nil, with the number of complete windows, when fewer than two are.
func (pl *Plan) Compare(ctx context.Context, st tare.Store, id string, slo judge.SLO) (*tare.Comparison, int, error) {
	runs, err := st.FindRuns(ctx, tare.RunFilter{Protocol: id})
	if err != nil {
		return nil, 0, err
	}
	inputs, sweeps, err := LoadWindows(ctx, st, runs)
	if err != nil || len(inputs) < 2 {
		return nil, len(inputs), err
	}
	c := Compare(inputs, sweeps, judge.ProtocolRules{DivergencePct: pl.DivergencePct, SLO: slo})
	if strings.Contains(id, "-dry-") {
		c.Warnings = append(c.Warnings, "a dry run: the windows ran back to back, not at their hours; it shows the plan works, not how the host varies by the hour")
	}
	return c, len(inputs), nil
}

// Config is the plan's settings, by flag, as its runs record them, with
// extra.
func (pl *Plan) Config(extra map[string]string) map[string]string {
	given := func(flag string) bool { return pl.given[flag] }
	cfg := settings.Record(settings.Given(pl.Spec.Fields(), given), extra)
	if pl.Sweep != nil {
		for k, v := range settings.Record(settings.Given(pl.Sweep.Fields(), given), nil) {
			cfg["sweep."+k] = v
		}
	}
	return cfg
}

// fields are every field of the plan.
func (pl *Plan) fields() []settings.Field {
	fields := pl.Spec.Fields()
	if pl.Sweep != nil {
		fields = append(fields, pl.Sweep.Fields()...)
	}
	return fields
}

// name words a setting as a plan does: by its key ("rate:"), or by its
// flag when a plan cannot set it.
func (pl *Plan) name(flag string) string {
	for _, f := range pl.fields() {
		if f.Flag == flag && f.Key != "" {
			return f.Key + ":"
		}
	}
	return settings.Flag(flag)
}

// Error words an error about the spec in the plan's terms: at the line
// and key of the setting at fault when the plan set it ("stages sets the
// rate of every moment: drop rate: 2/s"), each setting by its key.
func (pl *Plan) Error(err error) error {
	e := settings.As(err)
	if e.Field != "" {
		for i := len(pl.Settings) - 1; i >= 0; i-- {
			s := pl.Settings[i]
			for _, f := range pl.fields() {
				if f.Flag == e.Field && f.Key == s.Key {
					return pl.SettingError(s, err, f.Word()+e.Rest(pl.name))
				}
			}
		}
	}
	// A key the plan did not set, or no key at all.
	return pl.Errorf("", err, "%s", e.Words(pl.name))
}

// byKey indexes fields by their plan key; "headers" is header too.
func byKey(lists ...[]settings.Field) map[string]settings.Field {
	m := map[string]settings.Field{}
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
