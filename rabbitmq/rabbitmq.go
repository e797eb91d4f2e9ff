// Package rabbitmq is tare's client of an AMQP 0-9-1 broker (RabbitMQ):
// it publishes messages with publisher confirms, reads a queue's depth and
// consumers with a passive declare, hands over the messages of an
// exchange it subscribes to, and gathers the answers to a request (Gather),
// and it keeps doing so across the broker's restarts. It is the only importer of github.com/rabbitmq/amqp091-go;
// package queue speaks Celery's protocol over it (docs/celery.md).
//
// A message is published once: while the connection is down, or when the
// broker does not confirm it, Publish says so (ErrUnavailable,
// ErrUnconfirmed) and the caller decides; it never retries by itself, so
// a load generator's schedule is never bent by a retry loop.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Errors of Publish, beside the context's.
var (
	// ErrUnavailable: the message was not sent, the connection being down
	// (the broker restarting, or unreachable).
	ErrUnavailable = errors.New("broker unavailable")
	// ErrUnconfirmed: the message was sent but the broker did not confirm
	// it: it refused it (a nack: a full queue that rejects publishes, an
	// internal error) or the connection closed first. It may or may not
	// be in the queue.
	ErrUnconfirmed = errors.New("publish not confirmed by the broker")
)

// Timings of the connection.
const (
	dialTimeout  = 5 * time.Second  // TCP, TLS and the AMQP handshake
	heartbeat    = 10 * time.Second // a dead peer is noticed within about twice this
	minRedialGap = 100 * time.Millisecond
	maxRedialGap = 2 * time.Second
)

// Config is what Dial connects with.
type Config struct {
	// URL is the broker: amqp://[user:password@]host[:port][/vhost], or
	// amqps:// for TLS (ParseURL).
	URL string
	// Name is the connection's name, as the broker's management shows it.
	Name string
	// Subscribe, when not nil, is an exchange whose messages the
	// connection hands over, on a queue of its own.
	Subscribe *Subscription
	// Returned, when not nil, hears the correlation id of each published
	// message the broker returned because no queue could take it
	// (Publish sets the mandatory flag).
	Returned func(correlationID string)
	// Inbox, when not nil, is a queue of the connection's own whose
	// messages it hands over: the replies to what it publishes.
	Inbox *Inbox
}

// Inbox is a queue of the connection's own, by name (exclusive: gone with
// the connection, declared again after each reconnect; what was sent to it
// meanwhile is lost), whose messages go to On, from one goroutine, with
// their correlation id.
type Inbox struct {
	Queue string
	On    func(correlationID string, body []byte, at time.Time)
}

// Subscription is an exchange the connection listens to: it binds a queue
// of its own (named by the broker, exclusive, gone with the connection,
// redeclared after each reconnect) with each key, and calls On with every
// message, from one goroutine. Messages sent while the connection was
// down are not seen.
type Subscription struct {
	Exchange string
	// Kind is the exchange's type ("topic", "fanout", …). The exchange is
	// declared durable, as Celery declares its event exchange: declaring
	// it again with the same arguments is a no-op, and makes the
	// subscription work before any publisher has declared it.
	Kind string
	Keys []string
	// TTL bounds how long a message waits in the queue for On.
	TTL time.Duration
	On  func(routingKey string, body []byte, at time.Time)
}

// Message is one message to publish.
type Message struct {
	Body            []byte
	ContentType     string
	ContentEncoding string
	Headers         map[string]any // AMQP field table: nil, bool, numbers, string, []byte, time.Time, []any, map[string]any
	CorrelationID   string
	ReplyTo         string // the queue its answer goes to (an Inbox)
	Persistent      bool   // delivery mode 2: kept across a broker restart in a durable queue
	Priority        uint8  // 0 to 9
	// TTL, when positive, is the message's expiration: the broker drops it
	// unconsumed after that long in the queue.
	TTL time.Duration
}

// QueueState is a queue's state as a passive declare reports it.
type QueueState struct {
	Exists bool
	// Ready counts the messages ready for delivery: not those delivered
	// to a consumer and not yet acknowledged (a worker's prefetch).
	Ready     int
	Consumers int
}

