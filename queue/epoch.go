package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// EpochKeeper notices a lost queue state the way Redis (the broker) does:
// a key holding a random token, set with the first job (so a Target that
// enqueued nothing, as tare check's, leaves no key); a different token, or
// none, means the server restarted without persistence or the keys were
// deleted.
type EpochKeeper struct {
	Key   string     // the key that holds the token
	mu    sync.Mutex // guards token
	token string     // "" until the first job
}

// Ensure sets the token before a job is enqueued, once.
func (e *EpochKeeper) Ensure(ctx context.Context, rdb redis.UniversalClient) error {
	e.mu.Lock()
	set := e.token != ""
	e.mu.Unlock()
	if set {
		return nil
	}
	t, err := readEpoch(ctx, rdb, e.Key)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
	return nil
}

// Check returns ErrLost once when the token changed since the last call,
// and takes the new one.
func (e *EpochKeeper) Check(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	e.mu.Lock()
	token := e.token
	e.mu.Unlock()
	if token == "" {
		return nil // no job yet: nothing to lose
	}
	got, err := rdb.Get(ctx, e.Key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("check %q: %w", e.Key, err)
	}
	if got == token {
		return nil
	}
	t, err := readEpoch(ctx, rdb, e.Key)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
	return fmt.Errorf("read results of queue %q: %w (the server restarted or the keys were deleted)", queue, ErrLost)
}

// readEpoch returns the token at key, creating a random one when there is
// none.
func readEpoch(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if err := rdb.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return "", fmt.Errorf("set %q: %w", key, err)
	}
	t, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("get %q: %w", key, err)
	}
	return t, nil
}
