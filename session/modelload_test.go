package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// measureModel runs spec against the simulated model sim, as tare run
// does, and returns the summary and every result the target saw.
func measureModel(t *testing.T, sim modelsim.Config, spec *Spec) (tare.Summary, []tare.Result) {
	t.Helper()
	spec.Target.Model = testservice.Model(t, sim).URL + "/v1"
	spec.Host.Tick = 100 * time.Millisecond
	spec.Judge.Thresholds = deafToTheHost()
	p, err := Prepare(t.Context(), spec, "tare run")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	cfg, err := p.Window(nil, tare.Run{Label: "model load"}, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []tare.Result
	target := cfg.Target
	cfg.Target = tare.TargetFunc(func(ctx context.Context, res *tare.Result) {
		target.Do(ctx, res)
		mu.Lock()
		seen = append(seen, *res)
		mu.Unlock()
	})
	s, _, _, err := Measure(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, seen
}

func class(t *testing.T, s tare.Summary, name string) tare.ClassSummary {
	t.Helper()
	if s.Model != nil {
		for _, c := range s.Model.Classes {
			if c.Name == name {
				return c
			}
		}
	}
	t.Fatalf("no class %q in %+v", name, s.Model)
	return tare.ClassSummary{}
}

// TestTraceReplay: a trace's requests arrive at its own times (sped
// up), each with its input and output lengths, and the whole trace is
// the run.
func TestTraceReplay(t *testing.T) {
	spec := NewSpec(10, 0, 30*time.Second) // tare run's defaults
	spec.Target.ModelLoad.Trace, spec.Target.ModelLoad.TraceSpeed = "../prompts/testdata/mooncake.jsonl", 2
	s, rs := measureModel(t, modelsim.Config{IterationsPerMS: 1, MeanTokens: 100}, spec)
	if len(rs) != 3 || s.Requests.OK != 3 {
		t.Fatalf("%d requests, %d ok; want the trace's 3", len(rs), s.Requests.OK)
	}
	slices.SortFunc(rs, func(a, b tare.Result) int { return int(a.Seq) - int(b.Seq) })
	want := []struct {
		at            time.Duration
		input, output int
	}{{0, 1100, 12}, {125 * time.Millisecond, 1030, 8}, {500 * time.Millisecond, 40, 3}}
	for i, w := range want {
		r := rs[i]
		if at := r.Scheduled.Sub(rs[0].Scheduled); at != w.at || r.PromptTokens != w.input || r.OutputTokens != w.output {
			t.Errorf("request %d at %v with %d input and %d output tokens; want %v, %d and %d", i, at, r.PromptTokens, r.OutputTokens, w.at, w.input, w.output)
		}
	}
}

// TestSharedPrefixGroups: against a server with a prefix cache, the later
// requests of a group, whose prefix is cached, answer first far sooner
// than each group's first.
func TestSharedPrefixGroups(t *testing.T) {
	spec := NewSpec(20, 12, 0)
	spec.Load.Arrival = "constant"
	spec.Target.InputTokens, spec.Target.OutputTokens = "10", "2"
	spec.Target.ModelLoad.PrefixTokens, spec.Target.ModelLoad.PrefixGroups = 1000, 3
	s, _ := measureModel(t, modelsim.Config{PromptCost: 200 * time.Microsecond, TokenCost: 100 * time.Microsecond, PrefixCache: 1024}, spec)
	first, later := class(t, s, "group first"), class(t, s, "group later")
	if first.Requests != 3 || later.Requests != 9 {
		t.Fatalf("group first %d requests, later %d; want 3 and 9", first.Requests, later.Requests)
	}
	if *later.TTFT.P50 > *first.TTFT.P50/3 {
		t.Errorf("TTFT p50 of a group's first request %vms, of its later ones %vms: want the cached prefix to make them far faster", *first.TTFT.P50, *later.TTFT.P50)
	}
}

// TestConversationTurns: every turn of a conversation file runs, each
// with the history the server's answers made (input tokens rising by
// turn), and on a server without a prefix cache the TTFT rises with it;
// the conversations are counted.
func TestConversationTurns(t *testing.T) {
	spec := NewSpec(5, 12, 0)
	spec.Target.Prompts = "testdata/conversations.jsonl"
	spec.Target.ModelLoad.ThinkTime, spec.Target.ModelLoad.PinTurns = "20ms", true
	s, rs := measureModel(t, modelsim.Config{PromptCost: time.Millisecond, TokenCost: 100 * time.Microsecond, MeanTokens: 150}, spec)
	turns := []tare.ClassSummary{class(t, s, "turn 1"), class(t, s, "turn 2"), class(t, s, "turn 3")}
	for i, c := range turns {
		if c.Requests != 4 || c.OK != 4 || c.InputTokens == nil {
			t.Fatalf("turn %d: %+v; want 4 requests ok, their input counted", i+1, c)
		}
		if i > 0 && *c.InputTokens < *turns[i-1].InputTokens+100 {
			t.Errorf("turn %d: %v input tokens, turn %d %v: want the answer before in the history", i+1, *c.InputTokens, i, *turns[i-1].InputTokens)
		}
	}
	if *turns[2].TTFT.P50 < 2**turns[0].TTFT.P50 {
		t.Errorf("TTFT p50 %vms at turn 1, %vms at turn 3: want it to rise with the history", *turns[0].TTFT.P50, *turns[2].TTFT.P50)
	}
	if c := s.Model.Conversations; c == nil || c.Count != 4 || c.Complete != 4 || c.Turns != 3 {
		t.Errorf("conversations %+v, want 4 of 3 turns, all complete", c)
	}
	// Pinned: a connection per conversation, each turn on its own's.
	conns := map[uint64]uint64{}
	for _, r := range rs {
		if c, ok := conns[r.Conversation]; ok && c != r.Conn {
			t.Errorf("conversation %d on connections %d and %d, want one", r.Conversation, c, r.Conn)
		}
		conns[r.Conversation] = r.Conn
	}
	if len(conns) != 4 {
		t.Errorf("%d conversations seen by the target, want 4", len(conns))
	}
}

// TestModelLoadRefused: settings that cannot go together are refused
// before any load, naming the flags.
func TestModelLoadRefused(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Spec)
		want string
	}{
		{"trace without a model", func(s *Spec) {
			s.Target.Model, s.Target.URL, s.Target.ModelLoad.Trace = "", "http://127.0.0.1:1/", "t.csv"
		}, "shape the load of a model endpoint: give --model URL"},
		{"trace and prompts", func(s *Spec) { s.Target.ModelLoad.Trace, s.Target.Prompts = "t.csv", "p.jsonl" }, "--trace gives each request its lengths"},
		{"trace and rate", func(s *Spec) { s.Target.ModelLoad.Trace, s.Load.RateDefault = "t.csv", false }, "--trace sets the arrival times: drop --rate"},
		{"speed without trace", func(s *Spec) { s.Target.ModelLoad.TraceSpeed = 2 }, "--trace-speed replays a trace faster"},
		{"groups without prefix", func(s *Spec) { s.Target.ModelLoad.PrefixGroups = 3 }, "--prefix-groups groups prompts"},
		{"prefix and prompts", func(s *Spec) { s.Target.ModelLoad.PrefixTokens, s.Target.Prompts = 10, "p.jsonl" }, "--prefix-tokens makes synthetic prompts"},
		{"think without conversations", func(s *Spec) { s.Target.ModelLoad.ThinkTime = "1s" }, "shape conversations: give a --prompts file"},
		{"pinned first turns", func(s *Spec) {
			s.Target.ModelLoad.PinTurns, s.Target.ModelLoad.FirstTurnOnly, s.Target.Prompts = true, true, "testdata/conversations.jsonl"
		}, "shape conversations: give a --prompts file of them (and no --first-turn-only)"},
		{"bad think time", func(s *Spec) {
			s.Target.ModelLoad.ThinkTime, s.Target.Prompts = "soon", "testdata/conversations.jsonl"
		}, "--think-time must be a duration"},
		{"conversations to embeddings", func(s *Spec) {
			s.Target.Prompts, s.Target.ModelLoad.Endpoint = "testdata/conversations.jsonl", "embeddings"
		}, "conversations (a --prompts file of them) go to chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := NewSpec(10, 5, 0)
			spec.Target.Model = "http://127.0.0.1:1/v1"
			tt.set(spec)
			p, err := Prepare(t.Context(), spec, "tare run")
			if err == nil {
				p.Release()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("Prepare: %v; want EINVALID saying %q", err, tt.want)
			}
		})
	}
}