// Conn is a connection to a broker that reconnects by itself when lost.
// Its methods are safe for concurrent use.
type Conn struct {
	cfg Config

	mu      sync.Mutex       // guards conn, pub, down, closing
	conn    *amqp.Connection // the live connection; nil while down
	pub     *amqp.Channel    // confirm mode, mandatory publishes
	down    error            // why the connection is down; nil while up
	closing bool             // Close was called: connect keeps nothing

	peekMu sync.Mutex    // guards peek, and serialises the declares on it
	peek   *amqp.Channel // passive declares; nil until needed, and after a declare of a missing queue closed it

	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisor, and the goroutines of each connection
}

// ParseURL checks an amqp:// or amqps:// URL
// (amqp://[user:password@]host[:port][/vhost]) and returns its host:port
// and virtual host. An error says what is wrong, without the password.
func ParseURL(raw string) (addr, vhost string, err error) {
	u, err := amqp.ParseURI(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, password included
		}
		return "", "", fmt.Errorf("amqp URL: %s", redactErr(err, raw))
	}
	if u.Port < 1 || u.Port > 65535 {
		return "", "", fmt.Errorf("amqp URL: port %d: want 1 to 65535", u.Port)
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), u.Vhost, nil
}

// redactErr is err's message without raw's password, which some parse
// errors repeat.
func redactErr(err error, raw string) string {
	msg := err.Error()
	if u, perr := url.Parse(raw); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// Dial connects to the broker, subscribes, and keeps the connection up
// until Close. A broker that does not answer, or refuses the login or the
// virtual host, is an error; after that, an outage is not: Publish and
// Inspect fail while it lasts. The dial and the handshake take 5 s at
// most; ctx only keeps Dial from starting once it has ended.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if _, _, err := ParseURL(cfg.URL); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &Conn{cfg: cfg}
	closed, err := c.connect()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go c.supervise(sctx, closed)
	return c, nil
}

// connect dials the broker and sets up the publishing channel and the
// subscription; it returns the connection's close notification.
func (c *Conn) connect() (chan *amqp.Error, error) {
	props := amqp.NewConnectionProperties()
	if c.cfg.Name != "" {
		props["connection_name"] = c.cfg.Name
	}
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{Heartbeat: heartbeat, Locale: "en_US", Dial: amqp.DefaultDial(dialTimeout), Properties: props})
	if err != nil {
		return nil, fmt.Errorf("connect: %s", redactErr(err, c.cfg.URL))
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	pub, err := c.setup(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		conn.Close()
		return nil, errors.New("closed")
	}
	c.conn, c.pub, c.down = conn, pub, nil
	return closed, nil
}

// setup opens the publishing channel and subscribes on conn.
func (c *Conn) setup(conn *amqp.Connection) (*amqp.Channel, error) {
	pub, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open a channel: %w", err)
	}
	if err := pub.Confirm(false); err != nil {
		return nil, fmt.Errorf("turn publisher confirms on: %w", err)
	}
	if c.cfg.Returned != nil {
		returns := pub.NotifyReturn(make(chan amqp.Return, 256))
		c.wg.Add(1)
		go func() { // ends when the channel closes
			defer c.wg.Done()
			for r := range returns {
				c.cfg.Returned(r.CorrelationId)
			}
		}()
	}
	if s := c.cfg.Subscribe; s != nil {
		if err := c.subscribe(conn, s); err != nil {
			return nil, err
		}
	}
	if in := c.cfg.Inbox; in != nil {
		if err := c.receive(conn, in); err != nil {
			return nil, err
		}
	}
	return pub, nil
}

func (c *Conn) receive(conn *amqp.Connection, in *Inbox) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	if _, err := ch.QueueDeclare(in.Queue, false, true, true, false, nil); err != nil {
		return fmt.Errorf("declare queue %q: %w", in.Queue, err)
	}
	return c.consume(ch, in.Queue, "queue "+strconv.Quote(in.Queue), func(m amqp.Delivery) {
		in.On(m.CorrelationId, m.Body, time.Now())
	})
}

func (c *Conn) subscribe(conn *amqp.Connection, s *Subscription) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	if err := ch.ExchangeDeclare(s.Exchange, s.Kind, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %q (%s, durable): %w", s.Exchange, s.Kind, err)
	}
	var args amqp.Table
	if s.TTL > 0 {
		args = amqp.Table{"x-message-ttl": int32(s.TTL.Milliseconds())}
	}
	q, err := ch.QueueDeclare("", false, true, true, false, args)
	if err != nil {
		return fmt.Errorf("declare a queue for exchange %q: %w", s.Exchange, err)
	}
	for _, k := range s.Keys {
		if err := ch.QueueBind(q.Name, k, s.Exchange, false, nil); err != nil {
			return fmt.Errorf("bind to exchange %q with %q: %w", s.Exchange, k, err)
		}
	}
	return c.consume(ch, q.Name, "exchange "+strconv.Quote(s.Exchange), func(m amqp.Delivery) {
		s.On(m.RoutingKey, m.Body, time.Now())
	})
}

