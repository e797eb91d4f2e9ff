package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tare-dev/tare"
)

// ErrPlan is wrapped by every error about a plan file.
var ErrPlan = errors.New("bad plan")

// MaxPlanSize bounds a plan file: a plan is a screenful, not a data file.
const MaxPlanSize = 1 << 20

// Plan is a protocol plan file: the target and the load, as `tare run`
// takes them, the windows, the days, the time zone, the SLO and the
// thresholds. A plan looks like this:
//
//	id: checkout                  # the protocol id; default: the file's name
//	url: http://127.0.0.1:8080/checkout
//	method: POST
//	header: ["Content-Type: application/json"]
//	body: '{"cart": 42}'
//	rate: 2/s
//	jobs: 500
//	slo: p95<=2s
//	thresholds: {steal: 10, divergence: 30}
//	windows: {peak: 14:00-16:00, offpeak: 02:00-04:00, mid: 08:00-10:00}
//	# or windows: auto, or offpeak: quietest, peak: busiest, mid: typical:
//	# chosen from the calendar of the host (tare check --every)
//	days: 3
//	tz: Europe/Paris
//	sweep: {from: 1/s, to: 40/s, step: 4/s}   # a capacity sweep per window
//
// The protocol's own keys are parsed here; the load's (url, rate,
// thresholds.steal, sweep.from, …) are the caller's, named by the keys
// ParsePlan is given, and kept in Settings for it to set the fields they
// name; each remembers its line, so an error still names the line and the
// key.
type Plan struct {
	File string // the plan's file name, for messages
	ID   string

	// Settings are the values of the load's keys, in file order; a list's
	// items one setting each.
	Settings []Setting
	// Sweep says the plan has a sweep: section (its settings are among
	// Settings, keyed sweep.from, …).
	Sweep bool

	Windows []tare.Window
	// Auto are the windows to choose from the host's calendar (windows:
	// auto, offpeak: quietest); until they are chosen, the default window
	// of that name stands for each in Windows.
	Auto []Auto
	Days int            // 1 unless the plan says
	TZ   string         // as written; "" for the local zone
	Loc  *time.Location // the zone; time.Local unless the plan says
	// DivergencePct is the protocol verdict's threshold (thresholds:
	// divergence); 0 for the default.
	DivergencePct float64
	// Warnings are about retired keys the plan holds, each naming its
	// line and key: they were ignored.
	Warnings []string

	keys    Keys
	retired Retired
	lines   map[string]int // key path → line
}

// Keys are the load's keys a plan may hold, by key path ("rate",
// "thresholds.steal", "sweep.from"): true for a key that takes a list.
type Keys map[string]bool

// Retired are the keys a plan may still hold that no longer do anything,
// by key path, each with why: such a key is ignored with a warning
// (Plan.Warnings), never an error, and never listed among the keys to use.
type Retired map[string]string

// Setting is one value of a load's key from a plan.
type Setting struct {
	Key   string // the key path as written: "rate", "thresholds.steal"
	Value string
	Line  int
}

// Line returns the line of a key path ("days", "windows.peak"), 0 when the
// plan does not have it.
func (p *Plan) Line(key string) int { return p.lines[key] }

// Errorf returns an error about the plan's key at its line, wrapping
// ErrPlan, err when it is not nil, and an *tare.Error with code EINVALID
// holding the whole message.
func (p *Plan) Errorf(key string, err error, format string, args ...any) error {
	return newPlanError(p.File, p.Line(key), key, err, format, args...)
}

// SettingError is an error about a setting's value, at its line and key,
// with the message msg.
func (p *Plan) SettingError(s Setting, err error, msg string) error {
	return newPlanError(p.File, s.Line, s.Key, err, "%s", msg)
}

// PlanError is a problem in a plan file, at a line and a key.
type PlanError struct {
	File string
	Line int
	Key  string
	Msg  string
	err  error // the cause, if any
}

