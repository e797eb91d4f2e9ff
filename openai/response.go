package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// The kinds of failure a Response.Err holds besides the transport kinds of
// tare.ErrorKind and "http <status>".
const (
	KindStreamError = "stream error" // the server sent an error object inside the stream (or a 200 body)
	KindStreamCut   = "stream cut"   // the stream ended before [DONE]
	KindBadResponse = "bad response" // a body or chunk that is not the JSON expected
)

// Response is one completion as the client measured it. Times carry Go's
// monotonic clock reading, so their differences are immune to clock steps.
type Response struct {
	Sent       time.Time // when the request was handed to the transport
	FirstToken time.Time // the first chunk with content; zero if none came
	Done       time.Time // [DONE] read, the body read, or the failure seen

	Chunks       int             // content chunks received
	OutputTokens int             // from usage when present, else Chunks (streams only)
	TokenSource  string          // "usage", "counted", or "" when unknown
	PromptTokens int             // the server's usage.prompt_tokens; 0 when it gave none (PromptSource "")
	PromptSource string          // "usage", or "" when unknown
	ITL          []time.Duration // gaps between successive content chunks
	FinishReason string          // the last finish_reason the server gave
	Content      string          // the answer's text, when Request.KeepContent asked for it

	Status   int    // HTTP status, 0 when none came
	Err      string // failure kind (see the Kind constants); "" when ok
	Detail   string // the failure in words, never the API key
	BytesIn  int64  // response body bytes read
	BytesOut int64  // request body bytes written
	Conn     uint64 // the connection it was sent on, numbered by Client.Conns; 0 for none
}

// OK reports whether the completion succeeded.
func (r *Response) OK() bool { return r.Err == "" }

// E2E is Done − Sent, the whole completion.
func (r *Response) E2E() time.Duration { return r.Done.Sub(r.Sent) }

// TTFT is FirstToken − Sent, the time to the first content token; 0 when
// no content came. The rule is tare.Result's, which the load engine uses.
func (r *Response) TTFT() time.Duration { return r.timings().TTFT() }

// TPOT is the time per output token after the first, tare.Result's rule
// (vLLM's definition): (e2e − TTFT) / (n − 1); 0 when it cannot be
// measured.
func (r *Response) TPOT() time.Duration { return r.timings().TPOT() }

// timings are the response's clocks as the load engine records them.
func (r *Response) timings() *tare.Result {
	return &tare.Result{Sent: r.Sent, FirstByte: r.FirstToken, Done: r.Done, OutputTokens: r.OutputTokens}
}

// measure accumulates one Response while it is read.
type measure struct {
	ctx     context.Context // the caller's: cancelled means the run stops
	callCtx context.Context // ctx with the client's timeout
	secret  *secret
	r       Response
	keep    bool            // keep the answer's text
	content strings.Builder // the answer's text so far, when keep

	last time.Time // the previous content chunk
}

// keepText adds an answer's piece of text when asked to keep it.
func (m *measure) keepText(p *string) {
	if m.keep && p != nil {
		m.content.WriteString(*p)
	}
}

// fail records a failure of the given kind, now.
func (m *measure) fail(kind, detail string) Response {
	m.r.Done = time.Now()
	m.r.Err = kind
	m.r.Detail = m.redact(detail)
	return m.r
}

// redact removes every credential from a message a server may have echoed
// (OpenAI's 401 quotes the key it was given).
func (m *measure) redact(s string) string {
	for _, v := range m.secret.values {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// transportFail records a transport error, telling a deadline or a
// cancellation, which surface as many different errors, by the contexts.
func (m *measure) transportFail(during string, err error) Response {
	kind := tare.ErrorKind(err)
	switch {
	case m.ctx.Err() != nil && errors.Is(m.ctx.Err(), context.Canceled):
		kind = tare.KindCanceled
	case m.callCtx.Err() != nil:
		kind = tare.KindTimeout
	}
	return m.fail(kind, during+": "+err.Error())
}

// apiError is OpenAI's error object, {"error": {...}}; some servers put a
// plain string there instead, and vLLM has used {"object": "error", ...}.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

// errorText renders the error carried by a body or chunk, or "" if it has
// none.
func errorText(raw json.RawMessage, object, message string) string {
	if len(raw) > 0 && string(raw) != "null" {
		var e apiError
		if json.Unmarshal(raw, &e) == nil && (e.Message != "" || e.Type != "") {
			s := e.Message
			if e.Type != "" {
				s = e.Type + ": " + s
			}
			if e.Code != nil {
				s += fmt.Sprintf(" (code %v)", e.Code)
			}
			return s
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			return str
		}
		return string(raw)
	}
	if object == "error" {
		return cmp.Or(message, "error object without a message")
	}
	return ""
}

// maxErrorBody is how much of a non-2xx body is read for its message.
const maxErrorBody = 8 << 10

// readHTTPError records a status outside 2xx, with the server's message.
func (m *measure) readHTTPError(body io.Reader) {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var v struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
	}
	detail := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &v) == nil {
		if s := errorText(v.Error, v.Object, v.Message); s != "" {
			detail = s
		}
	}
	if len(detail) > 200 {
		detail = detail[:200] + "…"
	}
	m.fail(tare.HTTPKind(m.r.Status), fmt.Sprintf("status %d: %s", m.r.Status, detail))
}

