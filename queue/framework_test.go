package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
			want: FrameworkURL{Protocol: ProtocolCelery, Redis: "redis://127.0.0.1:6379/2", Backend: "redis://127.0.0.1:6379/2", Queue: "agents", Task: "app.tasks.answer", DB: 2}},
		{name: "celery default queue, other backend", url: "celery+redis://h:6379/0?task=t.a&backend=redis://h:6379/1", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, Redis: "redis://h:6379/0", Backend: "redis://h:6379/1", Queue: "celery", Task: "t.a"}},
		{name: "rq with a password and a client option", url: "rq+redis://u:pw@h:6379/3?func=jobs.run&dial_timeout=3s", protocol: ProtocolRQ,
			want: FrameworkURL{Protocol: ProtocolRQ, Redis: "redis://u:pw@h:6379/3?dial_timeout=3s", Backend: "redis://u:pw@h:6379/3?dial_timeout=3s", Queue: "default", Task: "jobs.run", DB: 3}},
		{name: "no task", url: "celery+redis://h:6379/0", protocol: ProtocolCelery, err: `task="": give the task name`},
		{name: "task with a space", url: "celery+redis://h:6379/0?task=a b", protocol: ProtocolCelery, err: `task="a b"`},
		{name: "no func", url: "rq+redis://h:6379/0?queue=q", protocol: ProtocolRQ, err: `func="": give the function`},
		{name: "queue with a colon", url: "rq+redis://h:6379/0?queue=a:b&func=f", protocol: ProtocolRQ, err: `queue="a:b"`},
		{name: "bad database", url: "rq+redis://h:6379/x?func=f", protocol: ProtocolRQ, err: "want rq+redis://HOST:6379/0?queue=default&func=tasks.answer"},
		{name: "password redacted", url: "celery+redis://u:s3cret@h:6379/0?task=", protocol: ProtocolCelery, err: "u:xxxxx@"},
		{name: "bad backend", url: "celery+redis://h:6379/0?task=t&backend=http://h/", protocol: ProtocolCelery, err: "backend:"},
		{name: "celery on rabbitmq", url: "celery+amqp://u:pw@rabbit:5672/agents?queue=q1&task=tasks.answer&backend=redis://h:6379/1", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "amqp://u:pw@rabbit:5672/agents", Backend: "redis://h:6379/1", Queue: "q1", Task: "tasks.answer"}},
		{name: "celery on rabbitmq, tls, vhost /", url: "celery+amqps://rabbit//?task=t.a&backend=rediss://h:6380/0&heartbeat=30", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "amqps://rabbit//?heartbeat=30", Backend: "rediss://h:6380/0", Queue: "celery", Task: "t.a"}},
		{name: "amqp without backend", url: "celery+amqp://rabbit/?task=t.a", protocol: ProtocolCelery, err: "no backend: give the worker's result_backend, backend=redis://HOST:6379/0 or backend=rpc://"},
		{name: "amqp with rpc backend", url: "celery+amqp://rabbit/?task=t.a&backend=rpc://", protocol: ProtocolCelery,
			want: FrameworkURL{Protocol: ProtocolCelery, AMQP: "amqp://rabbit/", Backend: "rpc://", Queue: "celery", Task: "t.a"}},
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
				if e, ok := errors.AsType[*tare.SettingError](err); !ok || "--"+e.Field != tt.err {
					t.Errorf("error %v: want a tare.SettingError about %s", err, tt.err)
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

func TestParseBullMQURL(t *testing.T) {
	tests := []struct {
		name, url string
		want      FrameworkURL
		err       string // part of the message; "" for none
	}{
		{name: "plain", url: "bullmq+redis://127.0.0.1:6379/2?queue=agents&name=answer",
			want: FrameworkURL{Protocol: ProtocolBullMQ, Redis: "redis://127.0.0.1:6379/2", Backend: "redis://127.0.0.1:6379/2", Queue: "agents", Task: "answer", Prefix: "bull", DB: 2}},
		{name: "TLS, a password, a prefix with a hash tag, a name with spaces", url: "BULLMQ+REDISS://u:pw@h:6380/0?queue=q1&name=send%20mail&prefix=%7Bbull%7D",
			want: FrameworkURL{Protocol: ProtocolBullMQ, Redis: "rediss://u:pw@h:6380/0", Backend: "rediss://u:pw@h:6380/0", Queue: "q1", Task: "send mail", Prefix: "{bull}"}},
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
			if p := ProtocolOf(tt.url); p != ProtocolBullMQ {
				t.Fatalf("ProtocolOf(%q) = %q, want %q", tt.url, p, ProtocolBullMQ)
			}
			got, err := ParseFrameworkURL(tt.url, ProtocolBullMQ, true)
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
		u, err := ParseFrameworkURL(s, ProtocolBullMQ, true)
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
			a, err := ParseJobArgsFor("bullmq+redis://h/0?queue=q&name=n", tt.args, tt.kwargs)
			if tt.err != "" {
				if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want an EINVALID one naming %s", err, tt.err)
				}
				if e, ok := errors.AsType[*tare.SettingError](err); !ok || "--"+e.Field != tt.err {
					t.Errorf("error %v: want a tare.SettingError about %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(a.ExpandData(Job{ID: "7", RunID: "r", Prompt: "hi"}, "tare-r-7"))
			if string(got) != tt.want {
				t.Errorf("data %s, want %s", got, tt.want)
			}
		})
	}
	// Celery's and RQ's arguments stay as they were.
	if _, err := ParseJobArgsFor("rq+redis://h/0?func=f", `{"a": 1}`, ""); tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("rq with an object for --job-args: error %v, want EINVALID", err)
	}
}
