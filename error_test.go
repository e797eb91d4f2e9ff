package tare

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
)

// TestErrorKeepsCause: an *Error made with %w unwraps to its cause, so
// errors.Is and errors.As see through it, while its message, code and
// ErrorMessage read as before.
func TestErrorKeepsCause(t *testing.T) {
	err := Errorf(EUNAVAILABLE, "open queue %q on redis: %w", "jobs", fmt.Errorf("dial: %w", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
	if want := `open queue "jobs" on redis: dial: context deadline exceeded`; err.Error() != want || err.Message != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}

	_, openErr := os.Open("/nonexistent/tare")
	wrapped := fmt.Errorf("run: %w", Errorf(EINVALID, "cannot read body file %q: %w", "body.json", openErr))
	var pe *fs.PathError
	if !errors.As(wrapped, &pe) || pe != openErr {
		t.Errorf("errors.As to *fs.PathError: %v, want the original %v", pe, openErr)
	}
	if !errors.Is(wrapped, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", wrapped)
	}
	if got := ErrorCode(wrapped); got != EINVALID {
		t.Errorf("ErrorCode = %q, want %q", got, EINVALID)
	}
	if got, want := ErrorMessage(wrapped), `cannot read body file "body.json": open /nonexistent/tare: no such file or directory`; got != want {
		t.Errorf("ErrorMessage = %q, want %q", got, want)
	}
}

func TestErrorfCause(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	tests := []struct {
		name    string
		err     *Error
		message string
		is      []error
		noCause bool
	}{
		{name: "no verb", err: Errorf(EINVALID, "rate must be positive"), message: "rate must be positive", noCause: true},
		{name: "%v flattens", err: Errorf(EINVALID, "x: %v", a), message: "x: a", noCause: true},
		{name: "%w keeps", err: Errorf(EINVALID, "x: %w", a), message: "x: a", is: []error{a}},
		{name: "two %w keep both", err: Errorf(EINVALID, "x: %w, %w", a, b), message: "x: a, b", is: []error{a, b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Error() != tt.message || tt.err.Code != EINVALID {
				t.Errorf("message %q code %q, want %q %q", tt.err.Error(), tt.err.Code, tt.message, EINVALID)
			}
			if (tt.err.Unwrap() == nil) != tt.noCause {
				t.Errorf("Unwrap() = %v", tt.err.Unwrap())
			}
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = false", tt.err, target)
				}
			}
		})
	}
	if ErrorCode(nil) != "" || ErrorCode(a) != EINTERNAL || ErrorMessage(a) != "a" {
		t.Errorf("ErrorCode(nil) %q, ErrorCode(plain) %q, ErrorMessage(plain) %q", ErrorCode(nil), ErrorCode(a), ErrorMessage(a))
	}
}

// TestSettingErrorf: a setting's error reads in the command line's words,
// keeps its code and a %w cause, and a plan words it again by key.
func TestSettingErrorf(t *testing.T) {
	plan := func(flag string) string { return flag + ":" }
	cause := errors.New("permission denied")
	tests := []struct {
		name, flags, plan string
		err               *Error
		code              string
	}{
		{"the field first", "--to must be at least --from (10/s); got 5/s", "to: must be at least from: (10/s); got 5/s",
			SettingErrorf(EINVALID, "to", "must be at least %s (%s); got %s", Setting("from"), "10/s", "5/s"), EINVALID},
		{"a value that looks like a flag", `--servername must be a host name; got "--rate"`, `servername: must be a host name; got "--rate"`,
			SettingErrorf(EINVALID, "servername", "must be a host name; got %q", "--rate"), EINVALID},
		{"after a colon, a cause", `--cacert "ca.pem" cannot be read: permission denied`, `cacert: "ca.pem" cannot be read: permission denied`,
			SettingErrorf(ENOTFOUND, "cacert", "%q cannot be read: %w", "ca.pem", cause), ENOTFOUND},
		{"about no one setting", "the server refused: give --cert FILE", "the server refused: give cert: FILE",
			SettingErrorf(EINVALID, "", "the server refused: give %s FILE", Setting("cert")), EINVALID},
		{"said of another's", "--url: the server refused: give --cert FILE", "url:: the server refused: give cert: FILE",
			&Error{Code: EINVALID, Message: "--url: the server refused: give --cert FILE", Err: NewSettingError("", "the server refused: give %s FILE", Setting("cert")).Within("url")}, EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := errors.AsType[*SettingError](tt.err)
			if !ok {
				t.Fatalf("%v: no *SettingError behind it", tt.err)
			}
			if tt.err.Error() != tt.flags || e.Error() != tt.flags || tt.err.Code != tt.code {
				t.Errorf("command line %q (%q), code %q; want %q, %q", tt.err.Error(), e.Error(), tt.err.Code, tt.flags, tt.code)
			}
			if got := e.Words(plan); got != tt.plan {
				t.Errorf("plan %q, want %q", got, tt.plan)
			}
		})
	}
	if err := SettingErrorf(EINVALID, "cacert", "%q: %w", "ca.pem", cause); !errors.Is(err, cause) {
		t.Errorf("errors.Is(%v, the cause) = false", err)
	}
}
