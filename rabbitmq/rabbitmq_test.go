package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/rabbitmq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run against the shared RabbitMQ (scripts/test starts it), each
// on queues and exchanges of its own, and a node of their own where they
// restart it.

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func uniqueName(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

func dial(t *testing.T, cfg rabbitmq.Config) *rabbitmq.Conn {
	t.Helper()
	c, err := rabbitmq.Dial(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Dial %s: %v", cfg.URL, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPublishInspect: confirmed publishes land in the queue, which a
// passive declare counts; a queue that does not exist is reported so,
// and does not break the inspections after it.
func TestPublishInspect(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	q := uniqueName(t)
	testservice.DeclareQueue(t, broker, q, nil)
	c := dial(t, rabbitmq.Config{URL: broker, Name: "tare test"})
	ctx := testContext(t)
	for i := range 3 {
		if err := c.Publish(ctx, "", q, rabbitmq.Message{Body: []byte("m"), Persistent: true, Headers: map[string]any{"n": i, "none": nil, "list": []any{nil, "a"}}}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	for _, name := range []string{uniqueName(t), q} { // a missing queue closes the channel: the next inspection opens another
		st, err := c.Inspect(ctx, name)
		switch {
		case err != nil:
			t.Fatalf("inspect %s: %v", name, err)
		case name == q && (st != rabbitmq.QueueState{Exists: true, Ready: 3}):
			t.Errorf("queue %s: %+v, want 3 ready, no consumer", name, st)
		case name != q && st.Exists:
			t.Errorf("queue %s, never declared: %+v", name, st)
		}
	}
}

// TestPublishReturned: a message no queue takes comes back to Returned,
// named by its correlation id; the publish itself is confirmed.
func TestPublishReturned(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	got := make(chan string, 1)
	c := dial(t, rabbitmq.Config{URL: broker, Returned: func(id string) { got <- id }})
	if err := c.Publish(testContext(t), "", uniqueName(t), rabbitmq.Message{Body: []byte("m"), CorrelationID: "job-7"}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case id := <-got:
		if id != "job-7" {
			t.Errorf("returned %q, want job-7", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message returned")
	}
}

// TestPublishNacked: a message the broker refuses (a full queue that
// rejects publishes) is ErrUnconfirmed, saying the broker refused it.
func TestPublishNacked(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	q := uniqueName(t)
	testservice.DeclareQueue(t, broker, q, map[string]any{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	c := dial(t, rabbitmq.Config{URL: broker})
	ctx := testContext(t)
	if err := c.Publish(ctx, "", q, rabbitmq.Message{Body: []byte("1")}); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	if err := c.Publish(ctx, "", q, rabbitmq.Message{Body: []byte("2")}); !errors.Is(err, rabbitmq.ErrUnconfirmed) || !strings.Contains(err.Error(), "the broker refused it") {
		t.Errorf("second publish onto a full queue: %v, want ErrUnconfirmed, the broker refused it", err)
	}
}

// TestMessageExpires: a message with a TTL leaves the queue unconsumed.
func TestMessageExpires(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	q := uniqueName(t)
	testservice.DeclareQueue(t, broker, q, nil)
	c := dial(t, rabbitmq.Config{URL: broker})
	ctx := testContext(t)
	if err := c.Publish(ctx, "", q, rabbitmq.Message{Body: []byte("m"), TTL: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Inspect(ctx, q)
		if err == nil && st.Exists && st.Ready == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %+v, %v: the message did not expire", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// events collects what a subscription hands over.
type events struct {
	mu   sync.Mutex // guards got
	got  []string
	seen chan struct{}
}

func (e *events) on(key string, body []byte, _ time.Time) {
	e.mu.Lock()
	e.got = append(e.got, key+" "+string(body))
	e.mu.Unlock()
	select {
	case e.seen <- struct{}{}:
	default:
	}
}

func (e *events) has(want string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.got {
		if g == want {
			return true
		}
	}
	return false
}

// TestSubscribe: the messages of the subscribed exchange that match a
// key are handed over, the others not.
func TestSubscribe(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	ex := uniqueName(t)
	testservice.DeleteQueueAtEnd(t, broker, ex) // the exchange
	ev := &events{seen: make(chan struct{}, 1)}
	dial(t, rabbitmq.Config{URL: broker, Subscribe: &rabbitmq.Subscription{Exchange: ex, Kind: "topic", Keys: []string{"worker.#"}, TTL: time.Second, On: ev.on}})
	pub := dial(t, rabbitmq.Config{URL: broker})
	ctx := testContext(t)
	for _, key := range []string{"task.sent", "worker.heartbeat"} {
		if err := pub.Publish(ctx, ex, key, rabbitmq.Message{Body: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(5 * time.Second)
	for !ev.has("worker.heartbeat worker.heartbeat") {
		select {
		case <-ev.seen:
		case <-deadline:
			t.Fatalf("got %q: want the heartbeat", ev.got)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if ev.has("task.sent task.sent") {
		t.Errorf("got %q: want only the keys bound", ev.got)
	}
}

// TestReconnect: while the broker is down, publishes fail at once as
// ErrUnavailable; once it is back, the connection, its publishing and its
// subscription are too, without a call from the user.
func TestReconnect(t *testing.T) {
	node := testservice.NewPrivateRabbitMQ(t)
	ev := &events{seen: make(chan struct{}, 1)}
	c := dial(t, rabbitmq.Config{URL: node.URL(), Subscribe: &rabbitmq.Subscription{Exchange: "ev", Kind: "topic", Keys: []string{"#"}, On: ev.on}})
	ctx := testContext(t)
	if err := c.Publish(ctx, "ev", "before", rabbitmq.Message{Body: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	node.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Failing at once is failing without waiting for the broker to
		// come back: it stays down until the publish returns, which
		// would otherwise be when its context ends (a bound on the wait).
		pubCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.Publish(pubCtx, "ev", "down", rabbitmq.Message{Body: []byte("2")})
		cancel()
		if errors.Is(err, rabbitmq.ErrUnavailable) {
			break
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a publish while down waited for its context to end: want it to fail at once, with ErrUnavailable")
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish with the broker down: %v, want ErrUnavailable", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Inspect(ctx, "ev"); !errors.Is(err, rabbitmq.ErrUnavailable) {
		t.Errorf("inspect with the broker down: %v, want ErrUnavailable", err)
	}
	node.Start(t)
	deadline = time.Now().Add(20 * time.Second)
	for !ev.has("after 3") {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: got %q, want the message published after it", ev.got)
		}
		_ = c.Publish(ctx, "ev", "after", rabbitmq.Message{Body: []byte("3")})
		time.Sleep(100 * time.Millisecond)
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct{ url, addr, vhost, err string }{
		{url: "amqp://guest:guest@127.0.0.1:5672/", addr: "127.0.0.1:5672", vhost: "/"},
		{url: "amqp://h", addr: "h:5672", vhost: "/"},
		{url: "amqps://u:p@h/prod", addr: "h:5671", vhost: "prod"},
		{url: "amqp://h//", addr: "h:5672", vhost: "/"}, // Celery's spelling of "/"
		{url: "amqp://h/%2F", addr: "h:5672", vhost: "/"},
		{url: "redis://h:6379/0", err: "amqp URL: "},
		{url: "amqp://u:s3cret@h:99999/", err: "amqp URL: "},
	} {
		addr, vhost, err := rabbitmq.ParseURL(tt.url)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseURL(%q): %v, want an error with %q and no password", tt.url, err, tt.err)
			}
		case err != nil || addr != tt.addr || vhost != tt.vhost:
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tt.url, addr, vhost, err, tt.addr, tt.vhost)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"amqp://guest:guest@127.0.0.1:5672/", "amqps://h/vh", "amqp://%zz", "amqp://u:p@h:0/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, _, err := rabbitmq.ParseURL(s)
		if err != nil {
			if u, perr := url.Parse(s); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) {
					t.Fatalf("%q: error %v shows the password", s, err)
				}
			}
			return
		}
		if !strings.Contains(addr, ":") {
			t.Fatalf("%q: address %q has no port", s, addr)
		}
	})
}

// TestDialRefused: a login the broker refuses is an error at Dial,
// without the password.
func TestDialRefused(t *testing.T) {
	broker := testservice.RabbitMQ(t)
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("nobody", "s3cret")
	_, err = rabbitmq.Dial(testContext(t), rabbitmq.Config{URL: u.String()})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Dial with a wrong login: %v, want an error without the password", err)
	}
}
