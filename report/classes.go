package report

import (
	"fmt"

	"github.com/tare-dev/tare"
)

// classRows are a model load's figures per class of call (per turn of a
// conversation, a prefix group's first and later requests) and per
// conversation.
func classRows(p *printer, m *tare.ModelSummary) {
	for i, c := range m.Classes {
		name := ""
		if i == 0 {
			name = "by class"
		}
		input := ""
		if c.InputTokens != nil {
			input = "   " + num(c.InputTokens) + " input tokens"
		}
		p.row(name, "%-14s %6d sent  %d ok  %d errors   ttft p50 %s  p95 %s   latency p50 %s  p95 %s%s", c.Name, c.Requests, c.OK, c.Errors,
			ms(c.TTFT.P50), ms(c.TTFT.P95), ms(c.Latency.P50), ms(c.Latency.P95), input)
	}
	if c := m.Conversations; c != nil {
		p.row("conversations", "%d   %d with every turn ok   %.2f turns each   took p50 %s  p95 %s", c.Count, c.Complete, c.Turns,
			ms(c.Duration.P50), ms(c.Duration.P95))
	}
}

// classFigures are classRows for the HTML report's figures: a row per
// class, named by it, and one for the conversations.
func classFigures(m *tare.ModelSummary) []kv {
	var out []kv
	for _, c := range m.Classes {
		text := fmt.Sprintf("%d sent · %d ok · %d errors · ttft p50 %s · p95 %s · latency p50 %s · p95 %s", c.Requests, c.OK, c.Errors,
			ms(c.TTFT.P50), ms(c.TTFT.P95), ms(c.Latency.P50), ms(c.Latency.P95))
		if c.InputTokens != nil {
			text += " · " + num(c.InputTokens) + " input tokens"
		}
		out = append(out, kv{c.Name, text})
	}
	if c := m.Conversations; c != nil {
		out = append(out, kv{"conversations", fmt.Sprintf("%d · %d with every turn ok · %.2f turns each · took p50 %s · p95 %s", c.Count, c.Complete, c.Turns,
			ms(c.Duration.P50), ms(c.Duration.P95))})
	}
	return out
}
