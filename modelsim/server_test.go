package modelsim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func itoa(n int) string           { return strconv.Itoa(n) }
func contains(s, sub string) bool { return strings.Contains(s, sub) }
func fixedNow() time.Time         { return time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC) }
func quick(cfg Config) Config     { cfg.IterationsPerMS = 1; cfg.Now = fixedNow; return cfg }
func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// post sends a chat completion body straight to the handler.
func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	return do(t, h, http.MethodPost, "/v1/chat/completions", body)
}

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		method string
		path   string
		body   string
		status int
	}{
		{
			name:   "stream_usage.golden.txt",
			cfg:    Config{MeanTokens: 5, Seed: 1},
			method: "POST", path: "/v1/chat/completions",
			body:   `{"model":"tare-sim","messages":[{"role":"user","content":"say five words"}],"stream":true,"stream_options":{"include_usage":true}}`,
			status: 200,
		},
		{
			name:   "stream_length.golden.txt",
			cfg:    Config{MeanTokens: 8, Seed: 2, Model: "other"},
			method: "POST", path: "/v1/chat/completions",
			body:   `{"messages":[{"role":"user","content":"capped"}],"max_tokens":3,"stream":true}`,
			status: 200,
		},
		{
			name:   "complete.golden.json",
			cfg:    Config{MeanTokens: 6, TokenSpread: 0.5, Seed: 3},
			method: "POST", path: "/v1/chat/completions",
			body:   `{"model":"tare-sim","messages":[{"role":"user","content":"a b c d"}]}`,
			status: 200,
		},
		{
			name:   "models.golden.json",
			method: "GET", path: "/v1/models",
			status: 200,
		},
		{
			name:   "model.golden.json",
			method: "GET", path: "/v1/models/tare-sim",
			status: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, newServer(t, quick(tt.cfg)), tt.method, tt.path, tt.body)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			goldenfile.Check(t, tt.name, rec.Body.Bytes())
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		method   string
		path     string
		body     string
		status   int
		typ      string
		code     string // "" for JSON null
		contains string
	}{
		{name: "bad json", method: "POST", path: "/v1/chat/completions", body: `{"messages":`, status: 400, typ: "invalid_request_error", contains: "not valid JSON"},
		{name: "no messages", method: "POST", path: "/v1/chat/completions", body: `{}`, status: 400, typ: "invalid_request_error", code: "missing_required_parameter", contains: "messages"},
		{name: "bad max_tokens", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"a"}],"max_tokens":-1}`, status: 400, typ: "invalid_request_error", code: "integer_below_min_value", contains: "got -1"},
		{name: "unknown model", method: "POST", path: "/v1/chat/completions", body: `{"model":"gpt-9","messages":[{"role":"user","content":"a"}]}`, status: 404, typ: "invalid_request_error", code: "model_not_found", contains: "gpt-9"},
		{name: "get completions", method: "GET", path: "/v1/chat/completions", status: 405, typ: "invalid_request_error", code: "method_not_allowed", contains: "use POST"},
		{name: "post models", method: "POST", path: "/v1/models", status: 405, typ: "invalid_request_error", code: "method_not_allowed", contains: "use GET"},
		{name: "unknown model id", method: "GET", path: "/v1/models/nope", status: 404, typ: "invalid_request_error", code: "model_not_found", contains: "nope"},
		{name: "unknown route", method: "GET", path: "/v2/x", status: 404, typ: "invalid_request_error", code: "not_found", contains: "GET /v2/x"},
		{name: "body too large", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"` + strings.Repeat("a ", maxBody) + `"}]}`, status: 413, typ: "invalid_request_error", contains: "larger than"},
		{name: "error rate fault", cfg: Config{ErrorRate: 1}, method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"a"}]}`, status: 503, typ: "server_error", code: "overloaded", contains: "simulated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, newServer(t, quick(tt.cfg)), tt.method, tt.path, tt.body)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("error body %q is not JSON: %v", rec.Body, err)
			}
			e := body.Error
			if e.Type != tt.typ {
				t.Errorf("error type %q, want %q", e.Type, tt.typ)
			}
			if code := ptrString(e.Code); code != tt.code {
				t.Errorf("error code %q, want %q", code, tt.code)
			}
			if !contains(e.Message, tt.contains) {
				t.Errorf("error message %q, want it to contain %q", e.Message, tt.contains)
			}
		})
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "zero is fine", cfg: Config{}},
		{name: "negative token cost", cfg: Config{TokenCost: -1}, want: "token cost"},
		{name: "negative prompt cost", cfg: Config{PromptCost: -1}, want: "prompt cost"},
		{name: "negative mean", cfg: Config{MeanTokens: -3}, want: "mean tokens -3"},
		{name: "huge spread", cfg: Config{TokenSpread: 9}, want: "token spread 9"},
		{name: "error rate above 1", cfg: Config{ErrorRate: 1.5}, want: "error rate 1.5"},
		{name: "cut rate NaN", cfg: Config{CutRate: math.NaN()}, want: "cut rate NaN"},
		{name: "negative parallel", cfg: Config{Parallel: -1}, want: "parallel -1"},
		{name: "negative keep-alive", cfg: Config{KeepAlive: -time.Second}, want: "keep-alive"},
		{name: "negative calibration", cfg: Config{IterationsPerMS: -1}, want: "iterations per ms"},
		{name: "negative context length", cfg: Config{ContextLength: -1}, want: "context length -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDrawTokens(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		s := newServer(t, quick(Config{MeanTokens: 7}))
		for range 100 {
			if n := s.drawTokens(); n != 7 {
				t.Fatalf("draw %d with no spread, want 7", n)
			}
		}
	})
	t.Run("lognormal keeps the mean", func(t *testing.T) {
		s := newServer(t, quick(Config{MeanTokens: 64, TokenSpread: 0.6, Seed: 42}))
		const n = 20000
		sum, lo, hi := 0, math.MaxInt, 0
		for range n {
			d := s.drawTokens()
			sum += d
			lo, hi = min(lo, d), max(hi, d)
		}
		mean := float64(sum) / n
		if math.Abs(mean-64)/64 > 0.05 {
			t.Errorf("mean of %d draws %.1f, want within 5%% of 64", n, mean)
		}
		if lo < 1 || hi > 32*64 || hi-lo < 64 {
			t.Errorf("draws span [%d, %d], want a real spread inside [1, %d]", lo, hi, 32*64)
		}
	})
	t.Run("same seed same answers", func(t *testing.T) {
		a := newServer(t, quick(Config{TokenSpread: 1, Seed: 9}))
		b := newServer(t, quick(Config{TokenSpread: 1, Seed: 9}))
		for i := range 50 {
			if x, y := a.plan(request{}), b.plan(request{}); x != y {
				t.Fatalf("plan %d differs: %+v vs %+v", i, x, y)
			}
		}
	})
	t.Run("max_tokens caps", func(t *testing.T) {
		s := newServer(t, quick(Config{MeanTokens: 50}))
		if p := s.plan(request{MaxTokens: 10}); p.tokens != 10 || p.finish != "length" {
			t.Errorf("plan with max_tokens 10 = %d tokens, finish %q; want 10, length", p.tokens, p.finish)
		}
		if p := s.plan(request{MaxTokens: 80}); p.tokens != 50 || p.finish != "stop" {
			t.Errorf("plan with max_tokens 80 = %d tokens, finish %q; want 50, stop", p.tokens, p.finish)
		}
	})
}

// serve runs s on loopback for the test.
func serve(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func stream(ctx context.Context, t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	return resp
}

// waitIdle waits until no request burns CPU, bounded at five seconds.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still burning CPU five seconds after their client left", s.active.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCancelStopsBurning(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		t.Run("stream="+strconv.FormatBool(streaming), func(t *testing.T) {
			// A thousand seconds of work: only cancellation ends it.
			s := newServer(t, Config{TokenCost: time.Second, MeanTokens: 1000})
			ts := serve(t, s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := `{"messages":[{"role":"user","content":"go"}],"stream":` + strconv.FormatBool(streaming) + `}`
			if streaming {
				resp := stream(ctx, t, ts.URL, body)
				defer resp.Body.Close()
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if err != nil || !contains(line, `"role":"assistant"`) {
					t.Fatalf("first line %q, %v; want the role chunk", line, err)
				}
			} else {
				go func() {
					defer cancel()
					deadline := time.Now().Add(5 * time.Second)
					for s.active.Load() == 0 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					t.Fatalf("non-streaming request answered %d, want it cancelled", resp.StatusCode)
				}
			}
			cancel()
			waitIdle(t, s)
		})
	}
}

func TestKeepAlive(t *testing.T) {
	// Prefill of 200 prompt tokens at 200µs each: about 40 ms of work
	// split in 1 ms pieces, with a keep-alive due after every millisecond
	// of silence.
	s := newServer(t, Config{PromptCost: 200 * time.Microsecond, TokenCost: time.Microsecond, MeanTokens: 2, KeepAlive: time.Millisecond})
	prompt := strings.Repeat("word ", 200)
	rec := post(t, s, `{"messages":[{"role":"user","content":"`+prompt+`"}],"stream":true}`)
	out := rec.Body.String()
	if !contains(out, "\n\n: keep-alive\n\n") {
		t.Errorf("stream has no keep-alive comment:\n%s", out)
	}
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]:\n%s", out)
	}
}

func TestCutStream(t *testing.T) {
	s := newServer(t, quick(Config{CutRate: 1, MeanTokens: 10}))
	ts := serve(t, s)
	resp := stream(context.Background(), t, ts.URL, `{"messages":[{"role":"user","content":"a"}],"stream":true}`)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("read of a cut stream ended cleanly, want an error")
	}
	if got := strings.Count(string(b), `"content":`); got != 5 {
		t.Errorf("cut stream carried %d tokens, want 5 of 10", got)
	}
	if contains(string(b), "[DONE]") {
		t.Errorf("cut stream carried [DONE]")
	}
}

func TestParallel(t *testing.T) {
	s := newServer(t, Config{Parallel: 1, TokenCost: 500 * time.Microsecond, MeanTokens: 40})
	ts := serve(t, s)
	var wg sync.WaitGroup
	stop, watched := make(chan struct{}), make(chan struct{})
	var peak int64
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
				peak = max(peak, s.active.Load())
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	bodies := make([]string, 3)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"messages":[{"role":"user","content":"a"}],"stream":true}`))
			if err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies[i] = string(b)
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	for i, b := range bodies {
		if !strings.HasSuffix(b, "data: [DONE]\n\n") {
			t.Errorf("stream %d did not finish:\n%s", i, b)
		}
	}
	if peak > 1 {
		t.Errorf("%d requests generated at once with Parallel 1", peak)
	}
}

