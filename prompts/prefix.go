package prompts

import (
	"strings"

	"github.com/tare-dev/tare"
)

// Prefixes describes synthetic prompts in groups sharing a prefix, the
// case a server's prefix cache serves (a system prompt, a document asked
// several questions): arrival seq is in group seq mod Groups, and its
// prompt is the group's Tokens words followed by its own synthetic words.
type Prefixes struct {
	Tokens, Groups int
}

// Group is arrival seq's group, and whether it is the group's first
// arrival: the one that finds no cached prefix.
func (p Prefixes) Group(seq uint64) (group uint64, first bool) {
	g := uint64(max(p.Groups, 1))
	return seq % g, seq < g
}

// SharedPrefix is Synthetic with each prompt behind its group's prefix;
// input is the length of the part after it (a Mean of 0: the prefix
// alone).
func SharedPrefix(input, output Lengths, prefix Prefixes, seed uint64) tare.Prompts {
	rest := Synthetic(input, output, seed)
	return func(seq uint64) tare.Prompt {
		p := rest(seq)
		group, _ := prefix.Group(seq)
		var b strings.Builder
		b.Grow(prefix.Tokens * 6)
		for i := range prefix.Tokens {
			if i > 0 {
				b.WriteByte(' ')
			}
			w := mix64(seed ^ mix64(group^streamGroups) ^ mix64(uint64(i)))
			b.WriteString(words[w%uint64(len(words))])
		}
		if text := p.Text(); text != "" {
			b.WriteByte(' ')
			b.WriteString(text)
		}
		p.Messages = []tare.Message{{Role: "user", Content: b.String()}}
		return p
	}
}
