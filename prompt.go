package tare

import "strings"

// Prompt is one request of a prompt dataset for a model endpoint or a
// job queue: the chat messages to send and the output budget.
type Prompt struct {
	Messages  []Message
	MaxTokens int // 0 leaves the budget to the target's default
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Text is the prompt as one user message, for targets that take a single
// prompt (a queue job): the user messages' contents, a blank line apart.
func (p Prompt) Text() string {
	var parts []string
	for _, m := range p.Messages {
		if m.Role == "user" || m.Role == "" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Prompts gives the prompt of arrival seq; nil means the target's one
// configured prompt for every arrival.
type Prompts func(seq uint64) Prompt

// Turn is one arrival's turn of a conversation: the messages that open
// the conversation, the user message of this turn and its output budget.
// The answers of the turns before are the server's own, kept by the
// target.
type Turn struct {
	// Conversation numbers the conversation's instance: the arrival
	// number of its first turn, the same for all its turns.
	Conversation uint64
	Number       int  // from 1
	Last         bool // no turn follows
	System       []Message
	Message      Message
	MaxTokens    int // 0 leaves the budget to the target's default
}

// Turns gives the turn of arrival seq.
type Turns func(seq uint64) Turn
