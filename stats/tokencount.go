package stats

import "github.com/tare-dev/tare"

// promptCount compares, request by request, the server's count of the
// prompt (its usage) with tare's own (the prompt's words).
type promptCount struct {
	compared, disagreed int
	tokens, words       int
}

func (c *promptCount) add(res *tare.Result) {
	if res.PromptTokenSource != "usage" || res.PromptWords <= 0 || res.PromptTokens <= 0 {
		return
	}
	c.compared++
	c.tokens += res.PromptTokens
	c.words += res.PromptWords
	diff := res.PromptTokens - res.PromptWords
	if diff < 0 {
		diff = -diff
	}
	if diff > tare.TokenMarginTokens && 100*float64(diff) > tare.TokenMarginPct*float64(res.PromptWords) {
		c.disagreed++
	}
}

func (c *promptCount) summary() *tare.TokenCount {
	if c.compared == 0 {
		return nil
	}
	return &tare.TokenCount{
		Compared: c.compared, Disagreed: c.disagreed,
		DisagreedPct:  round(100*float64(c.disagreed)/float64(c.compared), 1),
		MarginPct:     tare.TokenMarginPct,
		MarginTokens:  tare.TokenMarginTokens,
		TokensPerWord: round(float64(c.tokens)/float64(c.words), 2),
	}
}
