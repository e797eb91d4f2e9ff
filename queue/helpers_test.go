package queue

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/queue/internal/queuetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// uniqueQueue returns a queue name no other test uses, and deletes its keys
// when the test ends.
func uniqueQueue(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	q := queuetest.QueueName()
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
		r, err := NewRedis(queuetest.Context(t), rdb, uniqueQueue(t, rdb))
		if err != nil {
			t.Fatalf("NewRedis: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}},
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

// The test Redis, as every package finds it.
var redisURL, redisClient = testservice.RedisURL, testservice.Redis
