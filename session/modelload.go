package session

import (
	"slices"
	"strings"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/prompts"
	"github.com/tare-dev/tare/settings"
)

// ModelLoad is how a model endpoint is loaded beyond one prompt per
// request (docs/model.md): the endpoint, a conversation's turns, shared
// prefixes and a replayed trace.
type ModelLoad struct {
	Endpoint      string // one of openai.Endpoints; "": the URL's, else chat
	FirstTurnOnly bool   // a --prompts file's first user turns only, as before conversations
	ThinkTime     string // prompts.ParseThink's form
	SessionHeader string
	PinTurns      bool // a conversation's turns on a connection of its own
	PrefixTokens  int
	PrefixGroups  int
	Trace         string // a trace file (prompts.ReadTrace)
	TraceSpeed    float64
}

// given says some model load setting is set.
func (m ModelLoad) given() bool {
	return m != ModelLoad{}
}

// ModelLoadFields are the model load's settings.
func (t *TargetSpec) ModelLoadFields() []settings.Field {
	m := &t.ModelLoad
	return []settings.Field{
		{Flag: "endpoint", Key: "endpoint", Value: settings.String(&m.Endpoint), Usage: "with --model, the endpoint loaded: " + strings.Join(openai.Endpoints, ", ") + " (default: the one the URL ends in, else chat/completions); completions sends the prompt as one text, embeddings as the input (no stream: TTFT is the whole call)"},
		{Flag: "first-turn-only", Key: "first-turn-only", Value: settings.Bool(&m.FirstTurnOnly), Usage: "with --model and a --prompts file of conversations, send each one's first user turn alone (the file's messages as they are), as tare did before conversations"},
		{Flag: "think-time", Key: "think-time", Value: settings.String(&m.ThinkTime), Usage: "with --model and a --prompts file of conversations, the user's time between an answer and the next turn: a duration (2s), exp:MEAN (exponential, like exp:5s) or uniform:MIN..MAX (like uniform:1s..5s), drawn from --seed (default none)"},
		{Flag: "session-header", Key: "session-header", Value: settings.String(&m.SessionHeader), Usage: "with --model and conversations, a header carrying the conversation's number on each of its turns, for servers that route a session to one replica (like X-Session-Id)"},
		{Flag: "pin-turns", Key: "pin-turns", Value: settings.Bool(&m.PinTurns), Usage: "with --model and conversations, send each conversation's turns on a connection of its own, kept open between turns and closed after the last (not counted against --connections), as a chat client holding its connection does; by default a turn takes whichever pooled connection is free"},
		{Flag: "prefix-tokens", Key: "prefix-tokens", Value: settings.Int(&m.PrefixTokens), Usage: "with --model and synthetic prompts, put this many tokens of a shared prefix before each prompt (--input-tokens is then the part after it); arrival i is in group i mod --prefix-groups, and the figures compare each group's first request with its later ones"},
		{Flag: "prefix-groups", Key: "prefix-groups", Value: settings.Int(&m.PrefixGroups), Usage: "with --prefix-tokens, how many groups share a prefix each (default 1), their words drawn from --seed"},
		{Flag: "trace", Key: "trace", Value: settings.String(&m.Trace), Usage: `with --model, replay a trace: its arrival times (instead of --rate) and each request's input and output lengths: an Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens) or Mooncake JSON lines ({"timestamp" ms, "input_length", "output_length", "hash_ids"}, the hashes shared prefixes); the whole trace unless --jobs or --duration ends it first`},
		{Flag: "trace-speed", Key: "trace-speed", Value: settings.Float64(&m.TraceSpeed), Usage: "with --trace, replay it this many times as fast (2 halves every gap)"},
	}
}

// modelPrompts is what the model load's settings make of the prompts:
// the Client's (prompts, class) or the conversations' turns. It sets
// the load's trace and turns.
type modelPrompts struct {
	prompts tare.Prompts
	class   func(uint64) string
	conv    *openai.ConversationConfig
}

