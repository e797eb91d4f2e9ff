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

// ParseHeader parses one "Name: value" header, as given to --header. Space
// around the name and the value is trimmed; an empty value is allowed. Bad
// input is a *tare.Error with code tare.EINVALID; the message never echoes
// the value, which may be a secret.
func ParseHeader(s string) (name, value string, err error) {
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
	case !isFile:
		return []byte(spec), nil
	case path == "":
		return nil, tare.Errorf(tare.EINVALID, `body must be text or @ and a file path, like @payload.json; got "@"`)
	}
	data, err := os.ReadFile(path)
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, tare.Errorf(tare.ENOTFOUND, "body file %q does not exist", path)
	case errors.As(err, &pathErr):
		return nil, tare.Errorf(tare.EINVALID, "cannot read body file %q: %v", path, pathErr.Err)
	case err != nil:
		return nil, tare.Errorf(tare.EINVALID, "cannot read body file %q: %v", path, err)
	}
	return data, nil
}

// redacted replaces a secret wherever one is shown.
const redacted = "REDACTED"

// RedactHeader returns a copy of h fit to print or store: the value of every
// header that may carry a secret is replaced by "REDACTED". Those are
// Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key and any
// name containing token, secret, key, password, passwd, credential or
// signature, in any case.
func RedactHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for name, values := range h {
		if !sensitive(name) {
			out[name] = append([]string(nil), values...)
			continue
		}
		vs := make([]string, len(values))
		for i := range vs {
			vs[i] = redacted
		}
		out[name] = vs
	}
	return out
}

// sensitive reports whether a header or query parameter name may carry a
// secret. It errs on the side of hiding: X-Monkey-Id is hidden too.
func sensitive(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key":
		return true
	}
	for _, s := range []string{"token", "secret", "key", "password", "passwd", "credential", "signature"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// redactURL prints u with its user information and the values of sensitive
// query parameters replaced by "REDACTED", keeping the parameters' order.
func redactURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		r.User = url.User(redacted)
	}
	if r.RawQuery != "" {
		params := strings.Split(r.RawQuery, "&")
		for i, p := range params {
			key, _, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(key)
			if err != nil {
				name = key
			}
			if sensitive(name) {
				params[i] = key + "=" + redacted
			}
		}
		r.RawQuery = strings.Join(params, "&")
	}
	return r.String()
}
