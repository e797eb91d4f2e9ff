package prompts

import (
	"strings"
	"testing"
)

// TestSharedPrefix: prompts of a group start with the same words, those
// of two groups do not, and only the first arrivals are their group's
// first.
func TestSharedPrefix(t *testing.T) {
	pre := Prefixes{Tokens: 50, Groups: 3}
	gen := SharedPrefix(Lengths{Mean: 20}, Lengths{Mean: 8}, pre, 4)
	prefixOf := func(seq uint64) string {
		w := strings.Fields(gen(seq).Text())
		if len(w) != 70 {
			t.Fatalf("arrival %d: %d words, want 50 + 20", seq, len(w))
		}
		return strings.Join(w[:50], " ")
	}
	for seq := range uint64(12) {
		g, first := pre.Group(seq)
		if first != (seq < 3) || g != seq%3 {
			t.Errorf("arrival %d: group %d first %v", seq, g, first)
		}
		if prefixOf(seq) != prefixOf(g) {
			t.Errorf("arrival %d does not share group %d's prefix", seq, g)
		}
		if strings.Join(strings.Fields(gen(seq).Text())[50:], " ") == strings.Join(strings.Fields(gen(g).Text())[50:], " ") && seq != g {
			t.Errorf("arrival %d repeats its group's first prompt whole", seq)
		}
	}
	if prefixOf(0) == prefixOf(1) {
		t.Error("groups 0 and 1 share a prefix")
	}
}
