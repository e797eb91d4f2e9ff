package modelsim

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func wordsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + itoa(i)
	}
	return out
}

// TestPrefixCacheTake: only leading blocks count, a block is known by
// what precedes it too, and the least recently used block goes first.
func TestPrefixCacheTake(t *testing.T) {
	c := newPrefixCache(4)
	a := wordsN("a", 40) // two full blocks and 8 words
	if got := c.take(a); got != 0 {
		t.Errorf("first take cached %d, want 0", got)
	}
	if got := c.take(a); got != 32 {
		t.Errorf("second take cached %d, want the 32 of two full blocks", got)
	}
	// The same second block behind another first one is another block.
	b := append(wordsN("b", 16), a[16:]...)
	if got := c.take(b); got != 0 {
		t.Errorf("a shared second block alone cached %d, want 0", got)
	}
	// a's blocks are now the least recently used of four; two more evict them.
	c.take(wordsN("c", 32))
	if got := c.take(a); got != 0 {
		t.Errorf("after eviction cached %d, want 0", got)
	}
	var nilCache *prefixCache
	if got := nilCache.take(a); got != 0 {
		t.Errorf("no cache cached %d", got)
	}
}

// ttft streams body and returns the time to its first content chunk.
func ttft(t *testing.T, url, path, body string) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string }
				Text  string
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content+c.Choices[0].Text != "" {
			return time.Since(start)
		}
	}
	t.Fatalf("%s: no content in the stream", path)
	return 0
}

// TestPrefixCacheTTFT: a prompt sent again, or behind the same long
// prefix, skips most of its prefill, so its TTFT is a fraction of the
// first's; without the cache it is not. Relative figures only: the work
// is calibrated CPU, slower on a busy machine for both alike.
func TestPrefixCacheTTFT(t *testing.T) {
	prefix := strings.Join(wordsN("p", 1600), " ")
	body := func(tail string) string {
		b, _ := json.Marshal(map[string]any{"stream": true, "max_tokens": 1,
			"messages": []map[string]string{{"role": "user", "content": prefix + " " + tail}}})
		return string(b)
	}
	for _, blocks := range []int{0, 1024} {
		s := newServer(t, Config{PromptCost: 250 * time.Microsecond, TokenCost: time.Microsecond, PrefixCache: blocks})
		ts := serve(t, s)
		first := ttft(t, ts.URL, "/v1/chat/completions", body("one question"))
		later := ttft(t, ts.URL, "/v1/chat/completions", body("another question"))
		cached := later < first/3
		if cached != (blocks > 0) {
			t.Errorf("prefix cache of %d blocks: TTFT %v then %v behind the same prefix", blocks, first, later)
		}
	}
}

// TestOtherEndpoints: /v1/completions streams text chunks and counts
// the prompt; /v1/embeddings answers a vector and the input's tokens.
func TestOtherEndpoints(t *testing.T) {
	s := newServer(t, quick(Config{MeanTokens: 3}))
	rec := do(t, s, http.MethodPost, "/v1/completions", `{"prompt": "one two three four", "stream": true, "stream_options": {"include_usage": true}}`)
	out := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(out, `"object":"text_completion"`) || !strings.Contains(out, `"text":"`) ||
		!strings.Contains(out, `"prompt_tokens":4,"completion_tokens":3`) || !strings.HasSuffix(out, "data: [DONE]\n\n") || strings.Contains(out, "delta") {
		t.Errorf("stream of /v1/completions: %d\n%s", rec.Code, out)
	}
	rec = do(t, s, http.MethodPost, "/v1/completions", `{"prompt": "one two", "max_tokens": 2}`)
	var tc struct {
		Object  string
		Choices []struct{ Text string }
		Usage   usage
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &tc); err != nil || tc.Object != "text_completion" || len(tc.Choices) != 1 || len(strings.Fields(tc.Choices[0].Text)) != 2 || tc.Usage.PromptTokens != 2 {
		t.Errorf("/v1/completions: %v %s", err, rec.Body)
	}
	rec = do(t, s, http.MethodPost, "/v1/completions", `{"prompt": 5}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"param":"prompt"`) {
		t.Errorf("a number for prompt: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, s, http.MethodPost, "/v1/embeddings", `{"input": ["one two", "three"]}`)
	var el embeddingList
	if err := json.Unmarshal(rec.Body.Bytes(), &el); err != nil || len(el.Data) != 1 || len(el.Data[0].Embedding) != embeddingDims || el.Usage.PromptTokens != 3 {
		t.Errorf("/v1/embeddings: %v %s", err, rec.Body)
	}
	rec = do(t, s, http.MethodPost, "/v1/embeddings", `{"model": "other", "input": "x"}`)
	if rec.Code != http.StatusNotFound {
		t.Errorf("/v1/embeddings of another model: %d %s", rec.Code, rec.Body)
	}
}
