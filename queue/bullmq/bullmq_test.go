package bullmq

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/queue"
)

func TestParseBullClients(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	list := "id=3 addr=127.0.0.1:50112 laddr=127.0.0.1:6379 fd=8 name= age=40 idle=0 flags=N db=0 cmd=client|list\n" +
		"id=5 addr=127.0.0.1:50120 laddr=127.0.0.1:6379 fd=9 name=bull:YWdlbnRz age=12 idle=0 flags=b db=0 cmd=bzpopmin\n" +
		"id=6 addr=[::1]:50200 laddr=[::1]:6379 fd=10 name=bull:YWdlbnRz:w:gpu-1 age=3 idle=0 flags=b db=0 cmd=bzpopmin\n" +
		"id=7 addr=127.0.0.1:50130 laddr=127.0.0.1:6379 fd=11 name=bull:YWdlbnRz:qe age=3 idle=0 flags=b db=0 cmd=xread\n" +
		"id=8 addr=127.0.0.1:50140 laddr=127.0.0.1:6379 fd=12 name=bull:b3RoZXI= age=3 idle=0 flags=b db=0 cmd=bzpopmin\n"
	got := parseBullClients(list, bullKeysOf("bull", "agents").client, now)
	want := []queue.WorkerInfo{
		{Name: "bullmq worker at 127.0.0.1:50120", ClientAddr: "127.0.0.1:50120", ServerAddr: "127.0.0.1:6379", Started: now.Add(-12 * time.Second)},
		{Name: "gpu-1", ClientAddr: "[::1]:50200", ServerAddr: "[::1]:6379", Started: now.Add(-3 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v (the queue's workers: not its QueueEvents, not another queue's)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("worker %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestErrorClass(t *testing.T) {
	for _, tt := range []struct{ name, stacktrace, want string }{
		{"type error", `["TypeError: boom 3\n    at Object.boom (/app/worker.js:27:46)"]`, "TypeError"},
		{"the last of several", `["Error: first\n    at a", "RangeError: second\n    at b"]`, "RangeError"},
		{"no message", `["Error\n    at a"]`, "Error"},
		{"none", `[]`, ""},
		{"empty field", ``, ""},
		{"not a class", `["something went wrong: oh\n"]`, ""},
	} {
		if got := errorClass(tt.stacktrace); got != tt.want {
			t.Errorf("%s: errorClass(%q) = %q, want %q", tt.name, tt.stacktrace, got, tt.want)
		}
	}
}

// TestBullMQStartBeforeAdd: a processedOn before the job's add (the
// worker took it in the call that ended its last job, stamped as that
// call began) gives way to the job's active event, or its add; one far
// before the add is noted as the worker's clock.
func TestBullMQStartBeforeAdd(t *testing.T) {
	sent := time.Date(2026, 12, 2, 9, 0, 0, 700_000, time.UTC) // 0.7 ms into a millisecond
	ms := func(d time.Duration) time.Time { return sent.Add(d).Truncate(time.Millisecond) }
	tests := []struct {
		name              string
		active, processed time.Time // the active event (zero: not read), processedOn
		done              time.Time
		want              time.Time
		noted             bool
	}{
		{name: "after the add", processed: ms(3 * time.Millisecond), done: ms(20 * time.Millisecond), want: ms(3 * time.Millisecond)},
		{name: "in the add's millisecond", processed: ms(0), done: ms(20 * time.Millisecond), want: sent},
		{name: "fetched by the last job's end, event read", active: ms(2 * time.Millisecond), processed: ms(-6 * time.Millisecond), done: ms(20 * time.Millisecond), want: ms(2 * time.Millisecond)},
		{name: "fetched by the last job's end, no event", processed: ms(-6 * time.Millisecond), done: ms(20 * time.Millisecond), want: sent},
		{name: "a clock far behind", processed: ms(-400 * time.Millisecond), done: ms(-380 * time.Millisecond), want: sent, noted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Source{pending: queue.NewPendingJobs(), reasons: map[string]int{}}
			b.pending.Add("tare-r-0", queue.Job{ID: "0", RunID: "r", Enqueued: sent})
			if !tt.active.IsZero() {
				b.pending.Start("tare-r-0", b.notBeforeEnqueue("tare-r-0", tt.active), "", false)
			}
			b.finishFromHash("tare-r-0", bullJob{ok: true, processedOn: tt.processed, finishedOn: tt.done, attempts: 1, completed: true})
			out := b.pending.Take(context.Background(), 1, 0)
			if len(out) != 1 {
				t.Fatalf("results %+v, want one", out)
			}
			if r := out[0]; !r.Start.Equal(tt.want) || r.Done.Before(r.Start) || !r.OK() {
				t.Errorf("start %v, done %v, status %q: want start %v, done not before it", r.Start, r.Done, r.Status, tt.want)
			}
			if noted := strings.Contains(strings.Join(b.Notes(), "\n"), "clock may be behind"); noted != tt.noted {
				t.Errorf("notes %q: noted %v, want %v", b.Notes(), noted, tt.noted)
			}
		})
	}
}