func TestServe(t *testing.T) {
	s := newServer(t, quick(Config{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Errorf("health status %d, want 200", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return ten seconds after cancel")
	}
}

// TestErrorsSpeakOpenAI: a refused request is answered over HTTP the way
// the OpenAI API answers one: an error object naming the parameter at
// fault and the type it wanted, never the server's Go types (issue 20,
// item 10).
func TestErrorsSpeakOpenAI(t *testing.T) {
	srv := httptest.NewServer(newServer(t, quick(Config{ContextLength: 100})))
	defer srv.Close()
	tests := []struct {
		name  string
		body  string
		param string // "" for JSON null
		code  string // "" for JSON null
		msg   string
	}{
		{"messages a string", `{"messages":"hi"}`, "messages", "invalid_type",
			"Invalid type for 'messages': expected an array of objects, but got a string instead."},
		{"content a number", `{"messages":[{"role":"user","content":42}]}`, "messages[0].content", "invalid_type",
			"Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an integer instead."},
		{"max_tokens a string", `{"messages":[{"role":"user","content":"a"}],"max_tokens":"8"}`, "max_tokens", "invalid_type",
			"Invalid type for 'max_tokens': expected an integer, but got a string instead."},
		{"no messages", `{"model":"tare-sim"}`, "messages", "missing_required_parameter", "Missing required parameter: 'messages'."},
		{"max_tokens above the context", `{"messages":[{"role":"user","content":"a"}],"max_tokens":101}`, "max_tokens", "",
			"max_tokens is too large: 101. This model supports at most 100 completion tokens, whereas you provided 101."},
		{"max_completion_tokens above the context", `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":5000}`, "max_completion_tokens", "",
			"max_completion_tokens is too large: 5000. This model supports at most 100 completion tokens"},
		{"messages and completion above the context", `{"messages":[{"role":"user","content":"` + strings.Repeat("w ", 60) + `"}],"max_tokens":50}`, "messages", "context_length_exceeded",
			"This model's maximum context length is 100 tokens. However, you requested 110 tokens (60 in the messages, 50 in the completion)."},
		{"not JSON", `{"messages":`, "", "", "We could not parse the JSON body of your request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400: %s", resp.StatusCode, raw)
			}
			if id := resp.Header.Get("x-request-id"); !strings.HasPrefix(id, "req_") {
				t.Errorf("x-request-id %q, want req_…", id)
			}
			// Every key of OpenAI's error object is present, null or not.
			var body struct {
				Error map[string]*string `json:"error"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("error body %q is not JSON: %v", raw, err)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := body.Error[k]; !ok {
					t.Errorf("error object %s has no %q", raw, k)
				}
			}
			e := body.Error
			if typ := ptrString(e["type"]); typ != "invalid_request_error" {
				t.Errorf("type %q, want invalid_request_error", typ)
			}
			if p := ptrString(e["param"]); p != tt.param {
				t.Errorf("param %q, want %q", p, tt.param)
			}
			if c := ptrString(e["code"]); c != tt.code {
				t.Errorf("code %q, want %q", c, tt.code)
			}
			msg := ptrString(e["message"])
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q, want it to contain %q", msg, tt.msg)
			}
			for _, leak := range []string{"Go struct", "json:", "modelsim", "chatRequest", "unmarshal"} {
				if strings.Contains(msg, leak) {
					t.Errorf("message %q shows the server's internals (%q)", msg, leak)
				}
			}
		})
	}
}

// TestRequestID: every response, whatever its route or status, carries an
// x-request-id of its own.
func TestRequestID(t *testing.T) {
	srv := httptest.NewServer(newServer(t, quick(Config{MeanTokens: 2})))
	defer srv.Close()
	seen := map[string]bool{}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream":true}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}]}`},
		{"POST", "/v1/chat/completions", `{"messages":"hi"}`},
		{"GET", "/v1/models", ""},
		{"GET", "/v1/models/nope", ""},
		{"GET", "/health", ""},
		{"GET", "/nowhere", ""},
	} {
		req, err := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("x-request-id")
		if len(id) != len("req_")+32 || !strings.HasPrefix(id, "req_") {
			t.Errorf("%s %s (%d): x-request-id %q, want req_ and 32 hex digits", r.method, r.path, resp.StatusCode, id)
		}
		if seen[id] {
			t.Errorf("%s %s: x-request-id %q repeats an earlier response's", r.method, r.path, id)
		}
		seen[id] = true
	}
}

// TestContextLength: an answer with no max_tokens stops at the context
// length, finish "length"; max_tokens at the limit less the prompt is
// served.
func TestContextLength(t *testing.T) {
	h := newServer(t, quick(Config{ContextLength: 10, MeanTokens: 50}))
	var c completion
	rec := post(t, h, `{"messages":[{"role":"user","content":"one two three"}]}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || rec.Code != 200 {
		t.Fatalf("status %d, body %s: %v", rec.Code, rec.Body, err)
	}
	if c.Usage.CompletionTokens != 7 || c.Choices[0].FinishReason != "length" {
		t.Errorf("completion of %d tokens, finish %q; want 7 (10 − 3 in the prompt), length", c.Usage.CompletionTokens, c.Choices[0].FinishReason)
	}
	if rec := post(t, h, `{"messages":[{"role":"user","content":"one two three"}],"max_tokens":7}`); rec.Code != 200 {
		t.Errorf("max_tokens 7 with 3 prompt tokens in a context of 10: status %d, want 200: %s", rec.Code, rec.Body)
	}
}
