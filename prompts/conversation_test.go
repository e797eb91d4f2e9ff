package prompts

import (
	"os"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

func TestReadConversations(t *testing.T) {
	tests := []struct {
		file   string
		reply  bool
		system []int      // system messages per conversation
		turns  [][]string // user turns per conversation
		budget [][]int
	}{
		{"testdata/multiturn.json", false, []int{1, 0}, [][]string{{"what is steal time", "and how do I see it"}, {"hello"}}, [][]int{{0, 0}, {0}}},
		{"testdata/multiturn.json", true, []int{1, 0}, [][]string{{"what is steal time", "and how do I see it"}, {"hello"}}, [][]int{{10, 1}, {0}}},
		{"testdata/conversations.jsonl", true, []int{1, 0}, [][]string{{"one two", "six"}, {"seven eight"}}, [][]int{{3, 0}, {4}}},
	}
	for _, tt := range tests {
		cs, err := ReadConversations(tt.file, tt.reply)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != len(tt.turns) {
			t.Fatalf("%s: %d conversations, want %d", tt.file, len(cs), len(tt.turns))
		}
		for i, c := range cs {
			if len(c.System) != tt.system[i] || len(c.Turns) != len(tt.turns[i]) {
				t.Fatalf("%s reply %v: conversation %d = %+v, want %d system messages and turns %q", tt.file, tt.reply, i, c, tt.system[i], tt.turns[i])
			}
			for j, turn := range c.Turns {
				if turn.Content != tt.turns[i][j] || turn.MaxTokens != tt.budget[i][j] {
					t.Errorf("%s reply %v: conversation %d turn %d = %+v, want %q budget %d", tt.file, tt.reply, i, j, turn, tt.turns[i][j], tt.budget[i][j])
				}
			}
		}
	}
}

func TestParseConversationsBad(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"no user turn", `{"messages": [{"role": "system", "content": "a"}]}`, "line 1: a conversation with no user turn"},
		{"no human", `[{"conversations": [{"from": "gpt", "value": "a"}]}]`, "item 1: a conversation with no user turn"},
		{"no role", `{"messages": [{"role": "user", "content": "a"}, {"content": "b"}]}`, "line 1: message 2 has no role"},
		{"max tokens", `{"prompt": "a", "max_tokens": -1}`, "line 1: max_tokens must be 1 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConversations(strings.NewReader(tt.in), "p", false)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("ParseConversations: %v; want EINVALID containing %q", err, tt.want)
			}
		})
	}
}

// TestScript: arrivals walk the conversations' turns in order, round and
// round, and every turn of one instance has its first turn's number.
func TestScript(t *testing.T) {
	s := NewScript([]Conversation{
		{Turns: make([]Turn, 3)},
		{Turns: make([]Turn, 1)},
		{Turns: make([]Turn, 2)},
	})
	want := []struct {
		id         uint64
		conv, turn int
	}{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {3, 1, 0}, {4, 2, 0}, {4, 2, 1}, {6, 0, 0}, {6, 0, 1}, {6, 0, 2}, {9, 1, 0}}
	for seq, w := range want {
		p := s.At(uint64(seq))
		if p.ID != w.id || p.Conv != &s.convs[w.conv] || p.Turn != w.turn {
			t.Errorf("arrival %d: id %d conversation %p turn %d; want id %d conversation %d turn %d", seq, p.ID, p.Conv, p.Turn, w.id, w.conv, w.turn)
		}
	}
	for i, w := range []int{3, 1, 2, 3} {
		if got := s.Turns(uint64(i)); got != w {
			t.Errorf("Turns(%d) = %d, want %d", i, got, w)
		}
	}
}

func FuzzParseConversations(f *testing.F) {
	for _, file := range []string{"testdata/multiturn.json", "testdata/conversations.jsonl", "testdata/sharegpt.json", "testdata/prompts.jsonl"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseConversations(strings.NewReader(s), "fuzz", true)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("%v is not EINVALID", err)
			}
			return
		}
		for _, c := range cs {
			if len(c.Turns) == 0 {
				t.Fatalf("accepted a conversation with no turn: %+v", c)
			}
			for _, turn := range c.Turns {
				if turn.MaxTokens < 0 {
					t.Fatalf("accepted a negative budget: %+v", c)
				}
			}
		}
	})
}
