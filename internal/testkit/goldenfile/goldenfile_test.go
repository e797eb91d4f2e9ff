package goldenfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{name: "equal", a: "a\nb\n", b: "a\nb\n", want: ""},
		{name: "one line changed, two of context",
			a:    "1\n2\n3\n4\n5\n6\n7\n",
			b:    "1\n2\n3\nfour\n5\n6\n7\n",
			want: "@@ line 2 @@\n  2\n  3\n- 4\n+ four\n  5\n  6\n"},
		{name: "added at the end", a: "a\n", b: "a\nb\n", want: "@@ line 1 @@\n  a\n+ b\n"},
		{name: "removed at the start", a: "a\nb\nc\n", b: "b\nc\n", want: "@@ line 1 @@\n- a\n  b\n  c\n"},
		{name: "two changes far apart, two hunks",
			a:    "x\n1\n2\n3\n4\n5\n6\ny\n",
			b:    "X\n1\n2\n3\n4\n5\n6\nY\n",
			want: "@@ line 1 @@\n- x\n+ X\n  1\n  2\n@@ line 6 @@\n  5\n  6\n- y\n+ Y\n"},
		{name: "a line moved keeps the rest", a: "a\nb\nc\nd\n", b: "b\nc\na\nd\n", want: "@@ line 1 @@\n- a\n  b\n  c\n+ a\n  d\n"},
		{name: "new file", a: "", b: "a\n", want: "@@ line 1 @@\n+ a\n"},
		{name: "final newline lost", a: "a\n", b: "a", want: "@@ line 1 @@\n- a\n+ a (no newline at the end)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diff([]byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("diff:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestLevels(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{name: "text", text: "latency p95 12 ms\nverdict: SUSPECT\n  why\n", want: []string{"suspect"}},
		{name: "json", text: `{"verdict": {"level": "polluted", "signals": []}, "shards": [{"level": "clean"}]}`, want: []string{"polluted", "clean"}},
		{name: "none", text: "the verdict: not a line that starts with it\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := levels([]byte(tt.text)); !slices.Equal(got, tt.want) {
				t.Errorf("levels = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRewrite: -update writes the new output and says what changed; one
// whose verdict level changed is refused, naming the file and both
// levels, unless accepted on purpose.
func TestRewrite(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	layout := write("layout.golden.txt", "p95 12 ms\nverdict: CLEAN\n")
	changes, err := rewrite(layout, []byte("p95 13 ms\nverdict: CLEAN\n"), false)
	if err != nil || changes != "@@ line 1 @@\n- p95 12 ms\n+ p95 13 ms\n  verdict: CLEAN\n" || read(layout) != "p95 13 ms\nverdict: CLEAN\n" {
		t.Errorf("a figure changed: diff %q, %v, file %q; want it rewritten and the change shown", changes, err, read(layout))
	}
	if changes, err := rewrite(layout, []byte("p95 13 ms\nverdict: CLEAN\n"), false); changes != "" || err != nil {
		t.Errorf("nothing changed: diff %q, %v; want none", changes, err)
	}

	verdict := write("verdict.golden.json", `{"level": "suspect"}`+"\n")
	_, err = rewrite(verdict, []byte(`{"level": "polluted"}`+"\n"), false)
	if !errors.Is(err, errVerdictChanged) {
		t.Fatalf("the level changed: %v, want it refused", err)
	}
	for _, want := range []string{verdict, `from "suspect" to "polluted"`, "-update-verdict", verdictEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if got := read(verdict); got != `{"level": "suspect"}`+"\n" {
		t.Errorf("refused, yet the file is now %q", got)
	}
	if _, err := rewrite(verdict, []byte(`{"level": "polluted"}`+"\n"), true); err != nil || read(verdict) != `{"level": "polluted"}`+"\n" {
		t.Errorf("accepted on purpose: %v, file %q; want it rewritten", err, read(verdict))
	}

	created := filepath.Join(dir, "new.golden.txt")
	if changes, err := rewrite(created, []byte("verdict: POLLUTED\n"), false); err != nil || changes != "@@ line 1 @@\n+ verdict: POLLUTED\n" {
		t.Errorf("a new file: diff %q, %v; want it written, all of it shown", changes, err)
	}
}

// TestCheck compares with the package's own golden file.
func TestCheck(t *testing.T) {
	Check(t, "sample.golden.txt", []byte("p95 12 ms\nverdict: CLEAN\n"))
}
