package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/worker"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as worker processes.
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// uniqueQueue returns a queue name no other test uses and, given a client,
// deletes its keys when the test ends.
func uniqueQueue(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	q := "wtest-" + hex.EncodeToString(b[:])
	if rdb != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := queue.Cleanup(ctx, rdb, q); err != nil {
				t.Errorf("clean up queue %q: %v", q, err)
			}
		})
	}
	return q
}

// brokers are the implementations the worker is tested on.
var brokers = []struct {
	name string
	open func(t *testing.T) queue.Broker
}{
	{"memory", func(t *testing.T) queue.Broker {
		m := queue.NewMemory(queue.MemoryConfig{Queue: uniqueQueue(t, nil)})
		t.Cleanup(func() { m.Close() })
		return m
	}},
	{"redis", func(t *testing.T) queue.Broker {
		rdb := redisClient(t)
		r, err := queue.NewRedis(testContext(t), rdb, uniqueQueue(t, rdb))
		if err != nil {
			t.Fatalf("NewRedis: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}},
}

func forEachBroker(t *testing.T, test func(t *testing.T, b queue.Broker)) {
	for _, impl := range brokers {
		t.Run(impl.name, func(t *testing.T) { test(t, impl.open(t)) })
	}
}

// testContext ends with the test, and after 30 s at most.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openaiModel adapts the streaming client to worker.Model, as cmd/tare does.
func openaiModel(t *testing.T, url string) worker.Model {
	t.Helper()
	c, err := openai.New(openai.Config{URL: url + "/v1", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	t.Cleanup(c.Close)
	return modelOf(c)
}

func modelOf(c *openai.Client) worker.Model {
	return worker.ModelFunc(func(ctx context.Context, prompt string, maxTokens int) (worker.Completion, error) {
		r := c.Call(ctx, openai.Request{Prompt: prompt, MaxTokens: maxTokens})
		return worker.Completion{
			FirstToken:   r.FirstToken,
			OutputTokens: r.OutputTokens,
			TokenSource:  r.TokenSource,
			Err:          r.Err,
		}, nil
	})
}

// running is a worker started in the background.
type running struct {
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error
}

// start runs a worker until the test ends (or stop is called).
func start(t *testing.T, b queue.Broker, m worker.Model, cfg worker.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: worker.New(b, m, cfg), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- r.w.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { r.stop(t) }) })
	return r
}

// stop cancels the worker and waits for Run to return, 15 s at most.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t, 15*time.Second)
}

func (r *running) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // later waits see it too
		return err
	case <-time.After(limit):
		t.Fatalf("worker %s did not return within %v", r.w.Name(), limit)
		return nil
	}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The test Redis, as every package finds it.
var redisURL, redisClient = testservice.RedisURL, testservice.Redis
