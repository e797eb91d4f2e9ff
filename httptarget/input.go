package httptarget

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/tare-dev/tare"
)

// Limits on what a request may carry: a larger header is refused by most
// servers anyway, and a larger body would be held in memory for every
// request of the run.
const (
	MaxHeaderLen = 16 << 10
	MaxBodyLen   = 64 << 20
)

// ParseHeader parses one "Name: value" header, as given to --header. Space
// around the name and the value is trimmed; an empty value is allowed. Bad
// input is a *tare.Error with code tare.EINVALID; the message never echoes
// the value, which may be a secret.
func ParseHeader(s string) (name, value string, err error) {
	if len(s) > MaxHeaderLen {
		return "", "", tare.Errorf(tare.EINVALID, "header is %d bytes; the longest tare sends is %d (servers refuse larger ones)", len(s), MaxHeaderLen)
	}
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", "", tare.Errorf(tare.EINVALID, `header must look like "Name: value"; got %q`, s)
	}
	if !validName(name) {
		return "", "", tare.Errorf(tare.EINVALID, "header name must be letters, digits and !#$%%&'*+-.^_`|~ only, like X-Request-Id; got %q", name)
	}
	value = strings.Trim(value, " \t")
	if !validValue(value) {
		return "", "", tare.Errorf(tare.EINVALID, "header %q has a value with a control character such as a newline", name)
	}
	return name, value, nil
}

// validName reports whether s is an RFC 9110 token, the grammar of header
// names and methods.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether s has no control character but tab: a CR or
// LF would let a value smuggle in another header.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ReadBody returns the request body a --body value names: the text itself,
// or the contents of the file after a leading "@" ("@payload.json"). A body
// that really starts with "@" has to come from a file. A file that cannot be
// read is a *tare.Error naming the path: tare.ENOTFOUND when it does not
// exist, tare.EINVALID otherwise.
func ReadBody(spec string) ([]byte, error) {
	path, isFile := strings.CutPrefix(spec, "@")
	switch {
	case !isFile && spec == "":
		return nil, nil
	case !isFile && len(spec) > MaxBodyLen:
		return nil, tare.Errorf(tare.EINVALID, "body is %d MiB; the largest body tare sends is %d MiB", len(spec)>>20, MaxBodyLen>>20)
	case !isFile:
		return []byte(spec), nil
	case path == "":
		return nil, tare.Errorf(tare.EINVALID, `body must be text or @ and a file path, like @payload.json; got "@"`)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > MaxBodyLen {
		return nil, tare.Errorf(tare.EINVALID, "body file %q is %d MiB; the largest body tare sends is %d MiB", path, fi.Size()>>20, MaxBodyLen>>20)
	}
	data, err := os.ReadFile(path)
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, tare.Errorf(tare.ENOTFOUND, "body file %q does not exist", path)
	case errors.As(err, &pathErr):
		return nil, tare.Errorf(tare.EINVALID, "cannot read body file %q: %w", path, pathErr.Err)
	case err != nil:
		return nil, tare.Errorf(tare.EINVALID, "cannot read body file %q: %w", path, err)
	}
	return data, nil
}

// RedactHeader returns a copy of h fit to print or store: the value of every
// header whose name tare.IsSecretName says may carry a secret is replaced by
// tare.Redacted.
func RedactHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for name, values := range h {
		if !tare.IsSecretName(name) {
			out[name] = append([]string(nil), values...)
			continue
		}
		vs := make([]string, len(values))
		for i := range vs {
			vs[i] = tare.Redacted
		}
		out[name] = vs
	}
	return out
}

// redactURL prints u with its user information and the values of secret
// query parameters replaced by tare.Redacted, keeping the parameters' order.
func redactURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		r.User = url.User("redacted") // brackets would be escaped in user information
	}
	if r.RawQuery != "" {
		params := strings.Split(r.RawQuery, "&")
		for i, p := range params {
			key, _, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(key)
			if err != nil {
				name = key
			}
			if tare.IsSecretName(name) {
				params[i] = key + "=" + tare.Redacted
			}
		}
		r.RawQuery = strings.Join(params, "&")
	}
	return r.String()
}
