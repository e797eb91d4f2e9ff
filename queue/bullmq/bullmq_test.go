package bullmq

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

func TestParseBullMQURL(t *testing.T) {
	tests := []struct {
		name, url string
		want      queue.FrameworkURL
		err       string // part of the message; "" for none
	}{
		{name: "plain", url: "bullmq+redis://127.0.0.1:6379/2?queue=agents&name=answer",
			want: queue.FrameworkURL{Protocol: queue.ProtocolBullMQ, Redis: "Redis://127.0.0.1:6379/2", Backend: "Redis://127.0.0.1:6379/2", Queue: "agents", Task: "answer", Prefix: "bull", DB: 2}},
		{name: "TLS, a password, a prefix with a hash tag, a name with spaces", url: "BULLMQ+REDISS://u:pw@h:6380/0?queue=q1&name=send%20mail&prefix=%7Bbull%7D",
			want: queue.FrameworkURL{Protocol: queue.ProtocolBullMQ, Redis: "rediss://u:pw@h:6380/0", Backend: "rediss://u:pw@h:6380/0", Queue: "q1", Task: "send mail", Prefix: "{bull}"}},
		{name: "no queue", url: "bullmq+redis://h:6379/0?name=answer", err: `no queue: give the queue the worker consumes`},
		{name: "no name", url: "bullmq+redis://h:6379/0?queue=agents", err: `name="": give the job name`},
		{name: "name with a newline", url: "bullmq+redis://h:6379/0?queue=agents&name=a%0Ab", err: `name="a\nb"`},
		{name: "queue with a colon", url: "bullmq+redis://h:6379/0?queue=a:b&name=x", err: `queue="a:b"`},
		{name: "bad prefix", url: "bullmq+redis://h:6379/0?queue=q&name=x&prefix=a*b", err: `prefix="a*b"`},
		{name: "a backend", url: "bullmq+redis://h:6379/0?queue=q&name=x&backend=redis://u:s3cret@h/1", err: "drop backend"},
		{name: "bad database", url: "bullmq+redis://h:6379/x?queue=q&name=x", err: "want bullmq+redis://HOST:6379/0?queue=agents&name=answer"},
		{name: "password redacted", url: "bullmq+redis://u:s3cret@h:6379/0?queue=q", err: "u:xxxxx@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p := queue.ProtocolOf(tt.url); p != queue.ProtocolBullMQ {
				t.Fatalf("ProtocolOf(%q) = %q, want %q", tt.url, p, queue.ProtocolBullMQ)
			}
			got, err := queue.ParseFrameworkURL(tt.url, queue.ProtocolBullMQ, true)
			if tt.err != "" {
				if err == nil || tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want an EINVALID one containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %v shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseBullMQURL(f *testing.F) {
	for _, s := range []string{"bullmq+redis://h:6379/0?queue=agents&name=answer", "bullmq+rediss://u:p@h/1?queue=q&name=a&prefix={b}", "bullmq+redis://%zz", "bullmq+redis://h/0?queue=&name=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := queue.ParseFrameworkURL(s, queue.ProtocolBullMQ, true)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("%q: error %v, want EINVALID", s, err)
			}
			return
		}
		if !validJobName(u.Task) || !nameRE.MatchString(u.Queue) || !prefixRE.MatchString(u.Prefix) {
			t.Fatalf("%q: accepted name %q, queue %q, prefix %q", s, u.Task, u.Queue, u.Prefix)
		}
	})
}

func TestJobData(t *testing.T) {
	tests := []struct {
		name, args, kwargs string
		want               string // JSON of one job's data
		err                string
	}{
		{name: "none", want: `{}`},
		{name: "an object", args: `{"seq": "{{seq}}", "prompt": "{{prompt}}", "tags": ["job {{id}}"]}`,
			want: `{"prompt":"hi","seq":7,"tags":["job tare-r-7"]}`},
		{name: "a list", args: `["{{seq}}", 2]`, want: `[7,2]`},
		{name: "a string", args: `"{{prompt}}"`, want: `"hi"`},
		{name: "null", args: `null`, want: `{}`},
		{name: "broken", args: `{"a":`, err: "--job-args"},
		{name: "kwargs", kwargs: `{"a": 1}`, err: "--job-kwargs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := queue.ParseJobArgsFor("bullmq+redis://h/0?queue=q&name=n", tt.args, tt.kwargs)
			if tt.err != "" {
				if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want an EINVALID one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(a.ExpandData(queue.Job{ID: "7", RunID: "r", Prompt: "hi"}, "tare-r-7"))
			if string(got) != tt.want {
				t.Errorf("data %s, want %s", got, tt.want)
			}
		})
	}
	// Celery's and RQ's arguments stay as they were.
	if _, err := queue.ParseJobArgsFor("rq+redis://h/0?func=f", `{"a": 1}`, ""); tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("rq with an object for --job-args: error %v, want EINVALID", err)
	}
}

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
