package settings

import (
	"cmp"
	"strings"

	"github.com/tare-dev/tare"
)

// Value is a setting's value: pflag.Value, which flag.Value is too with
// Type added. Set parses one item (of a list, the next one), String is
// the value as given, Type names its kind in --help ("duration", "rate").
type Value interface {
	String() string
	Set(string) error
	Type() string
}

// Checker is a Value with a rule of its own beyond its syntax: a share
// from 0 to 100, one of a few words. Check is called once every setting
// is given (Check), so that a value set by a flag, by a plan or by code
// is checked alike.
type Checker interface {
	Value
	Check() error
}

// Field is one setting: the flag that sets it, the plan key that sets it
// ("" where a plan cannot), its help, and its value.
type Field struct {
	Flag, Short string
	Key         string
	Usage       string
	Value       Value
	// Retired says why a setting no longer does anything: its flag is
	// deprecated with that message, and its plan key ignored with a
	// warning and never listed among the keys to use. "" for a live one.
	Retired string
}

// Word is the key's last word, the setting's name inside a plan's
// section: "steal" for thresholds.steal.
func (f Field) Word() string {
	key := cmp.Or(f.Key, f.Flag)
	return key[strings.LastIndex(key, ".")+1:]
}

// List says whether each Set adds an item (a repeatable flag, a plan
// key that takes a list).
func (f Field) List() bool {
	_, ok := f.Value.(interface{ GetSlice() []string })
	return ok
}

// IsBool says whether the flag takes no value ("--insecure").
func (f Field) IsBool() bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Parse sets the field from text, one item at a time for a list. A bad
// value is an *Error naming the field: the Value's own *tare.Error as the
// cause, or else what the kind accepts.
func (f Field) Parse(text string) error {
	if err := f.Value.Set(text); err != nil {
		return Invalid(f.Flag, f.Value, text, err)
	}
	return nil
}

// Check checks each field whose value has a rule of its own, in order,
// and returns the first error, naming the field. A Checker's Check
// returns an *Error without a Field (it does not know its name) or any
// error to be flagged.
func Check(fields ...Field) error {
	for _, f := range fields {
		if c, ok := f.Value.(Checker); ok && f.Retired == "" { // a zero Field has no Value
			if err := c.Check(); err != nil {
				e, ok := err.(*Error)
				if !ok {
					return Flagged(err, f.Flag)
				}
				named := *e
				named.Field = f.Flag
				return user(tare.EINVALID, &named, nil)
			}
		}
	}
	return nil
}

// Accepted says what a value of a kind looks like, for messages about a
// bad one.
func Accepted(typ string) string {
	switch typ {
	case "duration":
		return "a duration like 30s, 1m30s or 250ms"
	case "int", "uint64":
		return "a whole number"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "rate":
		return "a rate like 200/s, 12/m or 3/h"
	}
	return "a valid " + typ
}

// Lookup is the field of fields that flag sets; the zero Field if none.
func Lookup(fields []Field, flag string) Field {
	for _, f := range fields {
		if f.Flag == flag {
			return f
		}
	}
	return Field{}
}
