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
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
