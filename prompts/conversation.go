package prompts

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tare-dev/tare"
)

// Conversation is one user's conversation of a dataset: the messages
// that open it (system prompts) and its user turns in order. The
// recorded assistant answers are not kept: each turn goes to the server
// with the answers the server itself gave to the turns before.
type Conversation struct {
	System []tare.Message
	Turns  []Turn
}

// Turn is one user message of a conversation and its output budget: the
// item's max_tokens, or with replyBudget the length in words of the
// recorded reply that followed it; 0 leaves it to the run's.
type Turn struct {
	Content   string
	MaxTokens int
}

// ReadConversations reads a dataset as conversations, every user turn
// kept: ShareGPT items (human turns; gpt turns give the reply budgets),
// messages items (user messages; leading system messages open it) and
// prompt items (one turn). Errors are Read's.
func ReadConversations(path string, replyBudget bool) ([]Conversation, error) {
	return readWith(path, replyBudget, ParseConversations)
}

// ParseConversations reads conversations from r; file names it in
// messages.
func ParseConversations(r io.Reader, file string, replyBudget bool) ([]Conversation, error) {
	var out []Conversation
	err := eachItem(r, file, func(raw []byte) error {
		c, err := parseConversation(raw, replyBudget)
		out = append(out, c)
		return err
	})
	return out, err
}

func parseConversation(raw []byte, replyBudget bool) (Conversation, error) {
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		return Conversation{}, fmt.Errorf("not a JSON object with prompt, messages or conversations (%s)", jsonMessage(err))
	}
	var c Conversation
	// reply sets the budget of the last turn from a recorded answer.
	reply := func(answer string) {
		if replyBudget && len(c.Turns) > 0 && c.Turns[len(c.Turns)-1].MaxTokens == 0 {
			c.Turns[len(c.Turns)-1].MaxTokens = max(len(strings.Fields(answer)), 1)
		}
	}
	switch {
	case it.Prompt != nil:
		if strings.TrimSpace(*it.Prompt) == "" {
			return c, fmt.Errorf("an empty prompt")
		}
		c.Turns = []Turn{{Content: *it.Prompt}}
	case len(it.Messages) > 0:
		for i, m := range it.Messages {
			switch m.Role {
			case "":
				return c, fmt.Errorf("message %d has no role", i+1)
			case "user":
				c.Turns = append(c.Turns, Turn{Content: m.Content})
			case "assistant":
				reply(m.Content)
			default:
				if len(c.Turns) == 0 {
					c.System = append(c.System, m)
				}
			}
		}
	case len(it.Conversations) > 0:
		for _, turn := range it.Conversations {
			switch turn.From {
			case "human", "user":
				c.Turns = append(c.Turns, Turn{Content: turn.Value})
			case "gpt", "assistant", "chatgpt", "bard", "bing":
				reply(turn.Value)
			case "system":
				if len(c.Turns) == 0 {
					c.System = append(c.System, tare.Message{Role: "system", Content: turn.Value})
				}
			}
		}
	default:
		return c, fmt.Errorf("none of prompt, messages or conversations")
	}
	if len(c.Turns) == 0 {
		return c, fmt.Errorf("a conversation with no user turn")
	}
	if it.MaxTokens != nil {
		if *it.MaxTokens < 1 {
			return c, fmt.Errorf("max_tokens must be 1 or more; got %d", *it.MaxTokens)
		}
		for i := range c.Turns {
			c.Turns[i].MaxTokens = *it.MaxTokens
		}
	}
	return c, nil
}

// Script maps arrival numbers to conversation turns: the conversations
// in file order, round and round, each turn one arrival, a
// conversation's turns consecutive. It is a pure function of the
// arrival's number, like Dataset.
type Script struct {
	convs  []Conversation
	starts []uint64 // starts[i]: the arrival number of conversation i's first turn in one round
	round  uint64   // turns in one round
}

// NewScript returns the script of convs, which must not be empty.
func NewScript(convs []Conversation) *Script {
	s := &Script{convs: convs}
	for _, c := range convs {
		s.starts = append(s.starts, s.round)
		s.round += uint64(len(c.Turns))
	}
	return s
}

// Place is where an arrival falls in a script.
type Place struct {
	// ID numbers the conversation's instance: the arrival number of its
	// first turn, the same for every turn of it.
	ID   uint64
	Conv *Conversation
	Turn int // from 0
}

// At is arrival seq's place.
func (s *Script) At(seq uint64) Place {
	r, off := seq/s.round, seq%s.round
	// The last start at or before off.
	lo, hi := 0, len(s.starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.starts[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	turn := off - s.starts[lo]
	return Place{ID: r*s.round + s.starts[lo], Conv: &s.convs[lo], Turn: int(turn)}
}

// Turns is how many turns the i-th conversation started (from 0) has: the
// arrival process's i-th arrival brings them all.
func (s *Script) Turns(i uint64) int {
	return len(s.convs[i%uint64(len(s.convs))].Turns)
}

// Turn is arrival seq's turn, its budget output's draw when the dataset
// gives none and output's Mean is set.
func (s *Script) Turn(seq uint64, output Lengths, seed uint64) tare.Turn {
	p := s.At(seq)
	t := p.Conv.Turns[p.Turn]
	turn := tare.Turn{Conversation: p.ID, Number: p.Turn + 1, Last: p.Turn == len(p.Conv.Turns)-1,
		System: p.Conv.System, Message: tare.Message{Role: "user", Content: t.Content}, MaxTokens: t.MaxTokens}
	if turn.MaxTokens == 0 && output.Mean > 0 {
		turn.MaxTokens = output.draw(seed, seq, streamOutput)
	}
	return turn
}
