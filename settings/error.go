package settings

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tare-dev/tare"
)

// Error is what is wrong with a setting, or with settings together: the
// root's tare.SettingError, which keeps each setting it names as a name,
// so that each reader words it in its own terms: the command line
// "--rate", a plan "rate:" (Words).
//
// Errors reach the user as a *tare.Error whose message is in the command
// line's words, the Error its cause: a plan reader finds it with
// errors.As and words it again.
type Error = tare.SettingError

// Name is a setting by its flag name, in an Error's message.
type Name = tare.Setting

// Namer words a setting given by its flag name.
type Namer = func(flag string) string

// Flag words a setting as the command line does: "--rate".
func Flag(flag string) string { return "--" + flag }

// user is e as the user sees it: a *tare.Error of code, in the command
// line's words, e (and the cause) behind it.
func user(code string, e *Error, cause error) *tare.Error {
	var err error = e
	if cause != nil {
		err = errors.Join(e, cause) // errors.Is and errors.As see both
	}
	return &tare.Error{Code: code, Message: e.Error(), Err: err}
}

// Errorf is an EINVALID error about setting field (by flag name; "" when
// it is about several), its message field's name then format: Errorf("tick",
// "must be %s or more; got %s", min, tick). A Name among args is another
// setting, worded as the reader words settings; an error given to %w is
// kept as a cause (tare.SettingErrorf).
func Errorf(field, format string, args ...any) *tare.Error {
	return tare.SettingErrorf(tare.EINVALID, field, format, args...)
}

// Wrong is an EINVALID error: field's value, as got shows it, is not
// want. "--latency-factor must be above 1; got 0.5".
func Wrong(field, want, got string) *tare.Error {
	return user(tare.EINVALID, &Error{Field: field, Want: want, Got: got}, nil)
}

// Flagged names the setting a user error came from: a message that starts
// with the setting's name ("rate must …") is that setting's, any other
// follows it after a colon. With flag "", the message's first word is the
// setting. The error keeps its code and stays the cause. An error that
// is an Error already keeps the setting it names, and one about no setting
// in particular (a server's certificate) is said of flag's.
func Flagged(err error, flag string) error {
	msg := tare.ErrorMessage(err)
	if e, ok := errors.AsType[*Error](err); ok && e.Error() == msg {
		if e.Field != "" || flag == "" {
			return err
		}
		return user(tare.ErrorCode(err), e.Within(flag), err)
	}
	rest, ok := strings.CutPrefix(msg, flag+" ")
	switch {
	case flag == "":
		flag, rest, _ = strings.Cut(msg, " ")
	case !ok:
		rest = ": " + msg
	}
	format, args := named(rest)
	return user(tare.ErrorCode(err), tare.NewSettingError(flag, format, args...), err)
}

// As is the *Error err says in words: the one in its chain when that is
// what the user reads, else its message read back, each "--flag" in it a
// name, the one it starts with the field at fault. The second form is for
// the messages still written with flags in them (session's own checks of
// shards, plans and results); judge, httptarget, tlsclient and queue
// return a tare.SettingError (tare.SettingErrorf).
func As(err error) *Error {
	msg := tare.ErrorMessage(err)
	if e, ok := errors.AsType[*Error](err); ok && e.Error() == msg {
		return e
	}
	field := ""
	if m := flagAt.FindStringSubmatchIndex(msg); m != nil && m[0] == 0 {
		field, msg = msg[m[2]:m[3]], msg[m[1]:]
		if !strings.HasPrefix(msg, " ") && !strings.HasPrefix(msg, ":") && msg != "" {
			// "--to…" that is not a flag's name followed by words
			field, msg = "", tare.ErrorMessage(err)
		}
	}
	format, args := named(strings.TrimPrefix(msg, " "))
	if field == "" && format == "" {
		format, args = "%s", []any{""} // "": an empty message, not the Want/Got form
	}
	return tare.NewSettingError(field, format, args...)
}

// flagAt finds a setting written as a flag in a message.
var flagAt = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)

// named makes text a format, each "--flag" in it a Name.
func named(text string) (string, []any) {
	var args []any
	format := flagAt.ReplaceAllStringFunc(strings.ReplaceAll(text, "%", "%%"), func(m string) string {
		args = append(args, Name(m[2:]))
		return "%s"
	})
	return format, args
}

// Invalid is the error of text given to field: the value's own *tare.Error,
// named by the field, or else that the field wants a value of its kind.
func Invalid(field string, v Value, text string, err error) error {
	if _, ok := errors.AsType[*tare.Error](err); ok {
		return Flagged(err, field)
	}
	return Wrong(field, Accepted(v.Type()), fmt.Sprintf("%q", text))
}
