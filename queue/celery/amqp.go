package celery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
	"github.com/tare-dev/tare/rabbitmq"
)

// celeryAMQP is a Celery queue's AMQP broker (celery+amqp://, RabbitMQ):
// each task message is published to the default exchange with the
// queue's name as its routing key, so it reaches the queue whatever the
// worker bound it to, persistent, mandatory, and confirmed by the broker
// before Enqueue returns. Worker events come from Celery's event exchange.
type celeryAMQP struct {
	conn  *rabbitmq.Conn
	queue string
}

// The names Celery uses on an AMQP broker.
const (
	celeryEventExchange = "celeryev" // topic; events are routed by their type, "worker.heartbeat", "task.started"
	// celeryEventTTL bounds how long an event waits for tare, as Celery's
	// own event receivers do (event_queue_ttl, 5 s): a heartbeat older
	// than that says nothing.
	celeryEventTTL = 5 * time.Second
)

// openCeleryAMQP connects to the AMQP broker of f, as origin, and hands
// each worker event's body to onEvent, the task id of each message the
// broker returned (no queue took it) to onReturn, and, when inbox is not
// "", each task state sent back to that queue (rpc://) to onReply, until
// close.
func openCeleryAMQP(ctx context.Context, f queue.FrameworkURL, rawURL, origin, inbox string, onEvent func([]byte, time.Time), onReturn func(string),
	onReply func(string, []byte, time.Time)) (*celeryAMQP, error) {
	var in *rabbitmq.Inbox
	if inbox != "" {
		in = &rabbitmq.Inbox{Queue: inbox, On: onReply}
	}
	conn, err := rabbitmq.Dial(ctx, rabbitmq.Config{
		URL:  f.AMQP,
		Name: "tare " + origin,
		Subscribe: &rabbitmq.Subscription{
			Exchange: celeryEventExchange, Kind: "topic", Keys: []string{"worker.#", "task.started"}, TTL: celeryEventTTL,
			On: func(_ string, body []byte, at time.Time) { onEvent(body, at) },
		},
		Returned: onReturn,
		Inbox:    in,
	})
	if err != nil {
		return nil, tare.Errorf(tare.EUNAVAILABLE, "celery broker at %s: %w", queue.RedactURL(rawURL), err)
	}
	return &celeryAMQP{conn: conn, queue: f.Queue}, nil
}

// publish publishes m and waits for the broker's confirm: a message the
// broker did not confirm is ErrUnconfirmed. With a job timeout, the
// message expires in the queue then (its AMQP expiration): a backlog the
// run left behind goes away by itself.
func (b *celeryAMQP) publish(ctx context.Context, m celeryTask) error {
	err := b.conn.Publish(ctx, "", m.queue, rabbitmq.Message{
		Body: m.body, ContentType: "application/json", ContentEncoding: "utf-8",
		Headers: m.headers, CorrelationID: m.id, ReplyTo: m.replyTo, Persistent: true, TTL: m.expiry,
	})
	if errors.Is(err, rabbitmq.ErrUnconfirmed) {
		return fmt.Errorf("%w: %w", queue.ErrUnconfirmed, err)
	}
	return err
}

// depth is the queue's ready messages, from a passive declare: not those
// a worker has prefetched and not yet acknowledged. A queue that does not
// exist holds none.
func (b *celeryAMQP) depth(ctx context.Context) (int64, error) {
	st, err := b.conn.Inspect(ctx, b.queue)
	return int64(st.Ready), err
}

// serving reports whether the queue has a consumer.
func (b *celeryAMQP) serving(ctx context.Context) (bool, error) {
	st, err := b.conn.Inspect(ctx, b.queue)
	return st.Consumers > 0, err
}

func (b *celeryAMQP) close() error { return b.conn.Close() }

// The names of Celery's remote control (kombu's pidbox) on an AMQP
// broker: what `celery inspect` uses.
const (
	celeryPidbox      = "celery.pidbox"       // fanout: every worker's control queue is bound to it
	celeryPidboxReply = "reply.celery.pidbox" // direct, non-durable: the answers, by the asker's routing key
)

// registered asks every worker of the virtual host which tasks it
// registers, as `celery inspect registered` does, and returns the task
// names by worker, once want workers answered or wait is over.
func (b *celeryAMQP) registered(ctx context.Context, want int, wait time.Duration) (map[string][]string, error) {
	ticket, replyKey := uuid.NewString(), uuid.NewString()
	body, err := json.Marshal(map[string]any{
		"method": "registered", "arguments": map[string]any{"taskinfoitems": []string{}},
		"destination": nil, "pattern": nil, "matcher": nil,
		"ticket": ticket, "reply_to": map[string]any{"exchange": celeryPidboxReply, "routing_key": replyKey},
	})
	if err != nil {
		return nil, err
	}
	// A worker ignores a request whose expires (unix seconds) has passed.
	expires := float64(time.Now().Add(wait).UnixNano()) / 1e9
	replies, err := b.conn.Gather(ctx, celeryPidbox, "", rabbitmq.Message{Body: body, ContentType: "application/json", ContentEncoding: "utf-8",
		Headers: map[string]any{"clock": 0, "expires": expires}}, rabbitmq.ReplyTo{Exchange: celeryPidboxReply, Key: replyKey}, want, wait)
	out := map[string][]string{}
	for _, r := range replies {
		if t, _ := r.Headers["ticket"].(string); t != ticket {
			continue
		}
		var answer map[string]json.RawMessage // {worker: [task, …]}, or {worker: {"error": …}}
		if json.Unmarshal(r.Body, &answer) != nil {
			continue
		}
		for worker, raw := range answer {
			var tasks []string
			if json.Unmarshal(raw, &tasks) != nil {
				continue
			}
			for _, t := range tasks {
				name, _, _ := strings.Cut(t, " ") // "tasks.answer [rate_limit=10/s]"
				out[worker] = append(out[worker], name)
			}
		}
	}
	return out, err
}
