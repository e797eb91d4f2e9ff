package settings

import (
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The values below point at a field of a spec, as the standard library's
// flag values do: the spec keeps its plain types, the setting parses into
// them. Their Type and String are pflag's own for the same kind, so --help
// and a run's recorded configuration read as they did.

type stringValue string

// String is a setting of any text.
func String(p *string) Value              { return (*stringValue)(p) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Type() string       { return "string" }

// stringsValue is a list: the first Set replaces the default, the next
// ones add to it (pflag's StringArray).
type stringsValue struct {
	p   *[]string
	set bool
}

// Strings is a repeatable setting of text, one item each time.
func Strings(p *[]string) Value { return &stringsValue{p: p} }
func (v *stringsValue) Set(s string) error {
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, s)
	return nil
}

// String is the items as CSV in brackets, as pflag prints a StringArray.
func (v *stringsValue) String() string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(*v.p) // into a strings.Builder: it cannot fail
	w.Flush()
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}
func (v *stringsValue) Type() string       { return "stringArray" }
func (v *stringsValue) GetSlice() []string { return slices.Clone(*v.p) }

type intValue int

// Int is a setting of a whole number.
func Int(p *int) Value { return (*intValue)(p) }
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err == nil {
		*v = intValue(n)
	}
	return err
}
func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Type() string   { return "int" }

// intsValue is a list of whole numbers, each Set one or more separated by
// commas: the first replaces the default (pflag's IntSlice).
type intsValue struct {
	p   *[]int
	set bool
}

// Ints is a repeatable setting of whole numbers.
func Ints(p *[]int) Value { return &intsValue{p: p} }
func (v *intsValue) Set(s string) error {
	var ns []int
	for item := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		n, err := strconv.Atoi(item)
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, ns...)
	return nil
}
func (v *intsValue) GetSlice() []string {
	items := make([]string, len(*v.p))
	for i, n := range *v.p {
		items[i] = strconv.Itoa(n)
	}
	return items
}
func (v *intsValue) String() string { return "[" + strings.Join(v.GetSlice(), ",") + "]" }
func (v *intsValue) Type() string   { return "intSlice" }

type uint64Value uint64

// Uint64 is a setting of a whole number 0 or more.
func Uint64(p *uint64) Value { return (*uint64Value)(p) }
func (v *uint64Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err == nil {
		*v = uint64Value(n)
	}
	return err
}
func (v *uint64Value) String() string { return strconv.FormatUint(uint64(*v), 10) }
func (v *uint64Value) Type() string   { return "uint64" }

type float64Value float64

// Float64 is a setting of a number.
func Float64(p *float64) Value { return (*float64Value)(p) }
func (v *float64Value) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err == nil {
		*v = float64Value(f)
	}
	return err
}
func (v *float64Value) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *float64Value) Type() string   { return "float64" }

type boolValue bool

// Bool is a setting that is on or off; as a flag it takes no value.
func Bool(p *bool) Value { return (*boolValue)(p) }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err == nil {
		*v = boolValue(b)
	}
	return err
}
func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) Type() string     { return "bool" }
func (v *boolValue) IsBoolFlag() bool { return true }

type durationValue time.Duration

// Duration is a setting of a duration, like 30s.
func Duration(p *time.Duration) Value { return (*durationValue)(p) }
func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*v = durationValue(d)
	}
	return err
}
func (v *durationValue) String() string { return time.Duration(*v).String() }
func (v *durationValue) Type() string   { return "duration" }

// percentValue is a share, in %, from 0 to 100.
type percentValue float64

// Percent is a setting of a share in %, from 0 to 100.
func Percent(p *float64) Value             { return (*percentValue)(p) }
func (v *percentValue) Set(s string) error { return (*float64Value)(v).Set(s) }
func (v *percentValue) String() string     { return (*float64Value)(v).String() }
func (v *percentValue) Type() string       { return "float64" }

// Check refuses a share outside 0–100.
func (v *percentValue) Check() error {
	if f := float64(*v); f < 0 || f > 100 {
		return &Error{Want: "a percentage from 0 to 100", Got: fmt.Sprintf("%g", f)}
	}
	return nil
}

// enumValue is one of a few words, or "" for the default.
type enumValue struct {
	p     *string
	words []string
}

// Enum is a setting of one of words, or "" for its default.
func Enum(p *string, words ...string) Value { return &enumValue{p: p, words: words} }
func (v *enumValue) Set(s string) error     { *v.p = s; return nil }
func (v *enumValue) String() string         { return *v.p }
func (v *enumValue) Type() string           { return "string" }

// Check refuses a word not among the setting's.
func (v *enumValue) Check() error {
	if *v.p == "" || slices.Contains(v.words, *v.p) {
		return nil
	}
	want := strings.Join(v.words[:len(v.words)-1], ", ") + " or " + v.words[len(v.words)-1]
	return &Error{Want: want, Got: strconv.Quote(*v.p)}
}

// Append, Replace and GetSlice make a list a pflag.SliceValue, which tare
// check cron reads to give each item again as a flag of its own.
func (v *stringsValue) Append(s string) error { *v.p = append(*v.p, s); return nil }
func (v *stringsValue) Replace(items []string) error {
	*v.p = slices.Clone(items)
	return nil
}
func (v *intsValue) Append(s string) error {
	n, err := strconv.Atoi(s)
	if err == nil {
		*v.p = append(*v.p, n)
	}
	return err
}
func (v *intsValue) Replace(items []string) error {
	ns := make([]int, len(items))
	for i, s := range items {
		var err error
		if ns[i], err = strconv.Atoi(s); err != nil {
			return err
		}
	}
	*v.p = ns
	return nil
}

// probabilityValue is a probability above 0 and at most 1: a p-value.
type probabilityValue float64

// Probability is a setting of a probability above 0 and at most 1.
func Probability(p *float64) Value             { return (*probabilityValue)(p) }
func (v *probabilityValue) Set(s string) error { return (*float64Value)(v).Set(s) }
func (v *probabilityValue) String() string     { return (*float64Value)(v).String() }
func (v *probabilityValue) Type() string       { return "float64" }

// Check refuses a probability of 0 or less, or above 1.
func (v *probabilityValue) Check() error {
	if f := float64(*v); !(f > 0 && f <= 1) {
		return &Error{Want: "a probability above 0 and at most 1, like 0.01", Got: fmt.Sprintf("%g", f)}
	}
	return nil
}