// chunkJSON is the part of a chat.completion.chunk (or chat.completion)
// the client reads.
type chunkJSON struct {
	Choices []struct {
		Delta        contentJSON  `json:"delta"`
		Message      *contentJSON `json:"message"`
		Text         *string      `json:"text"` // a text completion's
		FinishReason *string      `json:"finish_reason"`
	} `json:"choices"`
	Data  []json.RawMessage `json:"data"` // embeddings
	Usage *struct {
		CompletionTokens *int `json:"completion_tokens"`
		PromptTokens     *int `json:"prompt_tokens"`
	} `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
}

type contentJSON struct {
	Content          *string `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

func nonEmpty(p *string) bool { return p != nil && *p != "" }

// hasContent reports whether the delta carries generated text.
func (c *contentJSON) hasContent() bool {
	return nonEmpty(c.Content) || nonEmpty(c.ReasoningContent) || nonEmpty(c.Reasoning)
}

// readStream reads an event stream to [DONE], timing each content chunk.
func (m *measure) readStream(body io.Reader) {
	sc := newSSEScanner(body)
	usage := -1
	for sc.Next() {
		now := time.Now()
		ev := sc.Event()
		data := strings.TrimSpace(ev.Data)
		if data == "[DONE]" {
			m.r.Done = now
			m.setTokens(usage)
			m.r.Content = m.content.String()
			return
		}
		var c chunkJSON
		err := json.Unmarshal([]byte(data), &c)
		if ev.Name == "error" {
			// An error event, whatever its data looks like.
			msg := data
			if err == nil {
				msg = cmp.Or(errorText(c.Error, c.Object, c.Message), data)
			}
			m.fail(KindStreamError, fmt.Sprintf("after %d chunks: %.200s", m.r.Chunks, msg))
			return
		}
		if err != nil {
			m.fail(KindBadResponse, fmt.Sprintf("chunk %d: %v: %.80q", m.r.Chunks+1, err, data))
			return
		}
		if msg := errorText(c.Error, c.Object, c.Message); msg != "" {
			m.fail(KindStreamError, fmt.Sprintf("after %d chunks: %.200s", m.r.Chunks, msg))
			return
		}
		if c.Usage != nil && c.Usage.CompletionTokens != nil {
			usage = *c.Usage.CompletionTokens
		}
		m.setPromptTokens(&c)
		content := false
		for _, ch := range c.Choices {
			content = content || ch.Delta.hasContent() || nonEmpty(ch.Text)
			m.keepText(ch.Delta.Content)
			m.keepText(ch.Text)
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				m.r.FinishReason = *ch.FinishReason
			}
		}
		if !content {
			continue
		}
		if m.r.Chunks == 0 {
			m.r.FirstToken = now
		} else {
			m.r.ITL = append(m.r.ITL, now.Sub(m.last))
		}
		m.last = now
		m.r.Chunks++
	}
	err := sc.Err()
	switch {
	case m.callCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		m.transportFail(fmt.Sprintf("read stream after %d chunks", m.r.Chunks), cmp.Or(err, m.callCtx.Err()))
	case err == nil:
		m.fail(KindStreamCut, fmt.Sprintf("stream ended after %d chunks without [DONE]", m.r.Chunks))
	default:
		reason := err.Error()
		if !errors.Is(err, ErrSSE) {
			reason = tare.ErrorKind(err) + ": " + reason
		}
		m.fail(KindStreamCut, fmt.Sprintf("after %d chunks: %s", m.r.Chunks, reason))
	}
}

// setTokens records the output token count: the server's usage when it
// gave one, else the content chunks counted.
func (m *measure) setTokens(usage int) {
	if usage >= 0 {
		m.r.OutputTokens, m.r.TokenSource = usage, "usage"
		return
	}
	m.r.OutputTokens, m.r.TokenSource = m.r.Chunks, "counted"
}

// maxBody bounds a non-streamed completion body.
const maxBody = 16 << 20

// readBody reads a non-streamed completion. Its content arrives all at
// once, so FirstToken is Done and TPOT is unknown; without usage the token
// count is unknown too (one body is not a count of tokens).
func (m *measure) readBody(body io.Reader) {
	b, err := io.ReadAll(io.LimitReader(body, maxBody))
	if err != nil {
		m.transportFail("read body", err)
		return
	}
	now := time.Now()
	var c chunkJSON
	if err := json.Unmarshal(b, &c); err != nil {
		m.fail(KindBadResponse, fmt.Sprintf("body: %v: %.80q", err, b))
		return
	}
	if msg := errorText(c.Error, c.Object, c.Message); msg != "" {
		m.fail(KindStreamError, msg)
		return
	}
	m.r.Done = now
	for _, ch := range c.Choices {
		if ch.Message != nil {
			m.keepText(ch.Message.Content)
		}
		m.keepText(ch.Text)
		if (ch.Message != nil && ch.Message.hasContent()) || nonEmpty(ch.Text) {
			m.r.Chunks = 1
			m.r.FirstToken = now
		}
		if ch.FinishReason != nil {
			m.r.FinishReason = *ch.FinishReason
		}
	}
	m.r.Content = m.content.String()
	if len(c.Data) > 0 {
		// Embeddings: the vectors are the answer, all at once.
		m.r.FirstToken = now
	}
	if c.Usage != nil && c.Usage.CompletionTokens != nil {
		m.r.OutputTokens, m.r.TokenSource = *c.Usage.CompletionTokens, "usage"
	}
	m.setPromptTokens(&c)
}

// setPromptTokens records the prompt's length when the chunk's usage
// gives it.
func (m *measure) setPromptTokens(c *chunkJSON) {
	if c.Usage != nil && c.Usage.PromptTokens != nil {
		m.r.PromptTokens, m.r.PromptSource = *c.Usage.PromptTokens, "usage"
	}
}
