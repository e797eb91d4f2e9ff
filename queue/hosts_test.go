package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

// TestHostsPublishAndRead: samples published by two hosts come back by
// host, oldest first, only those overlapping the span asked for; a host
// with none in the span is left out; the keys lie under the queue's
// prefix, expire, and go with Cleanup.
func TestHostsPublishAndRead(t *testing.T) {
	rdb := redisClient(t)
	q := uniqueQueue(t, rdb)
	u, _ := redisURL()
	h, err := NewHosts(u, q)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := queuetest.Context(t)
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	for i := range 5 {
		at := start.Add(time.Duration(i) * time.Second)
		for name, steal := range map[string]float64{"a": 1, "b": 40} {
			s := tare.HostSample{Start: at, End: at.Add(time.Second), CPU: tare.CPUShares{CPU: -1, Steal: steal}}
			if err := h.Publish(ctx, name, s); err != nil {
				t.Fatal(err)
			}
		}
		old := tare.HostSample{Start: at.Add(-time.Hour), End: at.Add(-time.Hour + time.Second)}
		if err := h.Publish(ctx, "old", old); err != nil {
			t.Fatal(err)
		}
	}
	// [2s, 3s] overlaps the samples [1s, 2s], [2s, 3s] and [3s, 4s].
	got, err := h.Samples(ctx, start.Add(2*time.Second), start.Add(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got["a"]) != 3 || len(got["b"]) != 3 {
		t.Fatalf("samples %v: want 3 of a and of b", got)
	}
	for i, s := range got["b"] {
		if s.CPU.Steal != 40 || (i > 0 && !s.Start.After(got["b"][i-1].Start)) {
			t.Errorf("b's sample %d: %+v", i, s)
		}
	}
	for _, k := range []string{KeyPrefix(q) + "hosts", KeyPrefix(q) + "host:a"} {
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 0 || ttl > hostSamplesTTL {
			t.Errorf("%s expires in %v", k, ttl)
		}
	}
	keys, err := Cleanup(ctx, rdb, q)
	if err != nil || len(keys) != 4 {
		t.Errorf("cleanup removed %v, %v: want the set and three lists", keys, err)
	}
}

func TestHostsInvalid(t *testing.T) {
	if _, err := NewHosts("redis://127.0.0.1:6379/0", "no spaces"); tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("bad queue name: %v", err)
	}
	_, err := NewHosts("http://user:secret@127.0.0.1/", "q")
	if tare.ErrorCode(err) != tare.EINVALID || strings.Contains(err.Error(), "secret") {
		t.Errorf("bad URL: %v", err)
	}
}
