package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// redisURL is the test server: TARE_REDIS_URL, or the local default.
func redisURL() (url string, explicit bool) {
	if u := os.Getenv("TARE_REDIS_URL"); u != "" {
		return u, true
	}
	return "redis://127.0.0.1:6379/0", false
}

// redisClient connects to the test server. When TARE_REDIS_URL is unset and
// nothing answers on the default address the test is skipped; when it is
// set, a server that does not answer fails the test.
func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	u, explicit := redisURL()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("TARE_REDIS_URL %q: %v", u, err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		if explicit {
			t.Fatalf("redis at %s does not answer: %v", RedactURL(u), err)
		}
		t.Skipf("no redis at %s (%v): run scripts/test, which starts one", RedactURL(u), err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// uniqueQueue returns a queue name no other test uses, and deletes its keys
// when the test ends.
func uniqueQueue(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	q := "test-" + hex.EncodeToString(b[:])
	if rdb != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := Cleanup(ctx, rdb, q); err != nil {
				t.Errorf("clean up queue %q: %v", q, err)
			}
		})
	}
	return q
}

// brokers are the implementations every shared test runs against.
var brokers = []struct {
	name string
	open func(t *testing.T) Broker
}{
	{"memory", func(t *testing.T) Broker {
		m := NewMemory(MemoryConfig{Queue: uniqueQueue(t, nil)})
		t.Cleanup(func() { m.Close() })
		return m
	}},
	{"redis", func(t *testing.T) Broker {
		rdb := redisClient(t)
		r, err := NewRedis(testContext(t), rdb, uniqueQueue(t, rdb))
		if err != nil {
			t.Fatalf("NewRedis: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}},
}

// testContext is cancelled when the test ends, and in any case after 20 s,
// so a broken test cannot hang.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sampleJob(id string) Job {
	return Job{
		ID:        id,
		RunID:     "run-1",
		Enqueued:  time.Unix(1700000000, 123456789),
		Prompt:    "prompt " + id,
		MaxTokens: 16,
	}
}

func sampleResult(id, worker string) Result {
	return Result{
		ID:          id,
		RunID:       "run-1",
		Worker:      worker,
		Start:       time.Unix(1700000001, 1),
		FirstToken:  time.Unix(1700000001, 500),
		Done:        time.Unix(1700000002, 0),
		TokensIn:    7,
		TokensOut:   12,
		TokenSource: TokensUsage,
		Status:      StatusOK,
		Deliveries:  1,
	}
}
