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
