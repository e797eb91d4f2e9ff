package servermetrics

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		file string
		want Reading
	}{
		// Two engines: requests summed, the KV cache's share their mean.
		{"vllm.txt", Reading{Server: "vllm", Waiting: 7, Running: f(7), KVCachePct: f(37.5), Preemptions: f(12)}},
		// Before v0.10: gpu_cache_usage_perc, and a counter whose TYPE
		// line drops the _total its sample carries.
		{"vllm-v0.txt", Reading{Server: "vllm", Waiting: 3, Running: f(8), KVCachePct: f(87.5), Preemptions: f(4)}},
		{"sglang.txt", Reading{Server: "sglang", Waiting: 9, Running: f(16), KVCachePct: f(28)}},
		{"tgi.txt", Reading{Server: "tgi", Waiting: 4, Running: f(32)}},
		{"llamacpp.txt", Reading{Server: "llama.cpp", Waiting: 1, Running: f(2), KVCachePct: f(12.5)}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Parse(open(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.want.Server || got.Waiting != tt.want.Waiting || !same(got.Running, tt.want.Running) ||
				!same(got.KVCachePct, tt.want.KVCachePct) || !same(got.Preemptions, tt.want.Preemptions) {
				t.Errorf("Parse = %s, want %s", show(got), show(tt.want))
			}
		})
	}
}

func TestParseUnknown(t *testing.T) {
	_, err := Parse(open(t, "go-process.txt"))
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "vllm:num_requests_waiting") {
		t.Errorf("Parse of a Go process's metrics = %v, want ErrUnknown naming what was looked for", err)
	}
	if _, err := Parse(strings.NewReader("vllm:num_requests_waiting{ 3\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("Parse of a broken line = %v, want a parse error", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm.txt", "vllm-v0.txt", "sglang.txt", "tgi.txt", "llamacpp.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(strings.NewReader(text))
		if err == nil && r.Server == "" {
			t.Errorf("a reading without its server: %+v", r)
		}
	})
}

func open(t *testing.T, name string) *os.File {
	t.Helper()
	fh, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return fh
}

func same(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(r Reading) string {
	v := func(p *float64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s waiting %g running %s kv %s preempted %s", r.Server, r.Waiting, v(r.Running), v(r.KVCachePct), v(r.Preemptions))
}
