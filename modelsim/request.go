package modelsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrRequest is wrapped by every error of parseRequest: the body is not a
// chat completion request this server can answer.
var ErrRequest = errors.New("bad chat completion request")

// request is what the server takes from a chat completion body.
type request struct {
	Model        string
	PromptTokens int
	MaxTokens    int // 0 when the request set no cap
	Stream       bool
	IncludeUsage bool
}

// chatRequest is the JSON body of POST /v1/chat/completions, reduced to the
// fields the simulator reads; unknown fields are ignored, as real servers do.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	N                   *int           `json:"n"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentPart is one element of a message content given as an array.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseRequest decodes and checks a chat completion body. Errors wrap
// ErrRequest and the cause, and name the field.
func parseRequest(body []byte) (request, error) {
	var cr chatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&cr); err != nil {
		return request{}, fmt.Errorf("%w: body is not a JSON object: %w", ErrRequest, err)
	}
	if dec.More() {
		return request{}, fmt.Errorf("%w: trailing data after the JSON object", ErrRequest)
	}
	if len(cr.Messages) == 0 {
		return request{}, fmt.Errorf("%w: messages: want at least one message", ErrRequest)
	}
	req := request{Model: cr.Model, Stream: cr.Stream}
	for i, m := range cr.Messages {
		words, err := contentWords(m.Content)
		if err != nil {
			return request{}, fmt.Errorf("%w: messages[%d].content: %w", ErrRequest, i, err)
		}
		req.PromptTokens += words
	}
	req.PromptTokens = max(req.PromptTokens, 1)
	maxTokens := cr.MaxCompletionTokens
	name := "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, name = cr.MaxTokens, "max_tokens"
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return request{}, fmt.Errorf("%w: %s %d: want 1 or more", ErrRequest, name, *maxTokens)
		}
		req.MaxTokens = *maxTokens
	}
	if cr.N != nil && *cr.N != 1 {
		return request{}, fmt.Errorf("%w: n %d: the simulator generates one choice", ErrRequest, *cr.N)
	}
	if cr.StreamOptions != nil {
		if !cr.Stream {
			return request{}, fmt.Errorf("%w: stream_options: only allowed when stream is true", ErrRequest)
		}
		req.IncludeUsage = cr.StreamOptions.IncludeUsage
	}
	return req, nil
}

// contentWords counts the words of a message content, which is a string,
// an array of parts (only "text" parts count) or null.
func contentWords(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return len(strings.Fields(s)), nil
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return 0, fmt.Errorf("want a string or an array of parts: %w", err)
		}
		n := 0
		for _, p := range parts {
			if p.Type == "text" {
				n += len(strings.Fields(p.Text))
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("got %.20q, want a string or an array of parts", raw)
}
