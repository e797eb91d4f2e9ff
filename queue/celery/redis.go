package celery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// celeryRedis is a Celery queue's Redis broker (celery+redis://): task
// messages LPUSHed onto the queue's list, as Celery's Redis transport
// (kombu) carries them, and the workers' events from the pub/sub channels
// /<db>.celeryev/*.
type celeryRedis struct {
	rdb    *redis.Client
	queue  string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// celeryPrioritySep joins a queue's name and a priority step in the names
// of its priority lists (kombu's default steps 3, 6, 9).
const celeryPrioritySep = "\x06\x16"

// celeryPriorityLists are the queue's lists: the queue's own name holds
// priority 0, the default.
func celeryPriorityLists(q string) []string {
	return []string{q, q + celeryPrioritySep + "3", q + celeryPrioritySep + "6", q + celeryPrioritySep + "9"}
}

// openCeleryRedis connects to the Redis broker of f and hands each
// worker event's body to onEvent until close.
func openCeleryRedis(ctx context.Context, f queue.FrameworkURL, rawURL string, onEvent func([]byte, time.Time)) (*celeryRedis, error) {
	rdb, err := queue.DialFramework(ctx, f, rawURL)
	if err != nil {
		return nil, err
	}
	beats := rdb.PSubscribe(ctx, fmt.Sprintf("/%d.celeryev/*", f.DB))
	if _, err := beats.Receive(ctx); err != nil { // the subscription's confirmation
		beats.Close()
		rdb.Close()
		return nil, tare.Errorf(tare.EUNAVAILABLE, "open celery queue %q: subscribe to worker events: %w", f.Queue, err)
	}
	b := &celeryRedis{rdb: rdb, queue: f.Queue}
	lctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.wg.Add(1)
	go listen(lctx, &b.wg, beats, func(m *redis.Message, at time.Time) {
		var env celeryEnvelope
		if json.Unmarshal([]byte(m.Payload), &env) != nil {
			return
		}
		if body, err := base64.StdEncoding.DecodeString(env.Body); err == nil {
			onEvent(body, at)
		}
	})
	return b, nil
}

// celeryEnvelope is a message as Celery's Redis transport carries it: the
// protocol's properties and headers beside the encoded body.
type celeryEnvelope struct {
	Body            string         `json:"body"`
	ContentEncoding string         `json:"content-encoding"`
	ContentType     string         `json:"content-type"`
	Headers         map[string]any `json:"headers"`
	Properties      map[string]any `json:"properties"`
}

// envelope is m as Celery's Redis transport carries it.
func (m celeryTask) envelope() ([]byte, error) {
	env := celeryEnvelope{
		Body:            base64.StdEncoding.EncodeToString(m.body),
		ContentEncoding: "utf-8",
		ContentType:     "application/json",
		Headers:         m.headers,
		Properties: map[string]any{
			"correlation_id": m.id, "reply_to": "", "delivery_mode": 2, "priority": 0,
			"delivery_info": map[string]any{"exchange": "", "routing_key": m.queue},
			"body_encoding": "base64", "delivery_tag": uuid.NewString(),
		},
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode celery task %q: %w", m.id, err)
	}
	return b, nil
}

func (b *celeryRedis) publish(ctx context.Context, m celeryTask) error {
	msg, err := m.envelope()
	if err != nil {
		return err
	}
	return b.rdb.LPush(ctx, m.queue, msg).Err()
}

// depth is the length of the queue's lists (LLEN).
func (b *celeryRedis) depth(ctx context.Context) (int64, error) {
	pipe := b.rdb.Pipeline()
	lens := make([]*redis.IntCmd, 0, 4)
	for _, l := range celeryPriorityLists(b.queue) {
		lens = append(lens, pipe.LLen(ctx, l))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, l := range lens {
		n += l.Val()
	}
	return n, nil
}

// serving is true once Redis answers: a list does not know who pops it.
func (b *celeryRedis) serving(ctx context.Context) (bool, error) {
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		return false, err
	}
	return true, nil
}

func (b *celeryRedis) close() error {
	b.cancel()
	b.wg.Wait()
	return b.rdb.Close()
}
