package openai

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tare-dev/tare"
)

// KindTurnLost is the failure of a conversation's turn whose turn before
// never ended within its bound (it was dropped, or the run ended first).
const KindTurnLost = "turn lost"

// ConversationConfig describes a multi-turn load over a Client.
type ConversationConfig struct {
	// Turns gives each arrival its turn; the arrival process brings a
	// conversation's turns together (arrival.Repeat), in order.
	Turns tare.Turns
	// Think is the time the user takes after turn-1's answer before
	// sending turn (from 2); nil: none. MaxThink bounds it.
	Think    func(conv uint64, turn int) time.Duration
	MaxThink time.Duration
	// SessionHeader, when set, is a header carrying the conversation's
	// number on each of its turns, for servers that route a session to
	// the replica holding its cache.
	SessionHeader string
	// Pin sends each conversation's turns on a connection of its own,
	// kept open between turns and closed after the last, instead of
	// whichever pooled connection is free.
	Pin bool
}

// Conversation is a tare.Target that runs conversations: each turn is
// sent once the turn before has its answer and the user's think time has
// passed, with the conversation so far (the server's own answers in it),
// and is measured from that moment (its Scheduled), not from the
// conversation's arrival.
type Conversation struct {
	c   *Client
	cfg ConversationConfig

	mu   sync.Mutex // guards live
	live map[uint64]*dialogue
}

var (
	_ tare.Target      = (*Conversation)(nil)
	_ tare.ConnCounted = (*Conversation)(nil)
)

// dialogue is one conversation in progress.
type dialogue struct {
	mu       sync.Mutex // guards the fields below
	history  []tare.Message
	next     int           // the turn number that may go now
	lastDone time.Time     // when the turn before next was answered
	moved    chan struct{} // closed, and replaced, when next moves
	via      *http.Client  // its own connection when pinned; nil: the pool
}

// NewConversation returns the multi-turn target over c.
func NewConversation(c *Client, cfg ConversationConfig) *Conversation {
	return &Conversation{c: c, cfg: cfg, live: map[uint64]*dialogue{}}
}

// String names the endpoint, as the Client does.
func (cv *Conversation) String() string { return cv.c.String() }

// Conns counts the client's connections.
func (cv *Conversation) Conns() *tare.ConnCounter { return cv.c.Conns() }

// Close releases idle connections.
func (cv *Conversation) Close() { cv.c.Close() }

// Addr is the client's.
func (cv *Conversation) Addr() (scheme, addr string) { return cv.c.Addr() }

func (cv *Conversation) dialogue(turn tare.Turn) *dialogue {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	d := cv.live[turn.Conversation]
	if d == nil {
		d = &dialogue{next: 1, moved: make(chan struct{})}
		if cv.cfg.Pin {
			d.via = cv.c.Pinned()
		}
		d.history = append(d.history, turn.System...)
		cv.live[turn.Conversation] = d
	}
	return d
}

// Do sends arrival res.Seq's turn when its turn comes.
func (cv *Conversation) Do(ctx context.Context, res *tare.Result) {
	turn := cv.cfg.Turns(res.Seq)
	res.Class = "turn " + strconv.Itoa(turn.Number)
	res.Conversation = turn.Conversation + 1
	d := cv.dialogue(turn)
	defer func() {
		if turn.Last {
			cv.mu.Lock()
			delete(cv.live, turn.Conversation)
			cv.mu.Unlock()
			if d.via != nil {
				d.via.CloseIdleConnections()
			}
		}
	}()

	// The turns before have at most this long each: a turn's wait, its
	// think time and its call.
	bound := res.Scheduled.Add(time.Duration(turn.Number-1) * (cv.c.timeout + cv.cfg.MaxThink + time.Second))
	history, due, ok := d.wait(ctx, turn.Number, bound)
	if !ok {
		now := time.Now()
		// Never sent: no latency to speak of, an error of its own.
		res.Scheduled, res.Sent, res.Done = now, now, now
		res.Err = KindTurnLost
		if ctx.Err() != nil {
			res.Err = tare.KindCanceled
		}
		d.advance(turn.Number, nil, now)
		return
	}
	if turn.Number > 1 {
		if cv.cfg.Think != nil {
			due = due.Add(cv.cfg.Think(turn.Conversation, turn.Number))
		}
		if !sleepUntil(ctx, due) {
			now := time.Now()
			res.Sent, res.Done, res.Err = now, now, tare.KindCanceled
			d.advance(turn.Number, nil, now)
			return
		}
		// The user sends this turn now: its latency counts from here.
		res.Scheduled = due
	}
	req := Request{Messages: append(history, turn.Message), MaxTokens: turn.MaxTokens, KeepContent: true, Via: d.via}
	if cv.cfg.SessionHeader != "" {
		req.Header = http.Header{cv.cfg.SessionHeader: {strconv.FormatUint(turn.Conversation+1, 10)}}
	}
	r := cv.c.Call(ctx, req)
	res.Sent = r.Sent
	fill(res, &r)
	said := []tare.Message{turn.Message}
	if r.OK() {
		said = append(said, tare.Message{Role: "assistant", Content: r.Content})
	}
	d.advance(turn.Number, said, r.Done)
}

// wait blocks until turn n may go, ctx ends or bound passes; it returns
// the conversation so far and when the turn before was answered.
func (d *dialogue) wait(ctx context.Context, n int, bound time.Time) ([]tare.Message, time.Time, bool) {
	timer := time.NewTimer(time.Until(bound))
	defer timer.Stop()
	for {
		d.mu.Lock()
		if d.next >= n {
			h, at := append([]tare.Message(nil), d.history...), d.lastDone
			d.mu.Unlock()
			return h, at, true
		}
		moved := d.moved
		d.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return nil, time.Time{}, false
		case <-timer.C:
			return nil, time.Time{}, false
		}
	}
}

// advance records turn n's messages and lets the next turn go.
func (d *dialogue) advance(n int, said []tare.Message, done time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.history = append(d.history, said...)
	if n+1 > d.next {
		d.next, d.lastDone = n+1, done
	}
	close(d.moved)
	d.moved = make(chan struct{})
}

// sleepUntil waits for t, or returns false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
