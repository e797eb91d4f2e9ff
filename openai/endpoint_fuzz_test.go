package openai

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// FuzzParseEndpoint: any --model URL is refused with EINVALID, or becomes
// an http(s) URL ending in the endpoint it names, with no fragment.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8089/v1", "https://api.example/v1/chat/completions/", "http://h/v1#frag", "ftp://x", "",
		"http://user:s3cret@127.0.0.1/v1", "http://u:s3cret@ho st/v1", "not a url", "http://%zz", "http://h/v1/embeddings", "http://h/v1/completions/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, kind, err := parseEndpoint(s, "")
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("parseEndpoint(%q) = %v: want EINVALID", s, err)
			}
			if strings.Contains(s, "://u:s3cret@") && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("parseEndpoint(%q) error shows the password: %v", s, err)
			}
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" ||
			!strings.HasSuffix(strings.TrimRight(u.EscapedPath(), "/"), kind) {
			t.Fatalf("parseEndpoint(%q) = %v", s, u)
		}
	})
}