// consume hands each message of queue to on, on a goroutine of its own
// that ends when the channel closes; what names the source in errors.
func (c *Conn) consume(ch *amqp.Channel, queue, what string, on func(amqp.Delivery)) error {
	msgs, err := ch.Consume(queue, "", true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume from %s: %w", what, err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for m := range msgs {
			on(m)
		}
	}()
	return nil
}

// supervise reconnects whenever the connection closes, backing off from
// minRedialGap to maxRedialGap, until ctx ends.
func (c *Conn) supervise(ctx context.Context, closed chan *amqp.Error) {
	defer c.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-closed:
			var err error = ErrUnavailable
			if e != nil {
				err = fmt.Errorf("%w: %s", ErrUnavailable, e.Reason)
			}
			c.mu.Lock()
			if c.conn != nil {
				c.conn.Close()
			}
			c.conn, c.pub, c.down = nil, nil, err
			c.mu.Unlock()
		}
		for gap := minRedialGap; ; gap = min(2*gap, maxRedialGap) {
			if ctx.Err() != nil {
				return // closed: connect would keep nothing
			}
			var err error
			if closed, err = c.connect(); err == nil {
				break
			}
			c.mu.Lock()
			c.down = fmt.Errorf("%w: %w", ErrUnavailable, err)
			c.mu.Unlock()
			if sleep(ctx, gap) != nil {
				return
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Publish sends m to exchange with routing key key, mandatory (a message
// no queue takes comes back, to Config.Returned), and waits for the
// broker's confirm: nil once confirmed, ErrUnavailable when the
// connection is down and nothing was sent, ErrUnconfirmed when the broker
// refused it or the connection closed before it said, or ctx's error
// when ctx ended first.
func (c *Conn) Publish(ctx context.Context, exchange, key string, m Message) error {
	c.mu.Lock()
	pub, down := c.pub, c.down
	c.mu.Unlock()
	if pub == nil {
		if down == nil {
			down = ErrUnavailable
		}
		return fmt.Errorf("publish to %q: %w", key, down)
	}
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, m.publishing())
	if err != nil {
		var ae *amqp.Error
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &ae): // the channel or connection closed
			return fmt.Errorf("publish to %q: %w (%w)", key, ErrUnavailable, err)
		}
		return fmt.Errorf("publish to %q: %w", key, err) // a message it cannot encode
	}
	acked, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return err
	case !acked && pub.IsClosed():
		// amqp091 reads every confirm still awaited as a nack when the
		// channel closes: say so, with why the connection went if it did.
		c.mu.Lock()
		down := c.down
		c.mu.Unlock()
		why := "its channel closed before the broker confirmed it"
		if down != nil {
			why += " (" + down.Error() + ")"
		}
		return fmt.Errorf("publish to %q: %w: %s", key, ErrUnconfirmed, why)
	case !acked:
		return fmt.Errorf("publish to %q: %w: the broker refused it (a nack: a queue at its length limit that rejects publishes, or the broker's own error)", key, ErrUnconfirmed)
	}
	return nil
}

func (m Message) publishing() amqp.Publishing {
	msg := amqp.Publishing{
		Headers:         table(m.Headers),
		ContentType:     m.ContentType,
		ContentEncoding: m.ContentEncoding,
		CorrelationId:   m.CorrelationID,
		ReplyTo:         m.ReplyTo,
		Priority:        m.Priority,
		Body:            m.Body,
	}
	if m.Persistent {
		msg.DeliveryMode = amqp.Persistent
	}
	if m.TTL > 0 {
		msg.Expiration = strconv.FormatInt(max(m.TTL.Milliseconds(), 1), 10)
	}
	return msg
}

// ReplyTo is where the answers to a Gather's message come back: a direct
// exchange, declared non-durable or durable as the answering side
// declares it (declaring it otherwise is an error), and the routing key
// they carry.
type ReplyTo struct {
	Exchange string
	Durable  bool
	Key      string
}

// Reply is one answer Gather collected.
type Reply struct {
	Headers map[string]any
	Body    []byte
}

