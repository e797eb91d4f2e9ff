package modelsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrRequest is wrapped by every error of parseRequest and checkContext:
// the body is not a chat completion request this server can answer.
var ErrRequest = errors.New("bad chat completion request")

// requestError is a refused request in the words of the OpenAI API: what
// is wrong, the parameter at fault (param, a path like
// "messages[0].content") and a code, so that a client, or the person
// reading its log, knows which field to fix and what type it wanted. It
// never shows the server's own types: the body is the client's contract,
// not this package's structs.
type requestError struct {
	param string // "" when no single parameter is at fault: JSON null
	code  string // "" for JSON null
	msg   string
}

func (e *requestError) Error() string { return e.msg }

func (e *requestError) Unwrap() error { return ErrRequest }

// OpenAI's codes for the refusals below.
const (
	codeInvalidType     = "invalid_type"
	codeMissing         = "missing_required_parameter"
	codeEmptyArray      = "empty_array"
	codeBelowMin        = "integer_below_min_value"
	codeContextExceeded = "context_length_exceeded"
)

// invalidType is OpenAI's message for a value of the wrong JSON type:
// "Invalid type for 'messages': expected an array of objects, but got a
// string instead."
func invalidType(param, want string, got json.RawMessage) error {
	return &requestError{param: param, code: codeInvalidType,
		msg: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, kindOf(got))}
}

func missing(param string) error {
	return &requestError{param: param, code: codeMissing, msg: fmt.Sprintf("Missing required parameter: '%s'.", param)}
}

// kindOf names the JSON type of a valid value as OpenAI's messages do.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "a decimal"
	}
	return "an integer"
}

// isNull reports whether a field is absent or JSON null, which OpenAI
// takes as "not set" for an optional parameter.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// request is what the server takes from a chat completion body.
type request struct {
	Model        string
	PromptTokens int
	CachedTokens int    // of PromptTokens, those the prefix cache held: no prefill
	MaxTokens    int    // 0 when the request set no cap
	maxParam     string // the parameter MaxTokens came from, for messages
	Stream       bool
	IncludeUsage bool
}

// object is a JSON object, its members kept raw so that each one's type is
// checked, and named, on its own. Unknown members are ignored, as real
// servers do.
type object map[string]json.RawMessage

