package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// talk runs one conversation of len(users) turns the way the engine
// would: every turn's arrival at once, each on its own goroutine.
func talk(t *testing.T, cv *Conversation, users []string) []tare.Result {
	t.Helper()
	turns := func(seq uint64) tare.Turn {
		return tare.Turn{Conversation: 0, Number: int(seq) + 1, Last: int(seq) == len(users)-1,
			System: []tare.Message{{Role: "system", Content: "be brief"}}, Message: tare.Message{Role: "user", Content: users[seq]}}
	}
	cv.cfg.Turns = turns
	out := make([]tare.Result, len(users))
	now := time.Now()
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() {
			out[i] = tare.Result{Seq: uint64(i), Scheduled: now, Sent: now}
			cv.Do(context.Background(), &out[i])
		})
	}
	wg.Wait()
	return out
}

// TestConversationHistory: each turn goes with the conversation so far,
// the server's own answers in it (its prompt grows by the answer before
// and its own words), after the answer before and the think time, and
// its TTFT rises with the history on a server without a prefix cache.
func TestConversationHistory(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{PromptCost: 400 * time.Microsecond, TokenCost: 100 * time.Microsecond, MeanTokens: 300})
	c := newClient(t, Config{URL: ts.URL + "/v1"})
	const think = 30 * time.Millisecond
	cv := NewConversation(c, ConversationConfig{Think: func(uint64, int) time.Duration { return think }, MaxThink: think})
	users := []string{"one two three", "four five", "six", "seven eight"}
	rs := talk(t, cv, users)
	for i, r := range rs {
		if r.Err != "" || r.PromptTokenSource != "usage" {
			t.Fatalf("turn %d: %s (prompt tokens from %q)", i+1, r.Err, r.PromptTokenSource)
		}
		if want := "turn " + strconv.Itoa(i+1); r.Class != want || r.Conversation != 1 {
			t.Errorf("turn %d: class %q conversation %d, want %q and 1", i+1, r.Class, r.Conversation, want)
		}
		if i == 0 {
			if r.PromptTokens != 2+3 {
				t.Errorf("turn 1: %d prompt tokens, want the system's 2 and the user's 3", r.PromptTokens)
			}
			continue
		}
		prev := rs[i-1]
		if want := prev.PromptTokens + prev.OutputTokens + len(strings.Fields(users[i])); r.PromptTokens != want {
			t.Errorf("turn %d: %d prompt tokens, want %d: the turn before's %d, its answer's %d and %d words", i+1, r.PromptTokens, want, prev.PromptTokens, prev.OutputTokens, len(strings.Fields(users[i])))
		}
		if gap := r.Scheduled.Sub(prev.Done); gap != think {
			t.Errorf("turn %d scheduled %v after the answer before, want the think time %v", i+1, gap, think)
		}
	}
	if first, last := rs[0].TTFT(), rs[3].TTFT(); last < 2*first {
		t.Errorf("TTFT %v at turn 1, %v at turn 4 over %d prompt tokens: want it to rise with the history", first, last, rs[3].PromptTokens)
	}
	if len(cv.live) != 0 {
		t.Errorf("%d conversations still held after their last turn", len(cv.live))
	}
}

// TestConversationSessionHeader: every turn carries the conversation's
// number in the session header.
func TestConversationSessionHeader(t *testing.T) {
	sim, err := modelsim.New(modelsim.Config{IterationsPerMS: 1, MeanTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Session-Id"))
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	cv := NewConversation(newClient(t, Config{URL: ts.URL + "/v1"}), ConversationConfig{SessionHeader: "X-Session-Id"})
	talk(t, cv, []string{"a", "b"})
	if strings.Join(seen, ",") != "1,1" {
		t.Errorf("session headers %q, want 1 on both turns", seen)
	}
}

// TestConversationTurnLost: a turn whose turn before never comes fails
// as lost once its bound passes, and does not hold the ones after.
func TestConversationTurnLost(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{IterationsPerMS: 1, MeanTokens: 2})
	c := newClient(t, Config{URL: ts.URL + "/v1", Timeout: 50 * time.Millisecond})
	cv := NewConversation(c, ConversationConfig{Turns: func(seq uint64) tare.Turn {
		return tare.Turn{Number: int(seq) + 1, Last: seq == 2, Message: tare.Message{Role: "user", Content: "x"}}
	}})
	now := time.Now()
	var lost, after tare.Result
	lost = tare.Result{Seq: 1, Scheduled: now, Sent: now} // turn 2; turn 1 was dropped
	cv.Do(context.Background(), &lost)
	after = tare.Result{Seq: 2, Scheduled: now, Sent: now}
	cv.Do(context.Background(), &after)
	if lost.Err != KindTurnLost || after.Err != "" {
		t.Errorf("turn 2: %q, turn 3: %q; want %q and ok", lost.Err, after.Err, KindTurnLost)
	}
}

// TestConversationPinned: pinned, a conversation's turns go on one
// connection of its own, closed after the last turn; unpinned, two
// conversations' turns share the pool.
func TestConversationPinned(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{IterationsPerMS: 1, MeanTokens: 2})
	for _, pin := range []bool{false, true} {
		c := newClient(t, Config{URL: ts.URL + "/v1"})
		cv := NewConversation(c, ConversationConfig{Pin: pin})
		a := talk(t, cv, []string{"a", "b", "c"})
		b := talk(t, cv, []string{"d", "e"})
		conns := map[uint64]bool{}
		for _, r := range append(a, b...) {
			conns[r.Conn] = true
		}
		sameA := a[0].Conn == a[1].Conn && a[1].Conn == a[2].Conn
		if want := map[bool]int{false: 1, true: 2}[pin]; len(conns) != want || !sameA {
			t.Errorf("pinned %v: turns on connections %v, %v; want %d connections, a conversation on one", pin, a, b, want)
		}
		if open := c.Conns().Stats().Open; pin && open != 0 {
			t.Errorf("pinned: %d connections still open after the conversations ended", open)
		}
	}
}
