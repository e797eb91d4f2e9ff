package modelsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
)

// The endpoints beside chat: /v1/completions (a prompt string in, text
// chunks out) and /v1/embeddings (an input in, vectors out, no
// generation). A text completion is served as a chat completion of one
// user message, then written in the completions API's shapes.

// legacyKey marks a request's context as a text completion's.
type legacyKey struct{}

func isLegacy(ctx context.Context) bool { return ctx.Value(legacyKey{}) != nil }

// handleTextCompletions turns a completions body into a chat one and
// serves it so.
func (s *Server) handleTextCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := postBody(w, r)
	if !ok {
		return
	}
	chat, err := chatBody(body)
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{msg: err.Error()}
		}
		writeParamError(w, http.StatusBadRequest, re)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), legacyKey{}, true))
	r.Body = io.NopCloser(bytes.NewReader(chat))
	s.handleCompletions(w, r)
}

// chatBody is a completions body with its prompt as one user message.
func chatBody(body []byte) ([]byte, error) {
	top, ok := asObject(body)
	if !ok {
		return nil, &requestError{msg: "We could not parse the JSON body of your request: expected a JSON object."}
	}
	text, err := inputText(top["prompt"], "prompt")
	if err != nil {
		return nil, err
	}
	delete(top, "prompt")
	msgs, _ := json.Marshal([]message{{Role: "user", Content: text}})
	top["messages"] = msgs
	return json.Marshal(top)
}

// inputText is a prompt or embeddings input: a string, or an array of
// strings (joined; the simulator serves one choice).
func inputText(raw json.RawMessage, param string) (string, error) {
	if isNull(raw) {
		return "", missing(param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil && len(ss) > 0 {
		var b bytes.Buffer
		for i, x := range ss {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(x)
		}
		return b.String(), nil
	}
	return "", invalidType(param, "a string or an array of strings", raw)
}

// textChunk and textCompletion are the completions API's shapes.
type textChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type textChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

// wireChunk is c as written: itself for chat, a text_completion for a
// text completion (its role chunk an empty text, as vLLM's first is).
func wireChunk(ctx context.Context, c chunk) any {
	if !isLegacy(ctx) {
		return c
	}
	t := textChunk{ID: c.ID, Object: "text_completion", Created: c.Created, Model: c.Model, Usage: c.Usage, Choices: []textChoice{}}
	for _, ch := range c.Choices {
		t.Choices = append(t.Choices, textChoice{Index: ch.Index, Text: ch.Delta.Content, FinishReason: ch.FinishReason})
	}
	return t
}

// wireCompletion is c as written (see wireChunk).
func wireCompletion(ctx context.Context, c completion) any {
	if !isLegacy(ctx) {
		return c
	}
	t := textChunk{ID: c.ID, Object: "text_completion", Created: c.Created, Model: c.Model, Usage: &c.Usage}
	for _, ch := range c.Choices {
		finish := ch.FinishReason
		t.Choices = append(t.Choices, textChoice{Index: ch.Index, Text: ch.Message.Content, FinishReason: &finish})
	}
	return t
}

// embeddingDims is the length of the simulated embeddings.
const embeddingDims = 8

type embeddingList struct {
	Object string      `json:"object"`
	Data   []embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  usage       `json:"usage"`
}

type embedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float64 `json:"embedding"`
}

// handleEmbeddings pays the prefill of the input's words, then answers
// one vector: an embedding model's work is all prefill.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, ok := postBody(w, r)
	if !ok {
		return
	}
	top, ok := asObject(body)
	var text string
	var err error
	if !ok {
		err = &requestError{msg: "We could not parse the JSON body of your request: expected a JSON object."}
	} else {
		text, err = inputText(top["input"], "input")
	}
	var model string
	if err == nil {
		model, err = optString(top, "model", "model")
	}
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{msg: err.Error()}
		}
		writeParamError(w, http.StatusBadRequest, re)
		return
	}
	if model != "" && model != s.cfg.Model {
		modelNotFound(w, model)
		return
	}
	req := request{Model: model, PromptTokens: max(len(bytes.Fields([]byte(text))), 1)}
	p := s.plan(req)
	if p.fail {
		writeError(w, http.StatusServiceUnavailable, "server_error", "overloaded", "simulated overload (error rate fault)")
		return
	}
	ctx := r.Context()
	if !s.acquire(ctx) {
		return
	}
	defer s.release()
	g := s.generation(req, p)
	if s.burn(ctx, g, s.prefill(req)) != nil {
		return
	}
	vec := make([]float64, embeddingDims)
	for i := range vec {
		vec[i] = math.Round(g.words.NormFloat64()*1e4) / 1e4
	}
	writeJSON(w, http.StatusOK, embeddingList{Object: "list", Model: s.cfg.Model,
		Data:  []embedding{{Object: "embedding", Embedding: vec}},
		Usage: usage{PromptTokens: req.PromptTokens, TotalTokens: req.PromptTokens}})
}