// Gather publishes m to exchange with routing key key, not confirmed, on
// a channel of its own (so an exchange that does not exist fails this
// call alone), and collects the answers that come back to to, on a queue
// of its own, until it has want of them (0 for no limit) or wait is over.
// A request nobody answers returns no reply and no error.
func (c *Conn) Gather(ctx context.Context, exchange, key string, m Message, to ReplyTo, want int, wait time.Duration) ([]Reply, error) {
	c.mu.Lock()
	conn, down := c.conn, c.down
	c.mu.Unlock()
	if conn == nil {
		if down == nil {
			down = ErrUnavailable
		}
		return nil, fmt.Errorf("ask through exchange %q: %w", exchange, down)
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("ask through exchange %q: open a channel: %w", exchange, err)
	}
	defer ch.Close()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.ExchangeDeclare(to.Exchange, "direct", to.Durable, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("declare reply exchange %q: %w", to.Exchange, err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err == nil {
		err = ch.QueueBind(q.Name, to.Key, to.Exchange, false, nil)
	}
	var answers <-chan amqp.Delivery
	if err == nil {
		answers, err = ch.Consume(q.Name, "", true, true, false, false, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("a queue for the replies on exchange %q: %w", to.Exchange, err)
	}
	if err := ch.PublishWithContext(ctx, exchange, key, false, false, m.publishing()); err != nil {
		return nil, fmt.Errorf("ask through exchange %q: %w", exchange, err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []Reply
	for want <= 0 || len(out) < want {
		select {
		case d, ok := <-answers:
			if !ok { // the channel closed: the broker refused the publish
				if e := <-closed; e != nil {
					return out, fmt.Errorf("ask through exchange %q: %w", exchange, e)
				}
				return out, fmt.Errorf("ask through exchange %q: %w", exchange, ErrUnavailable)
			}
			out = append(out, Reply{Headers: d.Headers, Body: d.Body})
		case <-timer.C:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// table is m as an AMQP field table, its nested maps tables too.
func table(m map[string]any) amqp.Table {
	if m == nil {
		return nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		t[k] = field(v)
	}
	return t
}

func field(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return table(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = field(x)
		}
		return out
	}
	return v
}

// Inspect reads queue's state with a passive declare: whether it exists,
// its ready messages and its consumers. It fails while the connection is
// down, and returns ctx's error if ctx ends before the broker answers (a
// broker that stopped answering is found dead by the heartbeats, which
// then end the declare).
func (c *Conn) Inspect(ctx context.Context, queue string) (QueueState, error) {
	if err := ctx.Err(); err != nil {
		return QueueState{}, err
	}
	c.mu.Lock()
	conn, down := c.conn, c.down
	c.mu.Unlock()
	if conn == nil {
		if down == nil {
			down = ErrUnavailable
		}
		return QueueState{}, fmt.Errorf("inspect queue %q: %w", queue, down)
	}
	type answer struct {
		st  QueueState
		err error
	}
	done := make(chan answer, 1)
	go func() {
		st, err := c.inspect(conn, queue)
		done <- answer{st, err}
	}()
	select {
	case a := <-done:
		return a.st, a.err
	case <-ctx.Done():
		return QueueState{}, ctx.Err()
	}
}

func (c *Conn) inspect(conn *amqp.Connection, queue string) (QueueState, error) {
	c.peekMu.Lock()
	defer c.peekMu.Unlock() // a declare waits for its reply: one at a time
	if c.peek == nil || c.peek.IsClosed() {
		ch, err := conn.Channel()
		if err != nil {
			return QueueState{}, fmt.Errorf("inspect queue %q: open a channel: %w (%w)", queue, ErrUnavailable, err)
		}
		c.peek = ch
	}
	q, err := c.peek.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			c.peek = nil // the broker closed the channel
			return QueueState{}, nil
		}
		return QueueState{}, fmt.Errorf("inspect queue %q: %w", queue, err)
	}
	return QueueState{Exists: true, Ready: q.Messages, Consumers: q.Consumers}, nil
}

// Close stops reconnecting and closes the connection.
func (c *Conn) Close() error {
	c.cancel()
	c.mu.Lock()
	conn := c.conn
	c.conn, c.pub, c.down, c.closing = nil, nil, errors.New("closed"), true
	c.mu.Unlock()
	var err error
	if conn != nil {
		err = conn.Close()
	}
	c.wg.Wait()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}