// checkModelLoad refuses model load settings that do not go together,
// before any file is read.
func (t *TargetSpec) checkModelLoad(l *LoadSpec) error {
	if t.Model == "" && t.ModelLoad.given() {
		return settings.Errorf("", "%s, %s, %s, %s and %s shape the load of a model endpoint: give %s URL", settings.Name("endpoint"), settings.Name("trace"), settings.Name("prefix-tokens"), settings.Name("think-time"), settings.Name("first-turn-only"), settings.Name("model"))
	}
	m := t.ModelLoad
	conversational := m.ThinkTime != "" || m.SessionHeader != "" || m.PinTurns
	switch {
	case m.PrefixTokens < 0:
		return settings.Errorf("prefix-tokens", "must be 0 or more; got %d", m.PrefixTokens)
	case m.PrefixGroups < 0:
		return settings.Errorf("prefix-groups", "must be 0 or more; got %d", m.PrefixGroups)
	case m.PrefixGroups > 0 && m.PrefixTokens == 0:
		return settings.Errorf("prefix-groups", "groups prompts that share a prefix: give %s N too", settings.Name("prefix-tokens"))
	case m.PrefixTokens > 0 && (t.Prompts != "" || m.Trace != ""):
		return settings.Errorf("prefix-tokens", "makes synthetic prompts: drop it with %s or %s, whose prompts are their own", settings.Name("prompts"), settings.Name("trace"))
	case m.Trace != "" && (t.Prompts != "" || t.InputTokens != "" || t.OutputTokens != ""):
		return settings.Errorf("trace", "gives each request its lengths: drop %s, %s and %s", settings.Name("prompts"), settings.Name("input-tokens"), settings.Name("output-tokens"))
	case m.Trace != "" && len(l.Stages) > 0:
		return settings.Errorf("trace", "sets the arrival times: drop %s", settings.Name("stages"))
	case m.Trace != "" && !l.RateDefault:
		return settings.Errorf("trace", "sets the arrival times: drop %s (%s speeds it up)", settings.Name("rate"), settings.Name("trace-speed"))
	case m.TraceSpeed != 0 && m.TraceSpeed != 1 && m.Trace == "":
		return settings.Errorf("trace-speed", "replays a trace faster: give %s FILE", settings.Name("trace"))
	case conversational && (t.Prompts == "" || m.FirstTurnOnly):
		return settings.Errorf("", "%s, %s and %s shape conversations: give a %s file of them (and no %s)", settings.Name("think-time"), settings.Name("session-header"), settings.Name("pin-turns"), settings.Name("prompts"), settings.Name("first-turn-only"))
	case m.FirstTurnOnly && t.Prompts == "":
		return settings.Errorf("first-turn-only", "needs a %s file of conversations", settings.Name("prompts"))
	}
	return nil
}

// modelLoad reads the model load's settings, checked; ps is the prompts the
// ordinary settings make (PromptSource).
func (t *TargetSpec) modelLoad(l *LoadSpec, ps tare.Prompts) (modelPrompts, error) {
	m := t.ModelLoad
	out := modelPrompts{prompts: ps}
	conversational := m.ThinkTime != "" || m.SessionHeader != "" || m.PinTurns
	switch {
	case m.PrefixTokens > 0:
		in, outLen := prompts.Lengths{}, prompts.Lengths{}
		var err error
		if t.InputTokens != "" {
			if in, err = prompts.ParseLengths(t.InputTokens); err != nil {
				return out, &tare.Error{Code: tare.EINVALID, Message: "--input-tokens " + tare.ErrorMessage(err), Err: err}
			}
		}
		if t.OutputTokens != "" {
			if outLen, err = prompts.ParseLengths(t.OutputTokens); err != nil {
				return out, &tare.Error{Code: tare.EINVALID, Message: "--output-tokens " + tare.ErrorMessage(err), Err: err}
			}
		}
		pre := prompts.Prefixes{Tokens: m.PrefixTokens, Groups: max(m.PrefixGroups, 1)}
		out.prompts = prompts.SharedPrefix(in, outLen, pre, l.Seed)
		out.class = func(seq uint64) string {
			if _, first := pre.Group(seq); first {
				return "group first"
			}
			return "group later"
		}
	case m.Trace != "":
		reqs, err := prompts.ReadTrace(m.Trace)
		if err != nil {
			return out, Flagged(err, "")
		}
		speed := m.TraceSpeed
		if speed == 0 {
			speed = 1
		}
		if _, err := arrival.NewTrace(nil, speed); err != nil {
			return out, Flagged(err, "trace-speed")
		}
		l.Trace, l.TraceSpeed = make([]time.Duration, len(reqs)), speed
		for i, r := range reqs {
			l.Trace[i] = r.At
		}
		if l.Jobs == 0 && l.DurationDefault {
			l.Jobs = len(reqs) // the whole trace, not the default duration's share
		}
		out.prompts = prompts.Traced(reqs, l.Seed)
	case t.Prompts != "" && !m.FirstTurnOnly:
		convs, err := prompts.ReadConversations(t.Prompts, t.OutputTokens == "reply")
		if err != nil {
			return out, Flagged(err, "")
		}
		if !conversational && !slices.ContainsFunc(convs, func(c prompts.Conversation) bool { return len(c.Turns) > 1 }) {
			return out, nil // single turns: the prompts as they are
		}
		var outLen prompts.Lengths
		if t.OutputTokens != "" && t.OutputTokens != "reply" {
			outLen, _ = prompts.ParseLengths(t.OutputTokens) // PromptSource checked it
		}
		script, seed := prompts.NewScript(convs), l.Seed
		conv := &openai.ConversationConfig{SessionHeader: m.SessionHeader, Pin: m.PinTurns,
			Turns: func(seq uint64) tare.Turn { return script.Turn(seq, outLen, seed) }}
		if m.ThinkTime != "" {
			think, err := prompts.ParseThink(m.ThinkTime)
			if err != nil {
				return out, &tare.Error{Code: tare.EINVALID, Message: "--think-time " + tare.ErrorMessage(err), Err: err}
			}
			conv.Think = func(c uint64, turn int) time.Duration { return think.Draw(seed, c, turn) }
			conv.MaxThink = think.Longest()
		}
		l.Turns = script.Turns
		out.conv, out.prompts = conv, nil
	}
	return out, nil
}
