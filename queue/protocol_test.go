package queue

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue/internal/queuetest"
)

const protocolDoc = "../docs/job-protocol.md"

// TestProtocolDoc checks that docs/job-protocol.md names every field and
// key, and quotes the completion script exactly as the broker runs it.
func TestProtocolDoc(t *testing.T) {
	raw, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var names []string
	for k := range sampleJob("1").fields() {
		names = append(names, k)
	}
	for k := range sampleResult("1", "w").fields() {
		names = append(names, k)
	}
	for _, k := range []string{keyJobs, keyResults, keyStop, keyEpoch, keyWorker + "<name>"} {
		names = append(names, "tare:<queue>:"+k)
	}
	names = append(names, Group, TokensUsage, TokensCounted, StatusOK, StatusError, KindUnavailable, KindUnfinished)
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, " "+n+" ") {
			t.Errorf("%s does not mention %q", protocolDoc, n)
		}
	}

	_, after, ok := strings.Cut(doc, "```lua\n")
	script, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatalf("%s has no lua block", protocolDoc)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(script, " \n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "   "))
	}
	if got := strings.Join(lines, "\n") + "\n"; got != completeLua {
		t.Errorf("the script in %s differs from the one the broker runs:\n--- doc\n%s--- code\n%s", protocolDoc, got, completeLua)
	}
}

// TestForeignWorker is a worker written from the protocol document alone,
// with the raw commands it lists, serving a Target.
func TestForeignWorker(t *testing.T) {
	rdb := redisClient(t)
	ctx := queuetest.Context(t)
	q := uniqueQueue(t, rdb)
	b, err := NewRedis(ctx, rdb, q)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget(b, TargetConfig{Poll: 50 * time.Millisecond, MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()

	p := "tare:" + q + ":"
	errs := make(chan error, 1)
	go func() { errs <- foreignWorker(ctx, rdb, p, "foreign") }()

	const n = 10
	var wg sync.WaitGroup
	results := make([]tare.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = tare.Result{Seq: uint64(i), Sent: time.Now()}
			tg.Do(ctx, &results[i])
		}()
	}
	wg.Wait()
	for _, r := range results {
		if !r.OK() || r.Worker != "foreign" || r.Deliveries != 1 || r.OutputTokens != 5 || r.Started.Before(r.Sent.Round(0)) {
			t.Errorf("job %d: %q by %q, %d deliveries, %d tokens, started %v after sent %v",
				r.Seq, r.Err, r.Worker, r.Deliveries, r.OutputTokens, r.Started, r.Sent)
		}
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("foreign worker: %v", err)
	}
	if ws, err := b.Workers(ctx); err != nil || len(ws) != 0 {
		t.Errorf("Workers after the foreign worker stopped = %+v, %v", ws, err)
	}
}

// foreignWorker follows docs/job-protocol.md step by step. Its "model"
// answers max_tokens tokens at once.
func foreignWorker(ctx context.Context, rdb *redis.Client, p, name string) error {
	do := func(args ...any) *redis.Cmd { return rdb.Do(ctx, args...) }
	if err := do("XGROUP", "CREATE", p+"jobs", "workers", "0", "MKSTREAM").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	reg := `{"name":"` + name + `","host":"elsewhere","pid":1,"started":"2025-01-01T00:00:00Z","concurrency":1}`
	if err := do("SET", p+"worker:"+name, reg, "PX", 3000).Err(); err != nil {
		return err
	}
	for {
		if n, err := do("EXISTS", p+"stop").Int(); err != nil || n == 1 {
			if err == nil {
				err = do("DEL", p+"worker:"+name).Err()
			}
			return err
		}
		// XREADGROUP GROUP workers <name> COUNT 4 BLOCK 100 STREAMS jobs >
		streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: "workers", Consumer: name, Count: 4, Block: 100 * time.Millisecond, Streams: []string{p + "jobs", ">"},
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return err
		}
		for _, m := range streams[0].Messages {
			start := time.Now().UnixNano()
			maxTokens := m.Values["max_tokens"]
			done := time.Now().UnixNano()
			acked, err := do("EVAL", completeLua, 2, p+"jobs", p+"results", "workers", m.ID, 100000,
				"id", m.Values["id"], "run", m.Values["run"], "worker", name,
				"start", start, "first_token", start, "done", done,
				"tokens_in", 0, "tokens_out", maxTokens, "token_source", "counted",
				"status", "ok", "error", "", "deliveries", 1).Int()
			if err != nil || acked != 1 {
				return errors.Join(err, errors.New("completion not acknowledged"))
			}
		}
	}
}

