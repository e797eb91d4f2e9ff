package queue

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

func TestProtocolOf(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                   ProtocolTare,
		"rediss://h:6380/1":                          ProtocolTare,
		"celery+redis://h:6379/0?task=tasks.answer":  ProtocolCelery,
		"CELERY+REDISS://h:6379/0?task=tasks.answer": ProtocolCelery,
		"rq+redis://h:6379/0?func=tasks.answer":      ProtocolRQ,
		"rq+rediss://h/0":                            ProtocolRQ,
		"celery+amqp://guest@h//?task=tasks.answer":  ProtocolCelery,
		"Celery+AMQPS://h/vh?task=tasks.answer":      ProtocolCelery,
		"celery://h":                                 ProtocolTare, // OpenRedis rejects it, naming the forms
		"":                                           ProtocolTare,
	} {
		if got := ProtocolOf(url); got != want {
			t.Errorf("ProtocolOf(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestParseFrameworkURL(t *testing.T) {
	tests := []struct {
		name, url, protocol string
		want                FrameworkURL
		err                 string // part of the message; "" for none
	}{
		{name: "celery", url: "celery+redis://127.0.0.1:6379/2?queue=agents&task=app.tasks.answer", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, Redis: "Redis://127.0.0.1:6379/2", Backend: "Redis://127.0.0.1:6379/2", Queue: "agents", Task: "app.tasks.answer", DB: 2}},
		{name: "celery default queue, other backend", url: "celery+redis://h:6379/0?task=t.a&backend=redis://h:6379/1", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, Redis: "Redis://h:6379/0", Backend: "Redis://h:6379/1", Queue: "celery", Task: "t.a"}},
		{name: "rq with a password and a client option", url: "rq+redis://u:pw@h:6379/3?func=jobs.run&dial_timeout=3s", protocol: ProtocolRQ,
			want: FrameworkURL{Protocol: ProtocolRQ, Redis: "Redis://u:pw@h:6379/3?dial_timeout=3s", Backend: "Redis://u:pw@h:6379/3?dial_timeout=3s", Queue: "default", Task: "jobs.run", DB: 3}},
		{name: "no task", url: "celery+redis://h:6379/0", protocol: ProtocolCelery, err: `task="": give the task name`},
		{name: "task with a space", url: "celery+redis://h:6379/0?task=a b", protocol: ProtocolCelery, err: `task="a b"`},
		{name: "no func", url: "rq+redis://h:6379/0?queue=q", protocol: ProtocolRQ, err: `func="": give the function`},
		{name: "queue with a colon", url: "rq+redis://h:6379/0?queue=a:b&func=f", protocol: ProtocolRQ, err: `queue="a:b"`},
		{name: "bad database", url: "rq+redis://h:6379/x?func=f", protocol: ProtocolRQ, err: "want rq+redis://HOST:6379/0?queue=default&func=tasks.answer"},
		{name: "password redacted", url: "celery+redis://u:s3cret@h:6379/0?task=", protocol: ProtocolCelery, err: "u:xxxxx@"},
		{name: "bad backend", url: "celery+redis://h:6379/0?task=t&backend=http://h/", protocol: ProtocolCelery, err: "backend:"},
		{name: "celery on rabbitmq", url: "celery+amqp://u:pw@rabbit:5672/agents?queue=q1&task=tasks.answer&backend=redis://h:6379/1", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "AMQP://u:pw@rabbit:5672/agents", Backend: "Redis://h:6379/1", Queue: "q1", Task: "tasks.answer"}},
		{name: "celery on rabbitmq, tls, vhost /", url: "celery+amqps://rabbit//?task=t.a&backend=rediss://h:6380/0&heartbeat=30", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "amqps://rabbit//?heartbeat=30", Backend: "rediss://h:6380/0", Queue: "celery", Task: "t.a"}},
		{name: "amqp without backend", url: "celery+amqp://rabbit/?task=t.a", protocol: ProtocolCelery, err: "no backend: give the worker's result_backend, backend=redis://HOST:6379/0 or backend=rpc://"},
		{name: "amqp with rpc backend", url: "celery+amqp://rabbit/?task=t.a&backend=rpc://", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "AMQP://rabbit/", Backend: "rpc://", Queue: "celery", Task: "t.a"}},
		{name: "amqp with rpc backend and more", url: "celery+amqp://rabbit/?task=t.a&backend=rpc://h/x", protocol: ProtocolCelery, err: "want rpc://, nothing after it"},
		{name: "amqp with another backend", url: "celery+amqp://rabbit/?task=t.a&backend=db%2Bpostgresql://h/x", protocol: ProtocolCelery, err: "the others are not supported"},
		{name: "amqp bad port", url: "celery+amqp://u:s3cret@rabbit:99999/?task=t.a&backend=redis://h/0", protocol: ProtocolCelery, err: "want celery+amqp://USER:PASSWORD@HOST:5672/VHOST"},
		{name: "amqp bad backend", url: "celery+amqp://rabbit/?task=t.a&backend=redis://h:x/0", protocol: ProtocolCelery, err: "backend:"},
		{name: "backend password redacted", url: "celery+amqp://rabbit/?task=a%20b&backend=redis://:s3cret@h/0", protocol: ProtocolCelery, err: "backend=redis://:redacted@h/0"},
		{name: "amqp no task", url: "celery+amqp://rabbit/?backend=redis://h/0", protocol: ProtocolCelery, err: `task="": give the task name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFrameworkURL(tt.url, tt.protocol, true)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "":
				if err == nil || tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want an EINVALID one containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %v shows the password", err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseFrameworkURL(f *testing.F) {
	for _, s := range []string{"celery+redis://h:6379/0?queue=celery&task=tasks.answer", "rq+redis://u:p@h/1?func=a.b", "celery+redis://%zz", "rq+redis://h/0?func=a..b",
		"celery+amqp://u:p@h:5672//?task=t.a&backend=redis://h/0", "celery+amqps://h/v?task=t&backend=rpc://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []string{ProtocolCelery, ProtocolRQ} {
			u, err := ParseFrameworkURL(s, p, true)
			if err != nil {
				if tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("%q: error %v, want EINVALID", s, err)
				}
				continue
			}
			if !ValidTask(u.Task) || !nameRE.MatchString(u.Queue) {
				t.Fatalf("%q: accepted task %q, queue %q", s, u.Task, u.Queue)
			}
			if (u.Redis == "") == (u.AMQP == "") || u.Backend == "" {
				t.Fatalf("%q: accepted broker %q / %q, backend %q: want one broker and a backend", s, u.Redis, u.AMQP, u.Backend)
			}
		}
	})
}

func TestJobArgs(t *testing.T) {
	tests := []struct {
		name, args, kwargs   string
		wantArgs, wantKwargs string // JSON of one job's expansion
		err                  string
	}{
		{name: "none", wantArgs: `[]`, wantKwargs: `{}`},
		{name: "seq as a number and in text", args: `["{{seq}}", "job {{seq}} of {{id}}", 3, null]`, kwargs: `{"prompt": "{{prompt}}", "deep": {"list": ["{{seq}}"]}}`,
			wantArgs: `[7,"job 7 of tare-r-7",3,null]`, wantKwargs: `{"deep":{"list":[7]},"prompt":"hi"}`},
		{name: "args not a list", args: `{"a": 1}`, err: "--job-args"},
		{name: "args null", args: `null`, err: "--job-args"},
		{name: "kwargs not an object", kwargs: `[1]`, err: "--job-kwargs"},
		{name: "kwargs broken", kwargs: `{"a":`, err: "--job-kwargs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseJobArgs(tt.args, tt.kwargs)
			if tt.err != "" {
				if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want an EINVALID one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			args, kwargs := a.Expand(Job{ID: "7", RunID: "r", Prompt: "hi"}, "tare-r-7")
			gotArgs, _ := json.Marshal(args)
			gotKwargs, _ := json.Marshal(kwargs)
			if string(gotArgs) != tt.wantArgs || string(gotKwargs) != tt.wantKwargs {
				t.Errorf("expanded to %s %s, want %s %s", gotArgs, gotKwargs, tt.wantArgs, tt.wantKwargs)
			}
		})
	}
}

func TestRQFailureKind(t *testing.T) {
	for _, tt := range []struct{ name, traceback, want string }{
		{"raised", "Traceback (most recent call last):\n  File \"tasks.py\", line 9, in boom\n    raise ValueError(\"boom\")\nValueError: boom 2\n", "task raised ValueError"},
		{"dotted type", "Traceback…\nrequests.exceptions.ConnectionError: refused", "task raised requests.exceptions.ConnectionError"},
		{"bare type", "Traceback…\nKeyboardInterrupt", "task raised KeyboardInterrupt"},
		{"unknown function", "  File \"/usr/lib/python3/dist-packages/rq/utils.py\", line 220, in import_attribute\n    attribute_owner = getattr(module, attribute_owner_name)\nAttributeError: module 'tasks' has no attribute 'nope'", KindUnknownTask},
		{"unknown module", "  File \"rq/utils.py\", line 1, in import_attribute\nModuleNotFoundError: No module named 'nope'", KindUnknownTask},
		{"work horse killed", "Work-horse terminated unexpectedly; waitpid returned 9 (signal 9); ", KindTaskFailed},
		{"empty", "", KindTaskFailed},
	} {
		if got := rqFailureKind(tt.traceback); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseCeleryTime(t *testing.T) {
	want := time.Date(2026, 12, 1, 13, 35, 53, 521115000, time.UTC)
	for _, s := range []string{"2026-12-01T13:35:53.521115", "2026-12-01T13:35:53.521115+00:00", "2026-12-01T14:35:53.521115+01:00"} {
		if got, ok := parseCeleryTime(s); !ok || !got.Equal(want) {
			t.Errorf("parseCeleryTime(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := parseCeleryTime("yesterday"); ok {
		t.Error("parseCeleryTime(yesterday) ok")
	}
}

// TestCeleryMessage: a task message carries protocol 2's headers and a
// body of [args, kwargs, embed], as Celery's Redis transport expects.
func TestCeleryMessage(t *testing.T) {
	c := &Celery{f: FrameworkURL{Queue: "agents", Task: "tasks.answer"}, origin: "tare1@h"}
	m, err := c.message("tare-r-1", []any{uint64(1)}, map[string]any{"prompt": "hi"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := m.envelope()
	if err != nil {
		t.Fatal(err)
	}
	var env celeryEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"lang": "py", "task": "tasks.answer", "id": "tare-r-1", "root_id": "tare-r-1"} {
		if env.Headers[k] != want {
			t.Errorf("header %s = %v, want %v", k, env.Headers[k], want)
		}
	}
	info, _ := env.Properties["delivery_info"].(map[string]any)
	if env.Properties["correlation_id"] != "tare-r-1" || env.Properties["body_encoding"] != "base64" || info["routing_key"] != "agents" {
		t.Errorf("properties %v", env.Properties)
	}
	body, err := base64.StdEncoding.DecodeString(env.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[[1],{"prompt":"hi"},{"callbacks":null,"chain":null,"chord":null,"errbacks":null}]`; string(body) != want {
		t.Errorf("body %s, want %s", body, want)
	}
}

// TestCeleryMessageExpires: with a job timeout the task expires that long
// after it was enqueued, written as Celery writes times (and its message
// too, on an AMQP broker); without, never.
func TestCeleryMessageExpires(t *testing.T) {
	enqueued := time.Date(2026, 12, 1, 17, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		timeout time.Duration
		want    any
	}{
		{0, nil},
		{90 * time.Second, "2026-12-01T16:01:30.123456+00:00"},
	} {
		c := &Celery{f: FrameworkURL{Queue: "agents", Task: "tasks.answer"}, fw: FrameworkConfig{Timeout: tt.timeout}}
		m, err := c.message("tare-r-1", nil, nil, enqueued)
		if err != nil {
			t.Fatal(err)
		}
		if m.expiry != tt.timeout {
			t.Errorf("timeout %v: the message expires in the broker after %v", tt.timeout, m.expiry)
		}
		raw, err := m.envelope()
		if err != nil {
			t.Fatal(err)
		}
		var env celeryEnvelope
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatal(err)
		}
		if got := env.Headers["expires"]; got != tt.want {
			t.Errorf("timeout %v: expires %v; want %v", tt.timeout, got, tt.want)
		}
	}
}
