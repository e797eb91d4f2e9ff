package httptarget

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestReadTargetsHTTPFormat(t *testing.T) {
	reqs, err := ReadTargets("testdata/targets/vegeta.http")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		method, url, header, body string
		line                      int
	}{
		{"GET", "http://127.0.0.1:8080/", "X-Account-Id=8675309", "", 2},
		{"DELETE", "http://127.0.0.1:8080/path/to/remove", "Authorization=Token DEADBEEF,Confirmation-Token=90215", "", 5},
		{"POST", "http://127.0.0.1:8080/things", "Content-Type=application/json", "{\"thing\": 42}\n", 9},
		{"GET", "http://127.0.0.1:8080/no-blank-line-before", "", "", 12},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(reqs), len(want), reqs)
	}
	for i, w := range want {
		r := reqs[i]
		if r.Method != w.method || r.URL != w.url || headerString(r.Header) != w.header || string(r.Body) != w.body || r.Line != w.line || r.Weight != 1 {
			t.Errorf("request %d = %s %s [%s] %q line %d weight %v, want %+v", i, r.Method, r.URL, headerString(r.Header), r.Body, r.Line, r.Weight, w)
		}
	}
}

func TestReadTargetsJSONLines(t *testing.T) {
	reqs, err := ReadTargets("testdata/targets/mix.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, method, url, header, body string
		weight                          float64
		line                            int
	}{
		{"home", "GET", "http://127.0.0.1:8080/", "", "", 3, 1},
		{"search", "", "http://127.0.0.1:8080/search?q=tare", "Accept=application/json,X-Multi=a;b", "", 2, 3},
		{"", "POST", "http://127.0.0.1:8080/things", "", "{\"thing\": 42}\n", 1, 4},
		{"inline", "PUT", "http://127.0.0.1:8080/things/1", "", `{"thing": 43}`, 0.5, 5},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		r := reqs[i]
		if r.Name != w.name || r.Method != w.method || r.URL != w.url || headerString(r.Header) != w.header || string(r.Body) != w.body || r.Weight != w.weight || r.Line != w.line {
			t.Errorf("request %d = %+v, want %+v", i, r, w)
		}
	}
	m, err := NewMix("mix.jsonl", reqs, Config{}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := strings.Join(m.Names(), " | "); got != "home | search | POST http://127.0.0.1:8080/things | inline" {
		t.Errorf("names %q: an unnamed request is named by its method and URL", got)
	}
}

// headerString is "Name=v1;v2,Name2=v" in name order.
func headerString(h http.Header) string {
	var parts []string
	for name, vs := range h {
		parts = append(parts, name+"="+strings.Join(vs, ";"))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// TestParseTargetsBad: each malformed form names the file, the line and
// the accepted form.
func TestParseTargetsBad(t *testing.T) {
	const httpWant, jsonWant = "the file must be vegeta's http format", `the file must be JSON lines like {"name"`
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "# nothing\n\n", []string{`targets file "t" has no request`}},
		{"no url", "GET\n", []string{"line 1:", `"GET" is not a request line like GET http://127.0.0.1:8080/`, httpWant}},
		{"not http", "GET ftp://x/\n", []string{"line 1:", "url must start with http:// or https://", httpWant}},
		{"bad header", "GET http://h/\nX-Bad header\n", []string{"line 2:", `header must look like "Name: value"`, httpWant}},
		{"two bodies", "POST http://h/\n@testdata/targets/thing.json\n@testdata/targets/thing.json\n", []string{"line 3:", "a second body for the request of line 1"}},
		{"missing body", "POST http://h/\n@nope.json\n", []string{"line 2:", `body file "nope.json" does not exist`}},
		{"empty body path", "POST http://h/\n@\n", []string{"line 2:", "a body file with no path"}},
		{"bad json", `{"url": "http://h/"` + "\n", []string{"line 1:", "not a JSON target object", jsonWant}},
		{"unknown key", `{"url": "http://h/", "rps": 5}` + "\n", []string{"line 1:", `unknown field "rps"`, jsonWant}},
		{"json no url", `{"name": "x"}` + "\n", []string{"line 1:", "url is required", jsonWant}},
		{"json second line", `{"url": "http://h/"}` + "\n" + `{"url": "http://h/", "weight": 0}` + "\n", []string{"line 2:", "weight must be a positive number; got 0"}},
		{"json header type", `{"url": "http://h/", "header": {"X": 5}}` + "\n", []string{"line 1:", `header "X" must be a string or a list of strings`}},
		{"json both bodies", `{"url": "http://h/", "body": "a", "body_file": "b"}` + "\n", []string{"line 1:", "both body and body_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTargets(strings.NewReader(tt.in), "t", ".")
			if err == nil {
				t.Fatal("parsed")
			}
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("code %s, want EINVALID", tare.ErrorCode(err))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{"GET http://h/\nX: y\n\nPOST http://h/a\n@x\n", `{"url": "http://h/", "weight": 2}`, "# c\n", "GET  http://h/ x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		reqs, err := ParseTargets(strings.NewReader(s), "fuzz", t.TempDir())
		if err != nil {
			if c := tare.ErrorCode(err); c != tare.EINVALID && c != tare.ENOTFOUND {
				t.Fatalf("error %v has code %s", err, c)
			}
			return
		}
		for _, r := range reqs {
			if !(r.Weight > 0) || r.Line < 1 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// TestMixPick: weighted picks are within the binomial bounds, the same
// seed gives the same sequence, and in order cycles through the file.
func TestMixPick(t *testing.T) {
	reqs := []Request{
		{URL: "http://127.0.0.1:1/a", Weight: 3, Line: 1},
		{URL: "http://127.0.0.1:1/b", Weight: 2, Line: 2},
		{URL: "http://127.0.0.1:1/c", Weight: 1, Line: 3},
	}
	mix := func(inOrder bool, seed uint64) *Mix {
		m, err := NewMix("t", reqs, Config{}, inOrder, seed)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	const n = 60000
	a, b, c := mix(false, 1), mix(false, 1), mix(false, 2)
	counts := make([]int, 3)
	same, differ := true, false
	for seq := range uint64(n) {
		i := a.Pick(seq)
		counts[i]++
		same = same && b.Pick(seq) == i
		differ = differ || c.Pick(seq) != i
	}
	for i, p := range []float64{0.5, 1.0 / 3, 1.0 / 6} {
		sd := math.Sqrt(n * p * (1 - p))
		if math.Abs(float64(counts[i])-n*p) > 4*sd {
			t.Errorf("request %d: %d of %d, want %.0f ± %.0f", i, counts[i], n, n*p, 4*sd)
		}
	}
	if !same || !differ {
		t.Errorf("same seed same sequence: %v; another seed another: %v", same, differ)
	}
	o := mix(true, 1)
	for seq := range uint64(7) {
		if got := o.Pick(seq); got != int(seq%3) {
			t.Errorf("in order, arrival %d took %d", seq, got)
		}
	}
}