func newPlanError(file string, line int, key string, err error, format string, args ...any) *PlanError {
	return &PlanError{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...), err: err}
}

func (e *PlanError) Error() string {
	var b strings.Builder
	b.WriteString("plan " + e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ", line %d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ", key %s", e.Key)
	}
	return b.String() + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrPlan) hold, keeps the cause, and gives
// the command line an *tare.Error with code EINVALID.
func (e *PlanError) Unwrap() []error {
	errs := []error{ErrPlan, &tare.Error{Code: tare.EINVALID, Message: e.Error()}}
	if e.err != nil {
		errs = append(errs, e.err)
	}
	return errs
}

// otherKeys are the plan's own keys.
var otherKeys = []string{"id", "thresholds", "windows", "days", "tz", "sweep"}

// idPattern is what a protocol id may hold: it goes into crontab lines and
// file names.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ValidID reports whether id can name a protocol.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ParsePlan parses a plan file read from r; file names it in messages and
// gives the default id; keys are the load's keys it takes, retired those
// it ignores with a warning. Every error wraps ErrPlan and names the line
// and the key.
func ParsePlan(file string, r io.Reader, keys Keys, retired Retired) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPlanSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read plan %s: %w", ErrPlan, file, err)
	}
	if len(data) > MaxPlanSize {
		return nil, newPlanError(file, 0, "", nil, "larger than %d bytes: a plan is a short YAML file", MaxPlanSize)
	}
	return parsePlan(file, data, keys, retired)
}

