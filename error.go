package tare

import (
	"errors"
	"fmt"
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
