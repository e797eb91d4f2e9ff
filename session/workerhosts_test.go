package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/queue"
)

// testRedis is the test Redis and its URL.
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	u, _ := testservice.RedisURL()
	return testservice.Redis(t), u
}

// TestWorkerHostsJudged: samples published by two worker hosts, one with
// steal above the threshold, are judged over the run's seconds, and the
// noisy one is named.
func TestWorkerHostsJudged(t *testing.T) {
	rdb, u := testRedis(t)
	ctx := context.Background()
	q := fmt.Sprintf("hosts-%d", time.Now().UnixNano())
	t.Cleanup(func() { queue.Cleanup(ctx, rdb, q) })
	pub, err := queue.NewHosts(u, q)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	for i := range 10 {
		at := start.Add(time.Duration(i) * time.Second)
		for name, steal := range map[string]float64{"quiet": 0.5, "noisy": 40} {
			s := tare.HostSample{Start: at, End: at.Add(time.Second), CPU: tare.CPUShares{CPU: -1, User: 30, Steal: steal, Idle: 70 - steal}}
			if err := pub.Publish(ctx, name, s); err != nil {
				t.Fatal(err)
			}
		}
		// A host that published only long before the run is left out.
		old := tare.HostSample{Start: at.Add(-time.Hour), End: at.Add(-time.Hour + time.Second), CPU: tare.CPUShares{CPU: -1, Steal: 90, Idle: 10}}
		pub.Publish(ctx, "elsewhen", old)
	}
	s := tare.Summary{Run: tare.Run{StartedAt: start, EndedAt: start.Add(10 * time.Second)}, Verdict: tare.Verdict{Level: tare.Clean}}
	WorkerHostsFinish(u, q, judge.DefaultThresholds())(&s)
	if len(s.WorkerHosts) != 2 {
		t.Fatalf("worker hosts %+v: want noisy and quiet", s.WorkerHosts)
	}
	byName := map[string]tare.WorkerHost{}
	for _, h := range s.WorkerHosts {
		byName[h.Hostname] = h
	}
	if h := byName["noisy"]; h.Level != tare.Polluted || h.Ticks != 10 {
		t.Errorf("noisy host: %+v", h)
	}
	if h := byName["quiet"]; h.Level != tare.Clean {
		t.Errorf("quiet host: %+v", h)
	}
	var named bool
	for _, sig := range s.Verdict.Signals {
		if sig.Fired && strings.HasPrefix(sig.Detail, "worker host noisy: steal") {
			named = true
		}
		if strings.Contains(sig.Detail, "quiet") {
			t.Errorf("the quiet host is blamed: %s", sig.Detail)
		}
	}
	if !named || s.Verdict.Level != tare.Polluted {
		t.Errorf("verdict %s does not name the noisy worker host: %+v", s.Verdict.Level, s.Verdict.Signals)
	}
}

// TestWorkerPublishesItsHost: the publisher a tare worker runs samples this
// host for real and publishes it under its host name.
func TestWorkerPublishesItsHost(t *testing.T) {
	rdb, u := testRedis(t)
	ctx := context.Background()
	q := fmt.Sprintf("publish-%d", time.Now().UnixNano())
	name, _ := os.Hostname()
	t.Cleanup(func() { queue.Cleanup(ctx, rdb, q) })
	hs, err := queue.NewHosts(u, q)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	published := func() int {
		m, _ := hs.Samples(ctx, time.Time{}, time.Now().Add(time.Hour))
		return len(m[name])
	}
	var warn bytes.Buffer
	start := time.Now()
	stop := PublishWorkerHost(ctx, u, q, 100*time.Millisecond, &warn, nil)
	deadline := time.Now().Add(10 * time.Second)
	for published() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if n := published(); n < 3 {
		t.Fatalf("%d samples of %q published; warnings: %s", n, name, warn.String())
	}
	samples, err := hs.Samples(ctx, start, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hosts, _, err := judgeWorkerHosts(samples, start, time.Now(), judge.DefaultThresholds())
	if err != nil || len(hosts) != 1 || hosts[0].Hostname != name || hosts[0].StealMeanPct == nil {
		t.Errorf("judged %+v, %v; want this host with steal measured", hosts, err)
	}
}