// TestProtocolDocIsEnough: docs/job-protocol.md is enough to write a
// worker in any language (issue 20, defect 11): it defines service as the
// generator computes it, says which model call a worker makes and that it
// may make none, describes Redis 7's three-element XAUTOCLAIM reply, says
// that a job's run field is the printed run id, and points at no Go code.
func TestProtocolDocIsEnough(t *testing.T) {
	raw, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, want := range []string{
		"`done − start`: the worker's own time", // service, as tare.Result.Service computes it
		"POST <URL>/chat/completions",
		`"stream": true, "stream_options": {"include_usage": true}`,
		"A worker may do anything else instead, or nothing",
		"Redis 7 replies with three elements",
		"the ids of entries that were pending but no longer exist",
		"**the run id tare prints**",
		"tare's default claim idle is\n5000 ms",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("%s does not say %q", protocolDoc, want)
		}
	}
	goRef := regexp.MustCompile("`(queue|worker|tare|openai)\\.[A-Z]|\\.go`|`[a-z]+` package")
	if refs := goRef.FindAllString(doc, -1); len(refs) > 0 {
		t.Errorf("%s points at Go code: %q", protocolDoc, refs)
	}
}

// TestForeignClaim runs the claim step of docs/job-protocol.md with raw
// commands on the real server: XAUTOCLAIM's reply has the three elements
// the document describes, the third naming a pending entry that was
// deleted, and XPENDING gives the claimed entry's delivery count.
func TestForeignClaim(t *testing.T) {
	rdb := redisClient(t)
	ctx := queuetest.Context(t)
	q := uniqueQueue(t, rdb)
	b, err := NewRedis(ctx, rdb, q)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, id := range []string{"1", "2"} {
		if err := b.Enqueue(ctx, sampleJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	jobs := "tare:" + q + ":jobs"
	// A worker takes both and dies; one of its entries is deleted.
	held, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "dead", Count: 2, Streams: []string{jobs, ">"}}).Result()
	if err != nil || len(held[0].Messages) != 2 {
		t.Fatalf("XREADGROUP: %v, %v", held, err)
	}
	kept, gone := held[0].Messages[0].ID, held[0].Messages[1].ID
	if err := rdb.XDel(ctx, jobs, gone).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)

	reply, err := rdb.Do(ctx, "XAUTOCLAIM", jobs, "workers", "foreign", 10, "0-0", "COUNT", 10).Slice()
	if err != nil || len(reply) != 3 {
		t.Fatalf("XAUTOCLAIM reply %v, %v: want three elements", reply, err)
	}
	if cursor, _ := reply[0].(string); cursor != "0-0" {
		t.Errorf("cursor %v, want 0-0 at the end of the pending list", reply[0])
	}
	claimed, _ := reply[1].([]any)
	if len(claimed) != 1 {
		t.Fatalf("claimed %v, want the one entry still in the stream", reply[1])
	}
	if entry, _ := claimed[0].([]any); len(entry) != 2 || entry[0] != kept {
		t.Errorf("claimed entry %v, want [%s, [fields…]]", claimed[0], kept)
	}
	if deleted, _ := reply[2].([]any); len(deleted) != 1 || deleted[0] != gone {
		t.Errorf("third element %v, want the deleted entry %s", reply[2], gone)
	}
	pending, err := rdb.Do(ctx, "XPENDING", jobs, "workers", kept, kept, 1).Slice()
	if err != nil || len(pending) != 1 {
		t.Fatalf("XPENDING: %v, %v", pending, err)
	}
	if row, _ := pending[0].([]any); len(row) != 4 || row[1] != "foreign" || row[3] != int64(2) {
		t.Errorf("XPENDING row %v, want [%s foreign <idle> 2]: the claim counted a delivery", pending[0], kept)
	}
	if d, err := b.Depth(ctx); err != nil || d.Pending != 1 {
		t.Errorf("depth %+v, %v: want the deleted entry gone from the pending list", d, err)
	}
}
