package prompts

import (
	"math"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestReadJSONLines(t *testing.T) {
	ps, err := Read("testdata/prompts.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text string
		max  int
		msgs int
	}{{"one two three", 5, 1}, {"four five", 0, 2}, {"six", 2, 1}}
	if len(ps) != len(want) {
		t.Fatalf("%d prompts, want %d", len(ps), len(want))
	}
	for i, w := range want {
		if ps[i].Text() != w.text || ps[i].MaxTokens != w.max || len(ps[i].Messages) != w.msgs {
			t.Errorf("prompt %d = %+v, want %+v", i, ps[i], w)
		}
	}
}

func TestReadShareGPT(t *testing.T) {
	for _, reply := range []bool{false, true} {
		ps, err := Read("testdata/sharegpt.json", reply)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].Text() != "what is steal time" || ps[1].Text() != "hello" {
			t.Fatalf("prompts %+v: want the first human turns", ps)
		}
		wantMax := []int{0, 0}
		if reply {
			wantMax = []int{10, 1} // the replies' words
		}
		if ps[0].MaxTokens != wantMax[0] || ps[1].MaxTokens != wantMax[1] {
			t.Errorf("reply budget %v: max tokens %d, %d; want %v", reply, ps[0].MaxTokens, ps[1].MaxTokens, wantMax)
		}
	}
}

func TestParseBad(t *testing.T) {
	const form = "the file must be JSON lines like {\"prompt\""
	tests := []struct{ name, in, want string }{
		{"empty", "\n\n", `prompts file "p": no prompt in it`},
		{"not json", "{\"prompt\": \"a\"}\nhello\n", `prompts file "p", line 2: not a JSON object with prompt, messages or conversations`},
		{"no prompt", `{"text": "a"}`, "line 1: none of prompt, messages or conversations"},
		{"empty prompt", `{"prompt": " "}`, "line 1: an empty prompt"},
		{"no role", `{"messages": [{"content": "a"}]}`, "line 1: message 1 has no role"},
		{"max tokens", `{"prompt": "a", "max_tokens": 0}`, "line 1: max_tokens must be 1 or more; got 0"},
		{"no human", `[{"conversations": [{"from": "gpt", "value": "a"}]}]`, "item 1: a conversation with no human turn"},
		{"bad array", `[{"conversations": 5}]`, "item 1: not a JSON object"},
		{"truncated array", `[{"prompt": "a"}`, "not a JSON array of conversations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in), "p", false)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), form) || tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("Parse: %v; want EINVALID containing %q and the accepted form", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"prompt": "a", "max_tokens": 3}`, `[{"conversations": [{"from": "human", "value": "x"}]}]`, `{"messages": [{"role": "user", "content": "b"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := Parse(strings.NewReader(s), "fuzz", true)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("%v is not EINVALID", err)
			}
			return
		}
		for _, p := range ps {
			if len(p.Messages) == 0 || p.MaxTokens < 0 {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}

func TestParseLengths(t *testing.T) {
	for in, want := range map[string]Lengths{"512,128": {512, 128}, " 64 ": {64, 0}, "1, 0": {1, 0}} {
		if got, err := ParseLengths(in); err != nil || got != want {
			t.Errorf("ParseLengths(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5,1", "512,-1", "a,b", "512,128,3"} {
		if _, err := ParseLengths(in); err == nil || !strings.Contains(err.Error(), "must be MEAN or MEAN,SPREAD in tokens, like 512,128") {
			t.Errorf("ParseLengths(%q): %v", in, err)
		}
	}
}

// TestSynthetic: the lengths are drawn per arrival, the same for the same
// seed, with the mean and spread asked.
func TestSynthetic(t *testing.T) {
	gen := Synthetic(Lengths{512, 128}, Lengths{128, 32}, 7)
	again := Synthetic(Lengths{512, 128}, Lengths{128, 32}, 7)
	const n = 4000
	var sumIn, sumOut, sqIn float64
	for seq := range uint64(n) {
		p := gen(seq)
		words := len(strings.Fields(p.Text()))
		if q := again(seq); q.Text() != p.Text() || q.MaxTokens != p.MaxTokens {
			t.Fatalf("arrival %d: two prompts from one seed", seq)
		}
		if words < 1 || p.MaxTokens < 1 {
			t.Fatalf("arrival %d: %d words, budget %d", seq, words, p.MaxTokens)
		}
		sumIn += float64(words)
		sqIn += float64(words) * float64(words)
		sumOut += float64(p.MaxTokens)
	}
	meanIn, meanOut := sumIn/n, sumOut/n
	sdIn := math.Sqrt(sqIn/n - meanIn*meanIn)
	// Standard errors: 128/√4000 ≈ 2, 32/√4000 ≈ 0.5; five of them.
	if math.Abs(meanIn-512) > 10 || math.Abs(meanOut-128) > 2.5 || math.Abs(sdIn-128) > 10 {
		t.Errorf("input mean %.1f sd %.1f, output mean %.1f; want 512, 128 and 128", meanIn, sdIn, meanOut)
	}
	if p := Synthetic(Lengths{}, Lengths{16, 0}, 1)(3); len(p.Messages) != 0 || p.MaxTokens != 16 {
		t.Errorf("output alone = %+v, want no messages and a budget of 16", p)
	}
}