func parsePlan(file string, data []byte, keys Keys, retired Retired) (p *Plan, err error) {
	p = &Plan{File: file, Days: 1, Loc: time.Local, keys: keys, retired: retired, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := safeDecode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, newPlanError(file, 0, "", nil, "the file is empty: a plan needs at least url")
		}
		return nil, newPlanError(file, yamlLine(err), "", err, "not valid YAML: %s", yamlMessage(err))
	}
	var extra yaml.Node
	if err := safeDecode(dec, &extra); !errors.Is(err, io.EOF) {
		return nil, newPlanError(file, extra.Line, "", nil, "more than one YAML document: a plan is one")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	root = deref(root)
	if root.Kind != yaml.MappingNode {
		return nil, newPlanError(file, root.Line, "", nil, "a plan is a mapping of keys like url: and rate:, not %s", kindName(root))
	}
	err = eachKey(p, root, "", func(key string, v *yaml.Node) error {
		if list, ok := keys[key]; ok && !strings.Contains(key, ".") {
			return p.addSettings(key, v, list)
		}
		switch key {
		case "id":
			s, err := p.scalar(key, v)
			if err != nil {
				return err
			}
			if !ValidID(s) {
				return p.Errorf(key, nil, "protocol id %q must be letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100)", s)
			}
			p.ID = s
		case "thresholds":
			return p.thresholds(v)
		case "windows":
			return p.windows(v)
		case "days":
			s, err := p.scalar(key, v)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > MaxDays {
				return p.Errorf(key, nil, "days must be a whole number from 1 to %d; got %q", MaxDays, s)
			}
			p.Days = n
		case "tz":
			s, err := p.scalar(key, v)
			if err != nil {
				return err
			}
			loc, err := LoadTZ(s)
			if err != nil {
				return p.Errorf(key, err, "%s", tare.ErrorMessage(err))
			}
			p.TZ, p.Loc = s, loc
		case "sweep":
			if v.Kind != yaml.MappingNode {
				return p.Errorf(key, nil, "sweep must be a mapping like {from: 1/s, to: 50/s, step: 5/s}; got %s", kindName(v))
			}
			p.Sweep = true
			return eachKey(p, v, "sweep", func(k string, sv *yaml.Node) error {
				list, ok := keys["sweep."+k]
				if !ok {
					return p.Errorf("sweep."+k, nil, "unknown key %q in sweep; use %s", k, p.keysUnder("sweep."))
				}
				return p.addSettings("sweep."+k, sv, list)
			})
		default:
			return p.Errorf(key, nil, "unknown key %q; a plan takes %s", key, p.knownKeys())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.ID == "" {
		base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if !ValidID(base) {
			return nil, newPlanError(file, 0, "id", nil, "the file name %q cannot be a protocol id: give one with id:", base)
		}
		p.ID = base
	}
	if len(p.Windows) == 0 {
		p.Windows = DefaultWindows()
	}
	if !slices.ContainsFunc(p.Settings, func(s Setting) bool {
		return s.Key == "url" || s.Key == "targets" || s.Key == "model" || s.Key == "queue"
	}) {
		return nil, newPlanError(file, 0, "url", nil, "the plan names no target: give url: http://HOST:PORT/PATH (or targets: FILE, model: URL, queue: URL)")
	}
	return p, nil
}

// LoadTZ loads a time zone by IANA name ("Europe/Paris", "UTC", "Local"),
// as a *tare.Error with code EINVALID when there is none by that name.
func LoadTZ(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" {
		return nil, tare.Errorf(tare.EINVALID, "time zone %q is not an IANA name like Europe/Paris, America/New_York, UTC or Local", name)
	}
	return loc, nil
}

func (p *Plan) thresholds(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return p.Errorf("thresholds", nil, "thresholds must be a mapping like {steal: 10, divergence: 30}; got %s", kindName(v))
	}
	return eachKey(p, v, "thresholds", func(k string, tv *yaml.Node) error {
		key := "thresholds." + k
		if k == "divergence" {
			s, err := p.scalar(key, tv)
			if err != nil {
				return err
			}
			d, err := strconv.ParseFloat(s, 64)
			if err != nil || !(d > 0 && d <= 10000) {
				return p.Errorf(key, nil, "divergence must be a percentage above 0, like 30; got %q", s)
			}
			p.DivergencePct = d
			return nil
		}
		list, ok := p.keys[key]
		if !ok {
			return p.Errorf(key, nil, "unknown threshold %q; use one of %s or divergence", k, p.keysUnder("thresholds."))
		}
		return p.addSettings(key, tv, list)
	})
}

// Auto is a window the plan chooses from the host's calendar rather than
// by the clock: windows: auto, or offpeak: quietest.
type Auto struct {
	Window string // peak, offpeak or mid
	Choice string // tare.ChoiceBusiest, ChoiceQuietest or ChoiceTypical
}

// autoChoice is the one calendar choice each window may make: the
// protocol's peak is the host's busiest hours, its off-peak the quietest,
// its mid the most typical.
var autoChoice = map[string]string{
	tare.WindowPeak:    tare.ChoiceBusiest,
	tare.WindowOffpeak: tare.ChoiceQuietest,
	tare.WindowMid:     tare.ChoiceTypical,
}

func (p *Plan) windows(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Value == "auto" {
		// Every window from the calendar, in the default order.
		for _, w := range DefaultWindows() {
			p.Windows = append(p.Windows, w)
			p.Auto = append(p.Auto, Auto{Window: w.Name, Choice: autoChoice[w.Name]})
		}
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return p.Errorf("windows", nil, "windows must be auto (chosen from the host's calendar) or a mapping like {peak: 14:00-16:00, offpeak: 02:00-04:00, mid: 08:00-10:00}; got %s", kindName(v))
	}
	err := eachKey(p, v, "windows", func(name string, wv *yaml.Node) error {
		key := "windows." + name
		w, ok := defaultWindow(name)
		if !ok {
			return p.Errorf(key, nil, "unknown window %q; the protocol's windows are peak, offpeak and mid", name)
		}
		span, err := p.scalar(key, wv)
		if err != nil {
			return err
		}
		if want := autoChoice[name]; span == want || span == "auto" {
			// Chosen from the calendar; the default stands in until then.
			p.Windows = append(p.Windows, w)
			p.Auto = append(p.Auto, Auto{Window: name, Choice: want})
			return nil
		}
		if _, isChoice := choiceWindow(span); isChoice {
			return p.Errorf(key, nil, "the %s window can only be the host's %s hours (%s: %s, or auto); %q is another window's", name, autoChoice[name], name, autoChoice[name], span)
		}
		if w.From, w.To, err = ParseSpan(span); err != nil {
			return p.Errorf(key, err, "%v, or %s (chosen from the host's calendar)", err, autoChoice[name])
		}
		p.Windows = append(p.Windows, w)
		return nil
	})
	if err != nil {
		return err
	}
	if len(p.Windows) < 2 {
		return p.Errorf("windows", nil, "give at least two windows to compare; got %d", len(p.Windows))
	}
	return nil
}

// choiceWindow is the window a calendar choice word belongs to.
func choiceWindow(word string) (string, bool) {
	for w, c := range autoChoice {
		if c == word {
			return w, true
		}
	}
	return "", false
}

// addSettings adds a scalar's value, or a list's when list is true, as
// settings of key.
func (p *Plan) addSettings(key string, v *yaml.Node, list bool) error {
	if list && v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			item = deref(item)
			if item.Kind != yaml.ScalarNode {
				return newPlanError(p.File, item.Line, key, nil, "each %s must be a string; got %s", key, kindName(item))
			}
			p.Settings = append(p.Settings, Setting{Key: key, Value: item.Value, Line: item.Line})
		}
		return nil
	}
	s, err := p.scalar(key, v)
	if err != nil {
		return err
	}
	p.Settings = append(p.Settings, Setting{Key: key, Value: s, Line: v.Line})
	return nil
}

