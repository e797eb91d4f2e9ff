package modelsim

import (
	"fmt"
	"time"

	"github.com/tare-dev/tare"
)

// Defaults used when a Config field is zero. They make a small CPU-bound
// model: a 64-token answer to a 20-word prompt costs about 130 ms of one
// idle core.
const (
	DefaultPromptCost = 50 * time.Microsecond
	DefaultTokenCost  = 2 * time.Millisecond
	DefaultMeanTokens = 64
	DefaultModel      = "tare-sim"
	// DefaultContextLength is the simulated context window, in tokens:
	// messages and completion together, and so the most max_tokens can
	// ask for. That of many small open models.
	DefaultContextLength = 8192
	// DefaultListen is where `tare model` listens unless told otherwise:
	// loopback only, so a simulated endpoint is never exposed by accident.
	DefaultListen = "127.0.0.1:8089"
)

// maxBody bounds a request body: a chat request larger than this is refused
// with 413 rather than read into memory.
const maxBody = 1 << 20

// Config describes the simulated model. The zero value serves DefaultModel
// with the default costs.
type Config struct {
	// PromptCost is the CPU work per prompt token (prefill), as measured on
	// an idle core.
	PromptCost time.Duration
	// TokenCost is the CPU work per generated token (decode), as measured
	// on an idle core.
	TokenCost time.Duration
	// MeanTokens is the mean number of output tokens of the draw; a
	// request's max_tokens caps the draw.
	MeanTokens int
	// TokenSpread is the sigma of the lognormal output-token draw (its mean
	// stays MeanTokens); 0 makes every answer MeanTokens long.
	TokenSpread float64
	// Seed makes the token draws, words and faults reproducible.
	Seed uint64
	// Model is the model id served.
	Model string
	// ContextLength is the context window in tokens, messages and
	// completion together: a request whose max_tokens exceeds it, or whose
	// messages and max_tokens together do, is refused with a 400 naming
	// the limit, as OpenAI refuses one; an answer without max_tokens stops
	// there (finish "length"). DefaultContextLength when 0.
	ContextLength int

	// Parallel caps how many requests generate at once; the others wait for
	// a slot (queueing shows in their TTFT). 0 means no cap.
	Parallel int
	// PrefixCache, when positive, is the blocks of CacheBlockTokens prompt
	// tokens a prefix cache holds (prefixcache.go): a prompt's leading
	// blocks found there cost no prefill. 0: no cache, every prompt token
	// paid for.
	PrefixCache int
	// KeepAlive, when positive, makes a stream send an SSE comment
	// (": keep-alive") whenever that long has passed without a write during
	// prefill, so proxies do not drop a quiet connection. 0 sends none.
	KeepAlive time.Duration

	// ErrorRate is the share (0–1) of requests answered 503 at once.
	ErrorRate float64
	// CutRate is the share (0–1) of streams aborted half-way, before
	// [DONE], by dropping the connection.
	CutRate float64

	// IterationsPerMS overrides the calibration (rounds of the work loop per
	// millisecond of an idle core); 0 calibrates with Calibrate.
	IterationsPerMS float64
	// Now stamps the "created" field; nil means time.Now.
	Now func() time.Time
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.PromptCost == 0 {
		c.PromptCost = DefaultPromptCost
	}
	if c.TokenCost == 0 {
		c.TokenCost = DefaultTokenCost
	}
	if c.MeanTokens == 0 {
		c.MeanTokens = DefaultMeanTokens
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.ContextLength == 0 {
		c.ContextLength = DefaultContextLength
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first field that is out of range, as a *tare.Error
// with code EINVALID.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return tare.Errorf(tare.EINVALID, "model simulator: %s", fmt.Sprintf(format, args...))
	}
	switch {
	case c.PromptCost < 0:
		return bad("prompt cost %v: want 0 or more", c.PromptCost)
	case c.TokenCost < 0:
		return bad("token cost %v: want 0 or more", c.TokenCost)
	case c.MeanTokens < 0:
		return bad("mean tokens %d: want 1 or more", c.MeanTokens)
	case c.TokenSpread < 0 || c.TokenSpread > 3:
		return bad("token spread %g: want a lognormal sigma between 0 and 3", c.TokenSpread)
	case c.ContextLength < 0:
		return bad("context length %d: want 0 (the default, %d) or more", c.ContextLength, DefaultContextLength)
	case c.Parallel < 0:
		return bad("parallel %d: want 0 (no cap) or more", c.Parallel)
	case c.PrefixCache < 0:
		return bad("prefix cache %d: want 0 (none) or more blocks", c.PrefixCache)
	case c.KeepAlive < 0:
		return bad("keep-alive %v: want 0 (none) or more", c.KeepAlive)
	case !(c.ErrorRate >= 0 && c.ErrorRate <= 1):
		return bad("error rate %g: want a share between 0 and 1", c.ErrorRate)
	case !(c.CutRate >= 0 && c.CutRate <= 1):
		return bad("cut rate %g: want a share between 0 and 1", c.CutRate)
	case c.IterationsPerMS < 0:
		return bad("iterations per ms %g: want 0 (calibrate) or more", c.IterationsPerMS)
	}
	return nil
}
