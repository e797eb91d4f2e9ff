package httptarget

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantName  string
		wantValue string
		wantErr   string // substring of the error message
	}{
		{name: "plain", in: "X-Request-Id: 42", wantName: "X-Request-Id", wantValue: "42"},
		{name: "no space", in: "Accept:text/plain", wantName: "Accept", wantValue: "text/plain"},
		{name: "spaces trimmed", in: "  Accept  :  a, b \t", wantName: "Accept", wantValue: "a, b"},
		{name: "colon in value", in: "Authorization: Basic YTpi:c", wantName: "Authorization", wantValue: "Basic YTpi:c"},
		{name: "empty value", in: "X-Empty:", wantName: "X-Empty", wantValue: ""},
		{name: "tab inside value", in: "X-T: a\tb", wantName: "X-T", wantValue: "a\tb"},
		{name: "token characters", in: "X-!#$%&'*+.^_`|~: v", wantName: "X-!#$%&'*+.^_`|~", wantValue: "v"},
		{name: "utf-8 value", in: "X-Name: café", wantName: "X-Name", wantValue: "café"},

		{name: "no colon", in: "Bearer abc", wantErr: `header must look like "Name: value"; got "Bearer abc"`},
		{name: "empty", in: "", wantErr: `got ""`},
		{name: "no name", in: ": value", wantErr: "must look like"},
		{name: "space in name", in: "X Id: 1", wantErr: `header name must be letters, digits and !#$%&'*+-.^_` + "`" + `|~ only, like X-Request-Id; got "X Id"`},
		{name: "non-ascii name", in: "Tête: 1", wantErr: "header name must be"},
		{name: "newline in value", in: "X-A: 1\r\nX-B: 2", wantErr: `header "X-A" has a value with a control character such as a newline`},
		{name: "nul in value", in: "X-A: a\x00b", wantErr: "control character"},
		{name: "secret value not echoed", in: "Authorization: Bearer sk-123\n", wantErr: `header "Authorization" has a value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, value, err := ParseHeader(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseHeader(%q) = %q, %q, want an error", tt.in, name, value)
				}
				if code := tare.ErrorCode(err); code != tare.EINVALID {
					t.Errorf("error code = %q, want %q", code, tare.EINVALID)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk-123") {
					t.Errorf("error %q shows the header's value", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHeader(%q): %v", tt.in, err)
			}
			if name != tt.wantName || value != tt.wantValue {
				t.Errorf("ParseHeader(%q) = %q, %q; want %q, %q", tt.in, name, value, tt.wantName, tt.wantValue)
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{
		"X-Request-Id: 42", "Accept:text/plain", "  A  :  b ", "Authorization: Basic YTpi:c",
		"X-Empty:", "Bearer abc", "", ":", "X Id: 1", "X-A: 1\r\nX-B: 2", "Tête: 1", "X: \x7f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, value, err := ParseHeader(s)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("ParseHeader(%q): error %v has code %q", s, err, tare.ErrorCode(err))
			}
			return
		}
		if !validName(name) || !validValue(value) {
			t.Fatalf("ParseHeader(%q) = %q, %q: not a valid header", s, name, value)
		}
		// What it accepts, it accepts again in canonical form, unchanged.
		n2, v2, err := ParseHeader(name + ": " + value)
		if err != nil || n2 != name || v2 != value {
			t.Fatalf("ParseHeader(%q) = %q, %q, but %q gives %q, %q, %v", s, name, value, name+": "+value, n2, v2, err)
		}
		// And the target takes it.
		tg, err := New(Config{URL: "http://127.0.0.1/", Header: http.Header{name: {value}}})
		if err != nil {
			t.Fatalf("New with header %q: %q: %v", name, value, err)
		}
		tg.Close()
	})
}

func TestRedactHeader(t *testing.T) {
	tests := []struct {
		name string
		in   http.Header
		want http.Header
	}{
		{name: "nil", in: nil, want: nil},
		{
			name: "secrets hidden, rest kept",
			in: http.Header{
				"Authorization":        {"Bearer sk-1"},
				"Proxy-Authorization":  {"Basic eDp5"},
				"Cookie":               {"a=1", "b=2"},
				"X-Api-Key":            {"k"},
				"X-Auth-Token":         {"t"},
				"X-Client-Secret":      {"s"},
				"Apikey":               {"k2"},
				"X-Amz-Security-Token": {"t2"},
				"Accept":               {"application/json"},
				"X-Request-Id":         {"42"},
			},
			want: http.Header{
				"Authorization":        {"[redacted]"},
				"Proxy-Authorization":  {"[redacted]"},
				"Cookie":               {"[redacted]", "[redacted]"},
				"X-Api-Key":            {"[redacted]"},
				"X-Auth-Token":         {"[redacted]"},
				"X-Client-Secret":      {"[redacted]"},
				"Apikey":               {"[redacted]"},
				"X-Amz-Security-Token": {"[redacted]"},
				"Accept":               {"application/json"},
				"X-Request-Id":         {"42"},
			},
		},
		{
			name: "non-canonical names",
			in:   http.Header{"x-api-key": {"k"}, "my_TOKEN": {"t"}, "accept": {"a"}},
			want: http.Header{"x-api-key": {"[redacted]"}, "my_TOKEN": {"[redacted]"}, "accept": {"a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before http.Header
			if tt.in != nil {
				before = tt.in.Clone()
			}
			got := RedactHeader(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RedactHeader = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.in, before) {
				t.Errorf("RedactHeader changed its input to %v", tt.in)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "unreadable.json")
	if err := os.WriteFile(unreadable, []byte("{}"), 0o000); err != nil {
		t.Fatal(err)
	}
	type testCase struct {
		name     string
		spec     string
		want     string
		wantCode string
		wantErr  string // substring of the error message
	}
	tests := []testCase{
		{name: "empty", spec: "", want: ""},
		{name: "inline", spec: `{"n":1}`, want: `{"n":1}`},
		{name: "inline with @ inside", spec: "a@b", want: "a@b"},
		{name: "file", spec: "@testdata/body.json", want: "{\"model\":\"tare-sim\",\"prompt\":\"hello\"}\n"},
		{name: "missing file", spec: "@testdata/nope.json", wantCode: tare.ENOTFOUND, wantErr: `body file "testdata/nope.json" does not exist`},
		{name: "directory", spec: "@testdata", wantCode: tare.EINVALID, wantErr: `cannot read body file "testdata": is a directory`},
		{name: "no path", spec: "@", wantCode: tare.EINVALID, wantErr: `body must be text or @ and a file path, like @payload.json; got "@"`},
	}
	if os.Geteuid() != 0 { // root reads any file
		tests = append(tests, testCase{name: "unreadable", spec: "@" + unreadable, wantCode: tare.EINVALID, wantErr: "permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadBody(tt.spec)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ReadBody(%q) = %q, want an error", tt.spec, got)
				}
				if code := tare.ErrorCode(err); code != tt.wantCode {
					t.Errorf("error code = %q, want %q", code, tt.wantCode)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadBody(%q): %v", tt.spec, err)
			}
			if string(got) != tt.want {
				t.Errorf("ReadBody(%q) = %q, want %q", tt.spec, got, tt.want)
			}
		})
	}
}