// scalar is v's text, or an error when v is not a scalar.
func (p *Plan) scalar(key string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", p.Errorf(key, nil, "%s must be a single value; got %s", key, kindName(v))
	}
	if v.ShortTag() == "!!null" {
		return "", p.Errorf(key, nil, "%s has no value", key)
	}
	return v.Value, nil
}

// eachKey calls fn for each key of a mapping in file order, recording its
// line under prefix, and refuses keys that repeat or are not strings.
func eachKey(p *Plan, m *yaml.Node, prefix string, fn func(key string, v *yaml.Node) error) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return newPlanError(p.File, k.Line, prefix, nil, "a key must be a plain word like rate; got %s", kindName(k))
		}
		if line, dup := p.lines[path]; dup {
			return newPlanError(p.File, k.Line, path, nil, "%s is given twice (first at line %d)", path, line)
		}
		p.lines[path] = k.Line
		if why, ok := p.retired[path]; ok {
			p.Warnings = append(p.Warnings, p.Errorf(path, nil, "no longer used, and ignored: %s; remove it", why).Error())
			continue
		}
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// knownKeys lists the top-level keys a plan takes.
func (p *Plan) knownKeys() string {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(p.keys)) {
		if !strings.Contains(k, ".") && k != "headers" {
			keys = append(keys, k)
		}
	}
	return strings.Join(append(keys, otherKeys...), ", ")
}

// keysUnder lists the keys below prefix ("thresholds."), without it.
func (p *Plan) keysUnder(prefix string) string {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(p.keys)) {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			keys = append(keys, rest)
		}
	}
	return strings.Join(keys, ", ")
}

// safeDecode decodes one document, turning a panic of the YAML library on
// hostile input into an error.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlLine digs the line out of a YAML syntax error; 0 when it has none.
func yamlLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// yamlMessage is the YAML error without its "yaml: line N:" prefix, which
// the plan error already gives.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRE.FindStringIndex(msg); m != nil && m[0] == 0 {
		msg = strings.TrimLeft(msg[m[1]:], ": ")
	}
	return msg
}
