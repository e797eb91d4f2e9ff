package tare

import (
	"errors"
	"fmt"
	"strings"
)

// Error codes for problems the user should see.
const (
	EINVALID     = "invalid"     // bad input: a flag, a value, a file
	ENOTFOUND    = "not_found"   // a run, a file, a key that does not exist
	EUNAVAILABLE = "unavailable" // a service or source that cannot be reached
	EINTERNAL    = "internal"    // a bug or an unexpected failure
)

// Error is a problem reported to the user: main prints only its Message.
// Err is its cause, when it has one: the message already says it in words,
// and errors.Is and errors.As see through the Error to it.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code and a message formatted as
// fmt.Errorf formats it. An error given to %w is kept as the cause, so
// errors.Is(err, context.DeadlineExceeded) holds through the *Error; %w
// prints as %v does, so the message is the same either way. With several
// %w, the cause is an error that unwraps to all of them.
func Errorf(code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		e.Err = u.Unwrap()
	case interface{ Unwrap() []error }:
		e.Err = err
	}
	return e
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or
// err.Error() for any other error.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// SettingError is what is wrong with a setting, or with settings
// together. It keeps each setting it names as a name (a Setting among its
// arguments), so that each reader words it in its own terms: the command
// line "--rate", a plan "rate:". Any package that checks a setting returns
// one (through SettingErrorf) rather than writing the flag into its
// message; package settings (its Error) words it.
type SettingError struct {
	// Field is the setting at fault, by flag name, that the message
	// starts with; "" for a message about several.
	Field string
	// Got is the bad value, as the message shows it; Want what would be
	// right ("a whole number"). Both "" when the message says more.
	Got, Want string
	format    string
	args      []any // a Setting among them is a setting, worded by the reader
}

// Setting is a setting by its flag name, in a SettingError's message.
type Setting string

// NewSettingError is the error about setting field (by flag name; "" when
// it is about several): its name, then format. A Setting among args is
// another setting, worded as the reader words settings.
func NewSettingError(field, format string, args ...any) *SettingError {
	return &SettingError{Field: field, format: format, args: args}
}

// SettingErrorf is an *Error of code about setting field, whose message is
// in the command line's words ("--from must be a positive rate"), the
// *SettingError behind it for a reader with words of its own (a plan).
// format and args are NewSettingError's; an error given to %w is kept as
// a cause too, as Errorf keeps it.
func SettingErrorf(code, field, format string, args ...any) *Error {
	e := NewSettingError(field, strings.ReplaceAll(format, "%w", "%v"), args...)
	var err error = e
	if cause := Errorf(code, format, args...).Err; cause != nil {
		err = errors.Join(e, cause) // errors.Is and errors.As see both
	}
	return &Error{Code: code, Message: e.Error(), Err: err}
}

// Within is e, about no setting in particular, said of setting field
// after a colon: "--url: 127.0.0.1:443 sent a certificate …".
func (e *SettingError) Within(field string) *SettingError {
	return &SettingError{Field: field, format: ": " + e.format, args: e.args}
}

// Rest is the message after the setting at fault, each setting it names
// worded by name: " must be 100ms or more; got 50ms", or ": no such file".
func (e *SettingError) Rest(name func(flag string) string) string {
	if e.format == "" {
		return fmt.Sprintf(" must be %s; got %s", e.Want, e.Got)
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if n, ok := a.(Setting); ok {
			a = name(string(n))
		}
		args[i] = a
	}
	rest := fmt.Sprintf(e.format, args...)
	if e.Field != "" && rest != "" && !strings.HasPrefix(rest, ":") {
		rest = " " + rest
	}
	return rest
}

// Words is the whole message, each setting worded by name.
func (e *SettingError) Words(name func(flag string) string) string {
	if e.Field == "" {
		return e.Rest(name)
	}
	return name(e.Field) + e.Rest(name)
}

// Error is the message in the command line's words: "--rate".
func (e *SettingError) Error() string {
	return e.Words(func(flag string) string { return "--" + flag })
}
