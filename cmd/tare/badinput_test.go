package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBadInputEveryCommand: bad input to every command exits 2 with a
// message that names what was wrong, before any load is sent or any
// connection made, and never with a stack trace or a library's log line.
func TestBadInputEveryCommand(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "bad.db"))
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	url := srv.URL + "/"
	dir := t.TempDir()
	file := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	truncated := file("truncated.json", `{"schema": "tare.summary/v1", "run": {"label": `)
	wrongType := file("wrong-type.json", `{"schema": "tare.summary/v1", "requests": {"total": "many"}}`)
	otherSchema := file("v2.json", `{"schema": "tare.summary/v2"}`)
	record := file("record.jsonl", `{"seq":1,"scheduled":"yesterday"}`+"\n")
	plan := "url: " + url + "\n"
	tabPlan := file("tab.yaml", plan+"\trate: 5/s\n")
	bracketPlan := file("bracket.yaml", "url: ["+url+"\n")
	unknownKey := file("unknown.yaml", plan+"jobs: 3\nrps: 5\n")
	badRate := file("rate.yaml", plan+"rate: fast\n")
	peak := "testdata/seed-peak.json"
	const redis, model = "redis://127.0.0.1:6379/0", "http://127.0.0.1:9/v1"
	bigHeader := "X-Big: " + strings.Repeat("a", 20000)
	regular := file("not-a-socket", "")
	zeroConns := file("conns.yaml", plan+"connections: 0\n")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"run unknown flag", []string{"run", "--url", url, "--rps", "5"}, "unknown flag: --rps"},
		{"run bad rate", []string{"run", "--url", url, "--rate", "fast"}, `--rate must look like 200/s`},
		{"run huge header", []string{"run", "--url", url, "-H", bigHeader}, "the longest tare sends is 16384"},
		{"run queue url", []string{"run", "--queue", "ftp://x"}, `--queue`},
		{"run url with a password", []string{"run", "--url", "http://u:s3cret@ho st/"}, "--url must look like http://host:port/path"},
		{"run model url with a password", []string{"run", "--model", "http://u:s3cret@ho st/v1"}, "--model URL"},
		{"run queue url with a password", []string{"run", "--queue", "redis://u:s3cret@ho st/0"}, "--queue"},
		{"run db with a password", []string{"run", "--url", url, "--db", "postgres://u:s3cret@ho st/db"}, `postgres store "postgres://u:redacted@ho st/db"`},
		{"run job timeout", []string{"run", "--queue", redis, "--job-timeout", "0s"}, "--job-timeout must be positive"},
		{"run unix socket missing", []string{"run", "--url", url, "--unix-socket", filepath.Join(dir, "no.sock")}, `--unix-socket "` + filepath.Join(dir, "no.sock") + `": no such file; give the path of the socket the server listens on`},
		{"run unix socket a file", []string{"run", "--url", url, "--unix-socket", regular}, `--unix-socket "` + regular + `" is a regular file, not a Unix socket`},
		{"run unix socket a directory", []string{"run", "--model", model, "--unix-socket", dir}, `is a directory, not a Unix socket`},
		{"run unix socket abstract", []string{"run", "--url", url, "--unix-socket", "@app"}, `--unix-socket "@app": an abstract socket name is not supported`},
		{"run unix socket queue", []string{"run", "--queue", redis, "--unix-socket", regular}, "--unix-socket is for --url, --targets and --model"},
		{"run connections zero", []string{"run", "--url", url, "--connections", "0"}, `connections must be a whole number of 1 or more, like 8 (leave it out for as many as requests in flight); got "0"`},
		{"run connections negative", []string{"run", "--url", url, "--connections", "-2"}, `got "-2"`},
		{"run connections queue", []string{"run", "--queue", redis, "--connections", "4"}, "--connections is for --url, --targets and --model"},
		{"sweep connections zero", []string{"sweep", "--url", url, "--slo", "p95<=1s", "--connections", "0"}, `connections must be a whole number of 1 or more`},
		{"protocol run connections zero", []string{"protocol", "run", zeroConns, "--now"}, `line 2, key connections: connections must be a whole number of 1 or more`},
		{"run celery url without a task", []string{"run", "--queue", "celery+redis://127.0.0.1:6379/0?queue=celery"}, `task="": give the task name the worker runs`},
		{"run rq url with a bad queue", []string{"run", "--queue", "rq+redis://127.0.0.1:6379/0?queue=a:b&func=tasks.answer"}, `queue="a:b"`},
		{"run celery url with a password", []string{"run", "--queue", "celery+redis://u:s3cret@127.0.0.1:6379/0?task=x y"}, `celery+redis://u:xxxxx@`},
		{"run celery amqp url without a backend", []string{"run", "--queue", "celery+amqp://u:s3cret@127.0.0.1:5672/?task=tasks.answer"}, `no backend: give the worker's result_backend, backend=redis://HOST:6379/0 or backend=rpc://`},
		{"run celery amqp url with a database backend", []string{"run", "--queue", "celery+amqp://127.0.0.1/?task=tasks.answer&backend=db%2Bpostgresql://u:s3cret@h/x"}, `backend=db+postgresql://…: tare reads task states from a Redis result backend`},
		{"run celery amqp url with a bad port", []string{"run", "--queue", "celery+amqp://u:s3cret@127.0.0.1:99999/?task=tasks.answer&backend=redis://127.0.0.1:6379/0"}, `port 99999: want 1 to 65535`},
		{"run celery amqp url without a task", []string{"run", "--queue", "celery+amqp://127.0.0.1/?backend=redis://127.0.0.1:6379/0"}, `task="": give the task name the worker runs`},
		{"run job args not a list", []string{"run", "--queue", "rq+redis://127.0.0.1:6379/0?func=tasks.answer", "--job-args", `{"a": 1}`}, "--job-args"},
		{"run job kwargs not an object", []string{"run", "--queue", "celery+redis://127.0.0.1:6379/0?task=tasks.answer", "--job-kwargs", `[1]`}, "--job-kwargs"},
		{"cleanup rq url with a bad queue", []string{"cleanup", "--queue", "rq+redis://127.0.0.1:6379/0?queue=a*"}, `queue="a*"`},
		{"run bullmq url without a queue", []string{"run", "--queue", "bullmq+redis://127.0.0.1:6379/0?name=answer"}, `no queue: give the queue the worker consumes`},
		{"run bullmq url without a name", []string{"run", "--queue", "bullmq+redis://u:s3cret@127.0.0.1:6379/0?queue=agents"}, `bullmq+redis://u:xxxxx@127.0.0.1:6379/0?queue=agents": name="": give the job name`},
		{"run bullmq job kwargs", []string{"run", "--queue", "bullmq+redis://127.0.0.1:6379/0?queue=agents&name=answer", "--job-kwargs", `{"a": 1}`}, "--job-kwargs"},
		{"run bullmq job args not JSON", []string{"run", "--queue", "bullmq+redis://127.0.0.1:6379/0?queue=agents&name=answer", "--job-args", `{"a":`}, "--job-args"},
		{"cleanup bullmq url with a bad prefix", []string{"cleanup", "--queue", "bullmq+redis://127.0.0.1:6379/0?queue=agents&prefix=a*"}, `prefix="a*"`},
		{"run wait workers", []string{"run", "--queue", redis, "--wait-workers", "-1s"}, "--wait-workers must be 0 (do not check) or more"},
		{"demo workers", []string{"demo", "--workers", "0"}, "--workers must be at least 1"},
		{"demo token cost", []string{"demo", "--token-cost", "0"}, "--token-cost must be positive"},
		{"demo jobs", []string{"demo", "--jobs", "-1"}, "--jobs must be 0 or more; got -1"},
		{"demo queue url", []string{"demo", "--queue", "ftp://x"}, `--queue: redis URL "ftp://x": want redis://`},
		{"demo args", []string{"demo", "now"}, `unknown command "now" for "tare demo"`},
		{"watch slo", []string{"watch", "--no-store", "--slo", "p95<=1s", "--", "true"}, "tare watch sees no latency of its own, so --slo has nothing to judge"},
		{"watch results format", []string{"watch", "--no-store", "--results", "wrk:out.txt", "--", "true"}, `--results format "wrk" is not known: use one of vegeta, vegeta-json, hey-csv, jsonl`},
		{"watch results spec", []string{"watch", "--no-store", "--results", "vegeta", "--", "true"}, `--results "vegeta" is not FORMAT:PATH`},
		{"watch results missing", []string{"watch", "--no-store", "--results", "jsonl:/nonexistent/r.jsonl", "--", "true"}, `--results: cannot read the jsonl results`},
		{"check slo", []string{"check", "--for", "1s", "--fail-on", "slo", "--slo", "p95<=1s"}, "tare check sees no latency of its own"},
		{"check for", []string{"check", "--for", "soon"}, `--for must be a duration like 30s, 1m30s or 250ms; got "soon"`},
		{"check threshold", []string{"check", "--steal-threshold", "-3"}, "--steal-threshold must be a percentage from 0 to 100; got -3"},
		{"watch threshold", []string{"watch", "--steal-threshold", "200", "--", "true"}, "--steal-threshold must be a percentage from 0 to 100; got 200"},
		{"watch no command", []string{"watch"}, "requires at least 1 arg"},
		{"run no such container", []string{"run", "--url", url, "--container", "no-such-container-here"}, `--container "no-such-container-here" not found: no process under /proc runs in a container of that name or id`},
		{"check runtime dir", []string{"check", "--runtime-dir", "lxd=/var/lib/lxd"}, `--runtime-dir "lxd=/var/lib/lxd": unknown container runtime "lxd"`},
		{"worker no redis", []string{"worker", "--model", model}, "tare worker needs --queue"},
		{"worker redis url", []string{"worker", "--queue", "ftp://x", "--model", model}, `--queue: redis URL "ftp://x"`},
		{"worker concurrency", []string{"worker", "--redis", redis, "--model", model, "--concurrency", "0"}, "--concurrency must be at least 1; got 0"},
		{"worker claim idle", []string{"worker", "--redis", redis, "--model", model, "--claim-idle", "1ns"}, "--claim-idle must be 3ms or more, like 5s; got 1ns"},
		{"worker grace", []string{"worker", "--redis", redis, "--model", model, "--grace", "-1s"}, "--grace must be 0 or more; got -1s"},
		{"worker max deliveries", []string{"worker", "--redis", redis, "--model", model, "--max-deliveries", "0"}, "--max-deliveries must be at least 1; got 0"},
		{"worker timeout", []string{"worker", "--redis", redis, "--model", model, "--timeout", "-1s"}, "--timeout must be positive"},
		{"worker queue name", []string{"worker", "--redis", redis, "--model", model, "--queue", "a b"}, `queue name "a b"`},
		{"model error rate", []string{"model", "--error-rate", "2"}, "--error-rate must be a share from 0 to 1; got 2"},
		{"model cut rate range", []string{"model", "--cut-rate", "-0.5"}, "--cut-rate must be a share from 0 to 1; got -0.5"},
		{"model token cost", []string{"model", "--token-cost", "0"}, "--token-cost must be positive, like 2ms; got 0s"},
		{"model prompt cost", []string{"model", "--prompt-cost", "-1ms"}, "--prompt-cost must be positive"},
		{"model mean tokens", []string{"model", "--mean-tokens", "0"}, "--mean-tokens must be at least 1; got 0"},
		{"model context length", []string{"model", "--context-length", "0"}, "--context-length must be at least 1, like 8192; got 0"},
		{"model cut rate", []string{"model", "--cut-rate", "x"}, `--cut-rate must be a number; got "x"`},
		{"model listen", []string{"model", "--listen", "nonsense"}, `--listen address "nonsense": want host:port`},
		{"model port", []string{"model", "--listen", "127.0.0.1:99999"}, `port "99999": want a number from 0 to 65535`},
		{"model parallel", []string{"model", "--parallel", "-1"}, "--parallel must be 0 (no cap) or more; got -1"},
		{"cleanup no redis", []string{"cleanup"}, "tare cleanup needs --queue"},
		{"cleanup wait", []string{"cleanup", "--redis", redis, "--wait", "-1s"}, "--wait must be 0 or more; got -1s"},
		{"cleanup queue name", []string{"cleanup", "--queue", redis, "--queue-name", ""}, `queue name ""`},
		{"run queue down", []string{"run", "--queue", "redis://127.0.0.1:1/0", "--jobs", "5"}, "connection refused"},
		{"demo redis down", []string{"demo", "--redis", "redis://127.0.0.1:1/0", "--no-store"}, "connection refused"},
		{"cleanup redis down", []string{"cleanup", "--queue", "redis://127.0.0.1:1/0"}, "connection refused"},
		{"runs list window", []string{"runs", "list", "--window", "noon"}, `--window must be peak, offpeak or mid; got "noon"`},
		{"runs list since", []string{"runs", "list", "--since", "soon"}, `--since must be a duration`},
		{"runs list limit", []string{"runs", "list", "--limit", "-1"}, "--limit must be 0 (all) or more"},
		{"runs list postgres", []string{"runs", "list", "--db", "postgres://postgres:wrong@127.0.0.1:5432/nodb?sslmode=disable"}, `postgres store "postgres://postgres:redacted@127.0.0.1:5432/nodb`},
		{"runs show unknown", []string{"runs", "show", "0193dead"}, `no stored run "0193dead"`},
		{"runs export unknown", []string{"runs", "export", "0193dead"}, `no stored run "0193dead"`},
		{"runs delete unknown", []string{"runs", "delete", "--yes", "0193dead"}, `no stored run "0193dead"`},
		{"runs delete no id", []string{"runs", "delete"}, "accepts 1 arg(s), received 0"},
		{"runs import truncated", []string{"runs", "import", truncated}, "unexpected end of JSON input"},
		{"runs import bad record", []string{"runs", "import", record}, `line 1: parsing time "yesterday"`},
		{"runs import missing", []string{"runs", "import", "/nonexistent/run.json"}, "/nonexistent/run.json"},
		{"compare truncated", []string{"compare", truncated, peak}, "truncated.json is not a tare.summary/v1 JSON"},
		{"compare wrong type", []string{"compare", wrongType, peak}, `cannot unmarshal string into Go struct field Requests.requests.total of type int`},
		{"compare other schema", []string{"compare", otherSchema, peak}, `v2.json is not a tare.summary/v1 JSON (what tare run --json prints): schema "tare.summary/v2"`},
		{"compare one", []string{"compare", peak}, "compare needs at least two runs"},
		{"compare unknown run", []string{"compare", "0193dead", peak}, `"0193dead" is neither a summary file, a protocol nor a stored run`},
		{"compare threshold", []string{"compare", peak, peak, "--threshold", "-5"}, "--threshold must be a percentage above 0"},
		{"sweep no slo", []string{"sweep", "--url", url}, "tare sweep needs an --slo"},
		{"sweep huge header", []string{"sweep", "--url", url, "--slo", "p95<=1s", "-H", bigHeader}, "the longest tare sends is 16384"},
		{"sweep to below from", []string{"sweep", "--url", url, "--slo", "p95<=1s", "--from", "10/s", "--to", "5/s"}, "--to must be at least --from"},
		{"protocol run tab", []string{"protocol", "run", tabPlan, "--now"}, "tab.yaml, line 2: not valid YAML"},
		{"protocol run bracket", []string{"protocol", "run", bracketPlan, "--now"}, "bracket.yaml, line 1: not valid YAML"},
		{"protocol run unknown key", []string{"protocol", "run", unknownKey, "--now"}, `line 3, key rps: unknown key "rps"`},
		{"protocol run bad rate", []string{"protocol", "run", badRate, "--now"}, `line 2, key rate: rate must look like 200/s`},
		{"protocol run no plan", []string{"protocol", "run", "/nonexistent/plan.yaml"}, `no plan file "/nonexistent/plan.yaml"`},
		{"protocol cron bad plan", []string{"protocol", "cron", unknownKey}, `line 3, key rps: unknown key "rps"`},
		{"protocol cron no plan", []string{"protocol", "cron"}, "accepts 1 arg(s), received 0"},
		{"protocol cron days", []string{"protocol", "cron", badRate, "--days", "0"}, "line 2, key rate"},
		{"protocol status unknown", []string{"protocol", "status", "nosuch"}, `no runs of protocol "nosuch"`},
		{"report unknown id", []string{"report", "0193dead", "-o", filepath.Join(dir, "r.html")}, "no stored run or protocol has that id"},
		{"report truncated", []string{"report", truncated, "-o", filepath.Join(dir, "r.html")}, "unexpected end of JSON input"},
		{"report bad record", []string{"report", record, "-o", filepath.Join(dir, "r.html")}, `parsing time "yesterday"`},
		{"unknown command", []string{"fly"}, `unknown command "fly" for "tare"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := tareCmd(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stdout %q stderr %q", code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
			for _, bad := range []string{"goroutine ", "panic", "pool.go:", ".go:", "s3cret"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr has %q (a stack trace or a library's log line): %s", bad, stderr)
				}
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("bad input sent %d requests; want none", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.html")); err == nil {
		t.Errorf("a report was written despite bad input")
	}
}

// TestModelListensOnLoopback: with no --listen, tare model serves on
// loopback only.
func TestModelListensOnLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"model", "--token-cost", "100us"}, strings.NewReader(""), io.Discard, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	cancel()
	go io.Copy(io.Discard, pr)
	if runErr := <-done; runErr != nil && strings.Contains(runErr.Error(), "address already in use") {
		t.Skipf("the default port is taken on this machine: %v", runErr)
	}
	if err != nil {
		t.Fatalf("tare model printed no address: %v", err)
	}
	if !strings.Contains(line, "at http://127.0.0.1:8089/v1") {
		t.Errorf("tare model with no --listen: %q; want it serving at http://127.0.0.1:8089/v1", line)
	}
}