// parseRequest decodes and checks a chat completion body. Errors are a
// *requestError wrapping ErrRequest that names the parameter at fault.
func parseRequest(body []byte) (request, error) {
	if !json.Valid(body) {
		return request{}, &requestError{msg: "We could not parse the JSON body of your request: it is not valid JSON. The API expects a JSON object, like {\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}."}
	}
	top, ok := asObject(body)
	if !ok {
		return request{}, &requestError{msg: fmt.Sprintf("We could not parse the JSON body of your request: expected a JSON object, but got %s instead.", kindOf(body))}
	}
	var req request
	var err error
	if req.Model, err = optString(top, "model", "model"); err != nil {
		return request{}, err
	}
	if req.PromptTokens, err = promptTokens(top["messages"]); err != nil {
		return request{}, err
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		n, set, err := optInt(top, name)
		switch {
		case err != nil:
			return request{}, err
		case !set:
			continue
		case n < 1:
			return request{}, &requestError{param: name, code: codeBelowMin,
				msg: fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", name, n)}
		}
		// max_completion_tokens is the newer name and wins.
		if req.MaxTokens == 0 {
			req.MaxTokens, req.maxParam = n, name
		}
	}
	if req.Stream, err = optBool(top, "stream", "stream"); err != nil {
		return request{}, err
	}
	if n, set, err := optInt(top, "n"); err != nil {
		return request{}, err
	} else if set && n != 1 {
		return request{}, &requestError{param: "n",
			msg: fmt.Sprintf("Invalid 'n': this simulated model generates one choice; expected 1, but got %d instead.", n)}
	}
	if raw := top["stream_options"]; !isNull(raw) {
		opts, ok := asObject(raw)
		if !ok {
			return request{}, invalidType("stream_options", "an object", raw)
		}
		if !req.Stream {
			return request{}, &requestError{param: "stream_options",
				msg: "The 'stream_options' parameter is only allowed when 'stream' is enabled."}
		}
		if req.IncludeUsage, err = optBool(opts, "include_usage", "stream_options.include_usage"); err != nil {
			return request{}, err
		}
	}
	return req, nil
}

// promptTokens checks the messages and counts their words.
func promptTokens(raw json.RawMessage) (int, error) {
	if isNull(raw) {
		return 0, missing("messages")
	}
	var msgs []json.RawMessage
	if raw = bytes.TrimSpace(raw); raw[0] != '[' || json.Unmarshal(raw, &msgs) != nil {
		return 0, invalidType("messages", "an array of objects", raw)
	}
	if len(msgs) == 0 {
		return 0, &requestError{param: "messages", code: codeEmptyArray,
			msg: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."}
	}
	tokens := 0
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		msg, ok := asObject(m)
		if !ok {
			return 0, invalidType(param, "an object", m)
		}
		if isNull(msg["role"]) {
			return 0, missing(param + ".role")
		}
		if _, err := optString(msg, "role", param+".role"); err != nil {
			return 0, err
		}
		words, err := contentWords(msg["content"], param+".content")
		if err != nil {
			return 0, err
		}
		tokens += words
	}
	return max(tokens, 1), nil
}

// contentWords counts the words of a message content, which is a string,
// an array of parts (only "text" parts count) or null.
func contentWords(raw json.RawMessage, param string) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, invalidType(param, "a string", raw)
		}
		return len(strings.Fields(s)), nil
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return 0, invalidType(param, "one of a string or array of objects", raw)
		}
		n := 0
		for i, p := range parts {
			pp := fmt.Sprintf("%s[%d]", param, i)
			part, ok := asObject(p)
			if !ok {
				return 0, invalidType(pp, "an object", p)
			}
			typ, err := optString(part, "type", pp+".type")
			if err != nil {
				return 0, err
			}
			if typ != "text" {
				continue
			}
			text, err := optString(part, "text", pp+".text")
			if err != nil {
				return 0, err
			}
			n += len(strings.Fields(text))
		}
		return n, nil
	}
	return 0, invalidType(param, "one of a string or array of objects", raw)
}

// asObject decodes a JSON object; ok is false for any other value.
func asObject(raw json.RawMessage) (object, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, false
	}
	return o, true
}

// optString reads an optional string member; param names it in errors.
func optString(o object, name, param string) (string, error) {
	raw := o[name]
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidType(param, "a string", raw)
	}
	return s, nil
}

// optBool reads an optional boolean member; param names it in errors.
func optBool(o object, name, param string) (bool, error) {
	raw := o[name]
	if isNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalidType(param, "a boolean", raw)
	}
	return b, nil
}

// optInt reads an optional top-level integer member. An integer too large
// for an int is read as the largest one: any limit refuses it alike.
func optInt(o object, name string) (n int, set bool, err error) {
	raw := bytes.TrimSpace(o[name])
	if isNull(raw) {
		return 0, false, nil
	}
	if kindOf(raw) != "an integer" {
		return 0, false, invalidType(name, "an integer", raw)
	}
	v, perr := strconv.ParseInt(string(raw), 10, 64)
	if perr != nil {
		v = math.MaxInt64
		if raw[0] == '-' {
			v = math.MinInt64
		}
	}
	return int(max(min(v, math.MaxInt), math.MinInt)), true, nil
}

// checkContext refuses a request that does not fit the context length, as
// OpenAI does: a completion cap above what the model can generate at all,
// or messages and completion together longer than the context.
func checkContext(req request, contextLength int) error {
	if req.MaxTokens > contextLength {
		return &requestError{param: req.maxParam,
			msg: fmt.Sprintf("%s is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.",
				req.maxParam, req.MaxTokens, contextLength, req.MaxTokens)}
	}
	switch {
	case req.MaxTokens > 0 && req.PromptTokens+req.MaxTokens > contextLength:
		return &requestError{param: "messages", code: codeContextExceeded,
			msg: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				contextLength, req.PromptTokens+req.MaxTokens, req.PromptTokens, req.MaxTokens)}
	case req.PromptTokens >= contextLength:
		return &requestError{param: "messages", code: codeContextExceeded,
			msg: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
				contextLength, req.PromptTokens)}
	}
	return nil
}
