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
