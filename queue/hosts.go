package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
)

// Workers publish their host's interference beside the queue: a set of
// the hosts, and per host a capped list of its samples (JSON
// tare.HostSample, oldest first), so a generator on another machine can
// judge every worker host over the seconds of its run.
//
//	tare:<queue>:hosts          SET  host names
//	tare:<queue>:host:<name>    LIST samples, the last hostSamplesKept
const (
	hostSamplesKept = 3600          // samples kept per host: an hour at 1 s
	hostSamplesTTL  = 2 * time.Hour // a host that stops publishing goes away
	keyHosts        = "hosts"
	keyHost         = "host:"
)

// Hosts is the worker hosts' samples of one queue on a Redis server: what
// each worker publishes about its host, and what the generator reads back
// to judge them.
type Hosts struct {
	rdb   redis.UniversalClient
	queue string
}

// NewHosts connects to the Redis server at rawURL for the worker hosts of
// queue. A bad URL or queue name is a *tare.Error with code EINVALID; it
// does not connect until used. Close closes the connection.
func NewHosts(rawURL, queue string) (*Hosts, error) {
	if err := ValidateName(queue); err != nil {
		return nil, err
	}
	opt, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	return &Hosts{rdb: redis.NewClient(opt), queue: queue}, nil
}

func (h *Hosts) setKey() string             { return KeyPrefix(h.queue) + keyHosts }
func (h *Hosts) listKey(name string) string { return KeyPrefix(h.queue) + keyHost + name }

// Publish appends one sample of the host name to the queue's lists,
// keeping the last hour of them, and renews their expiry.
func (h *Hosts) Publish(ctx context.Context, name string, s tare.HostSample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	k := h.listKey(name)
	pipe := h.rdb.TxPipeline()
	pipe.SAdd(ctx, h.setKey(), name)
	pipe.Expire(ctx, h.setKey(), hostSamplesTTL)
	pipe.RPush(ctx, k, b)
	pipe.LTrim(ctx, k, -hostSamplesKept, -1)
	pipe.Expire(ctx, k, hostSamplesTTL)
	_, err = pipe.Exec(ctx)
	return err
}

// Samples returns, by host name, the samples of every worker host that
// overlap [start, end], oldest first. The clocks are the workers' own. A
// host with no sample in the span (one serving another run, or gone) is
// left out, as is a sample that does not parse.
func (h *Hosts) Samples(ctx context.Context, start, end time.Time) (map[string][]tare.HostSample, error) {
	names, err := h.rdb.SMembers(ctx, h.setKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("read the worker hosts of queue %q: %w", h.queue, err)
	}
	out := map[string][]tare.HostSample{}
	for _, name := range names {
		raw, err := h.rdb.LRange(ctx, h.listKey(name), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("read the samples of worker host %q: %w", name, err)
		}
		for _, r := range raw {
			var s tare.HostSample
			if json.Unmarshal([]byte(r), &s) != nil || s.End.Before(start) || s.Start.After(end) {
				continue
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

// Close closes the connection.
func (h *Hosts) Close() error { return h.rdb.Close() }
