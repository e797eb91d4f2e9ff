package httptarget

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// FuzzParseURL: any --url is refused with EINVALID, or is an absolute
// http(s) URL with a host whose shown form never carries its password.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/path", "HTTPS://[::1]:443/?api_key=s3cret&x=1", "ftp://127.0.0.1/", "::not a url",
		"http://user:s3cret@127.0.0.1/", "http://u:s3cret@ho st/", "http:///nohost", "", " ", "http://%zz/", "http://127.0.0.1/?%zz=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseURL(s)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("parseURL(%q) = %v: want EINVALID", s, err)
			}
			if strings.Contains(s, "://u:s3cret@") && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("parseURL(%q) error shows the password: %v", s, err)
			}
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			t.Fatalf("parseURL(%q) = %v: want an http(s) URL with a host", s, u)
		}
		if p, ok := u.User.Password(); ok && p != "" && p != "redacted" && strings.Contains(redactURL(u), ":"+p+"@") {
			t.Fatalf("redactURL(%q) = %q shows the password", s, redactURL(u))
		}
	})
}

// FuzzParseMethod: a method is a standard one, upper-cased, or a token
// sent as given; anything else is EINVALID.
func FuzzParseMethod(f *testing.F) {
	for _, s := range []string{"", "get", "POST", "PURGE", "GET /", "a\nb", "ü"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, m string, hasBody bool) {
		got, err := parseMethod(m, hasBody)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("parseMethod(%q) = %v: want EINVALID", m, err)
			}
			return
		}
		if got == "" || !validName(got) {
			t.Fatalf("parseMethod(%q) = %q: not a token", m, got)
		}
	})
}
