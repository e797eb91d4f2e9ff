package openai

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// newClient returns a client for cfg, closed when the test ends.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestAgainstModelsim(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{TokenCost: 300 * time.Microsecond, MeanTokens: 8, Seed: 1})
	tests := []struct {
		name       string
		cfg        Config
		req        Request
		wantTokens int
		wantSource string
		wantChunks int
		wantFinish string
		streamed   bool
	}{
		{
			name:       "stream with usage",
			cfg:        Config{URL: ts.URL + "/v1", Model: "tare-sim"},
			wantTokens: 8, wantSource: "usage", wantChunks: 8, wantFinish: "stop", streamed: true,
		},
		{
			name:       "stream without usage counts chunks",
			cfg:        Config{URL: ts.URL + "/v1/", NoUsage: true},
			wantTokens: 8, wantSource: "counted", wantChunks: 8, wantFinish: "stop", streamed: true,
		},
		{
			name:       "max tokens from the config",
			cfg:        Config{URL: ts.URL + "/v1/chat/completions", MaxTokens: 5},
			wantTokens: 5, wantSource: "usage", wantChunks: 5, wantFinish: "length", streamed: true,
		},
		{
			name:       "max tokens and prompt from the request",
			cfg:        Config{URL: ts.URL + "/v1", MaxTokens: 5},
			req:        Request{Prompt: "a much longer prompt of several words", MaxTokens: 3},
			wantTokens: 3, wantSource: "usage", wantChunks: 3, wantFinish: "length", streamed: true,
		},
		{
			name:       "not streamed",
			cfg:        Config{URL: ts.URL + "/v1", NoStream: true},
			wantTokens: 8, wantSource: "usage", wantChunks: 1, wantFinish: "stop",
		},
		{
			name:       "text completions streamed",
			cfg:        Config{URL: ts.URL + "/v1", Endpoint: EndpointCompletions, MaxTokens: 5},
			wantTokens: 5, wantSource: "usage", wantChunks: 5, wantFinish: "length", streamed: true,
		},
		{
			name:       "text completions from the URL, not streamed",
			cfg:        Config{URL: ts.URL + "/v1/completions", NoStream: true},
			wantTokens: 8, wantSource: "usage", wantChunks: 1, wantFinish: "stop",
		},
		{
			name:       "embeddings",
			cfg:        Config{URL: ts.URL + "/v1", Endpoint: EndpointEmbeddings},
			wantSource: "usage", wantChunks: 0, // the simulator's usage says 0 completion tokens
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.cfg)
			r := c.Call(context.Background(), tt.req)
			if !r.OK() || r.Status != 200 {
				t.Fatalf("call failed: status %d, %s: %s", r.Status, r.Err, r.Detail)
			}
			if r.PromptTokens < 1 && !tt.cfg.NoUsage {
				t.Errorf("prompt tokens %d from %q, want the server's count", r.PromptTokens, r.PromptSource)
			}
			if r.OutputTokens != tt.wantTokens || r.TokenSource != tt.wantSource {
				t.Errorf("output tokens %d from %q, want %d from %q", r.OutputTokens, r.TokenSource, tt.wantTokens, tt.wantSource)
			}
			if r.Chunks != tt.wantChunks {
				t.Errorf("chunks %d, want %d", r.Chunks, tt.wantChunks)
			}
			if r.FinishReason != tt.wantFinish {
				t.Errorf("finish reason %q, want %q", r.FinishReason, tt.wantFinish)
			}
			if r.BytesIn == 0 || r.BytesOut == 0 {
				t.Errorf("bytes in %d, out %d; want both counted", r.BytesIn, r.BytesOut)
			}
			if r.TTFT() <= 0 || r.TTFT() > r.E2E() {
				t.Errorf("TTFT %v, e2e %v; want 0 < TTFT ≤ e2e", r.TTFT(), r.E2E())
			}
			if !tt.streamed {
				if r.TPOT() != 0 || len(r.ITL) != 0 {
					t.Errorf("non-streamed call has TPOT %v and %d ITLs, want none", r.TPOT(), len(r.ITL))
				}
				return
			}
			if r.TTFT() >= r.E2E() {
				t.Errorf("TTFT %v not below e2e %v", r.TTFT(), r.E2E())
			}
			if r.TPOT() <= 0 {
				t.Errorf("TPOT %v with %d tokens, want > 0", r.TPOT(), r.OutputTokens)
			}
			if len(r.ITL) != r.Chunks-1 {
				t.Errorf("%d ITLs for %d chunks, want %d", len(r.ITL), r.Chunks, r.Chunks-1)
			}
			var sum time.Duration
			for _, d := range r.ITL {
				if d < 0 {
					t.Errorf("negative ITL %v", d)
				}
				sum += d
			}
			if last := r.FirstToken.Add(sum); last.After(r.Done) {
				t.Errorf("last chunk at %v after Done", last.Sub(r.Done))
			}
		})
	}
}

func TestDo(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4})
	c := newClient(t, Config{URL: ts.URL + "/v1"})
	var target tare.Target = c
	sched := time.Now()
	res := tare.Result{Seq: 3, Scheduled: sched, Sent: sched}
	target.Do(context.Background(), &res)
	if !res.OK() || res.Status != 200 {
		t.Fatalf("Do: status %d, err %q", res.Status, res.Err)
	}
	if res.Sent != sched {
		t.Errorf("Do changed Sent")
	}
	if res.OutputTokens != 4 || res.TokenSource != "usage" {
		t.Errorf("output tokens %d from %q, want 4 from usage", res.OutputTokens, res.TokenSource)
	}
	if res.TTFT() <= 0 || !res.FirstByte.Before(res.Done) {
		t.Errorf("FirstByte %v, Done %v after Sent; want 0 < first < done", res.TTFT(), res.Service())
	}
	if res.BytesIn == 0 || res.BytesOut == 0 {
		t.Errorf("bytes in %d, out %d; want both", res.BytesIn, res.BytesOut)
	}
}

// rawServer answers every request with the given function.
func rawServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

// sse answers with a hand-written event stream, flushed line by line.
func sse(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, line := range strings.SplitAfter(body, "\n") {
			_, _ = io.WriteString(w, line)
			_ = rc.Flush()
		}
	}
}

const (
	role      = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n"
	tokenA    = `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}` + "\n\n"
	tokenB    = `data: {"choices":[{"index":0,"delta":{"content":" b"},"finish_reason":null}],"usage":null}` + "\n\n"
	finish    = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	usage7    = `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}` + "\n\n"
	done      = "data: [DONE]\n\n"
	jsonReply = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}`
)

func TestStreams(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantErr    string
		wantDetail string // substring of Detail
		wantChunks int
		wantTokens int
		wantSource string
		wantStatus int
	}{
		{
			name:       "role chunk is not a token",
			handler:    sse(role + tokenA + tokenB + finish + done),
			wantChunks: 2, wantTokens: 2, wantSource: "counted", wantStatus: 200,
		},
		{
			name:       "usage chunk wins over the count",
			handler:    sse(role + tokenA + tokenB + finish + usage7 + done),
			wantChunks: 2, wantTokens: 7, wantSource: "usage", wantStatus: 200,
		},
		{
			name:       "comments, no space after data:, CRLF",
			handler:    sse(": keep-alive\r\n\r\n" + strings.ReplaceAll(tokenA, "data: ", "data:") + ": ping\n\n" + strings.ReplaceAll(tokenB, "\n", "\r\n") + "data:[DONE]\n\n"),
			wantChunks: 2, wantTokens: 2, wantSource: "counted", wantStatus: 200,
		},
		{
			name:       "multi-line data",
			handler:    sse("data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}}]}\n\n" + done),
			wantChunks: 1, wantTokens: 1, wantSource: "counted", wantStatus: 200,
		},
		{
			name:       "reasoning content counts",
			handler:    sse(`data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}` + "\n\n" + tokenA + done),
			wantChunks: 2, wantTokens: 2, wantSource: "counted", wantStatus: 200,
		},
		{
			name:       "[DONE] without a final blank line",
			handler:    sse(tokenA + "data: [DONE]\n"),
			wantChunks: 1, wantTokens: 1, wantSource: "counted", wantStatus: 200,
		},
		{
			name: "server ignores stream and answers JSON",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, jsonReply)
			},
			wantChunks: 1, wantTokens: 2, wantSource: "usage", wantStatus: 200,
		},
		{
			name:    "error object in the stream",
			handler: sse(tokenA + `data: {"error":{"message":"model crashed","type":"server_error","code":500}}` + "\n\n"),
			wantErr: KindStreamError, wantDetail: "after 1 chunks: server_error: model crashed (code 500)",
			wantChunks: 1, wantStatus: 200,
		},
		{
			name:    "vLLM error object",
			handler: sse(`data: {"object":"error","message":"out of KV cache"}` + "\n\n"),
			wantErr: KindStreamError, wantDetail: "out of KV cache", wantStatus: 200,
		},
		{
			name:    "error event",
			handler: sse(tokenA + "event: error\ndata: overloaded\n\n"),
			wantErr: KindStreamError, wantDetail: "overloaded", wantChunks: 1, wantStatus: 200,
		},
		{
			name:    "bad chunk",
			handler: sse(tokenA + "data: {not json\n\n" + done),
			wantErr: KindBadResponse, wantDetail: "chunk 2", wantChunks: 1, wantStatus: 200,
		},
		{
			name:    "ends without [DONE]",
			handler: sse(role + tokenA + tokenB),
			wantErr: KindStreamCut, wantDetail: "after 2 chunks without [DONE]", wantChunks: 2, wantStatus: 200,
		},
		{
			name: "connection dropped mid-line",
			handler: func(w http.ResponseWriter, r *http.Request) {
				sse(tokenA+`data: {"choi`)(w, r)
				panic(http.ErrAbortHandler)
			},
			wantErr: KindStreamCut, wantDetail: "after 1 chunks", wantChunks: 1, wantStatus: 200,
		},
		{
			name: "connection reset",
			handler: func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n%s", tokenA)
				buf.Flush()
				time.Sleep(10 * time.Millisecond) // let the client read the chunk
				conn.(*net.TCPConn).SetLinger(0)  // close with RST, not FIN
				conn.Close()
			},
			wantErr: KindStreamCut, wantDetail: "reset", wantChunks: 1, wantStatus: 200,
		},
		{
			name: "rate limited",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(429)
				io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			},
			wantErr: "http 429", wantDetail: "status 429: requests: Rate limit reached (code rate_limit_exceeded)", wantStatus: 429,
		},
		{
			name:    "server error in plain text",
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "upstream died", http.StatusBadGateway) },
			wantErr: "http 502", wantDetail: "status 502: upstream died", wantStatus: 502,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, Config{URL: rawServer(t, tt.handler), Timeout: 10 * time.Second})
			r := c.Call(context.Background(), Request{})
			t.Logf("err %q, detail %q", r.Err, r.Detail)
			if r.Err != tt.wantErr {
				t.Errorf("Err %q (%s), want %q", r.Err, r.Detail, tt.wantErr)
			}
			if !strings.Contains(r.Detail, tt.wantDetail) {
				t.Errorf("Detail %q, want it to contain %q", r.Detail, tt.wantDetail)
			}
			if r.Status != tt.wantStatus {
				t.Errorf("Status %d, want %d", r.Status, tt.wantStatus)
			}
			if r.Chunks != tt.wantChunks || r.OutputTokens != tt.wantTokens || r.TokenSource != tt.wantSource {
				t.Errorf("chunks %d, tokens %d from %q; want %d, %d from %q",
					r.Chunks, r.OutputTokens, r.TokenSource, tt.wantChunks, tt.wantTokens, tt.wantSource)
			}
			if r.Done.Before(r.Sent) || r.Done.IsZero() {
				t.Errorf("Done %v not after Sent %v", r.Done, r.Sent)
			}
		})
	}
}

// silentListener accepts connections and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex // guards conns
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// stallAfter streams body, then holds the response open until the client
// goes away.
func stallAfter(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sse(body)(w, r)
		<-r.Context().Done()
	}
}

func TestNeverHangs(t *testing.T) {
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/v1"
	}
	tests := []struct {
		name       string
		url        func(t *testing.T) string
		cancel     bool // cancel the caller's context instead of timing out
		wantErr    string
		wantChunks int
	}{
		{name: "accepts and never answers", url: silentListener, wantErr: tare.KindTimeout},
		{name: "stalls mid-stream", url: func(t *testing.T) string { return rawServer(t, stallAfter(role+tokenA)) }, wantErr: tare.KindTimeout, wantChunks: 1},
		{name: "caller cancels mid-stream", url: func(t *testing.T) string { return rawServer(t, stallAfter(tokenA+tokenB)) }, cancel: true, wantErr: tare.KindCanceled, wantChunks: 2},
		{name: "caller cancels before an answer", url: silentListener, cancel: true, wantErr: tare.KindCanceled},
		{name: "refused", url: func(*testing.T) string { return refused() }, wantErr: tare.KindRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := 150 * time.Millisecond
			if tt.cancel {
				timeout = time.Minute
			}
			c := newClient(t, Config{URL: tt.url(t), Timeout: timeout})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				time.AfterFunc(150*time.Millisecond, cancel)
			}
			got := make(chan Response, 1)
			go func() { got <- c.Call(ctx, Request{}) }()
			select {
			case r := <-got:
				t.Logf("err %q, detail %q", r.Err, r.Detail)
				if r.Err != tt.wantErr {
					t.Errorf("Err %q (%s), want %q", r.Err, r.Detail, tt.wantErr)
				}
				if r.Chunks != tt.wantChunks {
					t.Errorf("chunks %d, want %d", r.Chunks, tt.wantChunks)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Call still running twenty seconds on")
			}
		})
	}
}

func TestModelsimFaults(t *testing.T) {
	tests := []struct {
		name    string
		sim     modelsim.Config
		model   string
		wantErr string
	}{
		{name: "cut stream", sim: modelsim.Config{CutRate: 1, MeanTokens: 6, TokenCost: 100 * time.Microsecond}, wantErr: KindStreamCut},
		{name: "overload", sim: modelsim.Config{ErrorRate: 1}, wantErr: "http 503"},
		{name: "unknown model", model: "gpt-9", wantErr: "http 404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := testservice.Model(t, tt.sim)
			c := newClient(t, Config{URL: ts.URL + "/v1", Model: tt.model, Timeout: 10 * time.Second})
			if r := c.Call(context.Background(), Request{}); r.Err != tt.wantErr {
				t.Errorf("Err %q (%s), want %q", r.Err, r.Detail, tt.wantErr)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		endpoint string
		wantErr  string
	}{
		{name: "base", cfg: Config{URL: "http://127.0.0.1:8089/v1"}, endpoint: "http://127.0.0.1:8089/v1/chat/completions"},
		{name: "base with slash", cfg: Config{URL: "https://api.example.com/v1/"}, endpoint: "https://api.example.com/v1/chat/completions"},
		{name: "full", cfg: Config{URL: "http://[::1]:9/openai/v1/chat/completions"}, endpoint: "http://[::1]:9/openai/v1/chat/completions"},
		{name: "query kept", cfg: Config{URL: "http://h/v1?api-version=2024"}, endpoint: "http://h/v1/chat/completions?api-version=2024"},
		{name: "completions", cfg: Config{URL: "http://h/v1", Endpoint: EndpointCompletions}, endpoint: "http://h/v1/completions"},
		{name: "embeddings", cfg: Config{URL: "http://h/v1/", Endpoint: EndpointEmbeddings}, endpoint: "http://h/v1/embeddings"},
		{name: "embeddings URL", cfg: Config{URL: "http://h/v1/embeddings"}, endpoint: "http://h/v1/embeddings"},
		{name: "endpoint against URL", cfg: Config{URL: "http://h/v1/embeddings", Endpoint: EndpointChat}, wantErr: "ends in /embeddings, but the endpoint asked is chat/completions"},
		{name: "unknown endpoint", cfg: Config{URL: "http://h/v1", Endpoint: "rerank"}, wantErr: `model endpoint "rerank": want one of chat/completions, completions, embeddings`},
		{name: "empty", cfg: Config{}, wantErr: "model URL is empty"},
		{name: "no scheme", cfg: Config{URL: "127.0.0.1:8089/v1"}, wantErr: `model URL "127.0.0.1:8089/v1"`},
		{name: "ftp", cfg: Config{URL: "ftp://h/v1"}, wantErr: "want http(s)://"},
		{name: "password hidden", cfg: Config{URL: "ftp://u:hunter2@h/v1"}, wantErr: `"ftp://u:xxxxx@h/v1"`},
		{name: "negative max tokens", cfg: Config{URL: "http://h/v1", MaxTokens: -1}, wantErr: "max tokens -1"},
		{name: "negative timeout", cfg: Config{URL: "http://h/v1", Timeout: -time.Second}, wantErr: "model timeout -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("New = %v, want an EINVALID error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer c.Close()
			if got := c.endpoint.String(); got != tt.endpoint {
				t.Errorf("endpoint %q, want %q", got, tt.endpoint)
			}
		})
	}
}

func TestTPOT(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name string
		r    Response
		ttft time.Duration
		tpot time.Duration
	}{
		{name: "vLLM definition", r: Response{Sent: t0, FirstToken: at(100), Done: at(500), OutputTokens: 5}, ttft: 100 * time.Millisecond, tpot: 100 * time.Millisecond},
		{name: "one token", r: Response{Sent: t0, FirstToken: at(100), Done: at(100), OutputTokens: 1}, ttft: 100 * time.Millisecond},
		{name: "no tokens", r: Response{Sent: t0, Done: at(30)}},
		{name: "unknown count", r: Response{Sent: t0, FirstToken: at(10), Done: at(90)}, ttft: 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.TTFT(); got != tt.ttft {
				t.Errorf("TTFT %v, want %v", got, tt.ttft)
			}
			if got := tt.r.TPOT(); got != tt.tpot {
				t.Errorf("TPOT %v, want %v", got, tt.tpot)
			}
		})
	}
}

func TestKeyNeverShown(t *testing.T) {
	const key = "sk-test-DO-NOT-PRINT-4242"
	const other = "other-secret-9999"
	var (
		mu   sync.Mutex // guards seen
		seen []string
	)
	url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key")+"|"+r.Header.Get("X-Team"))
		mu.Unlock()
		// OpenAI's 401 quotes the key it got.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s and %s","type":"invalid_request_error"}}`, key, other)
	})
	c := newClient(t, Config{
		URL:    url,
		Model:  "m",
		APIKey: key,
		Header: http.Header{"X-Api-Key": {other}, "X-Team": {"perf"}},
	})
	r := c.Call(context.Background(), Request{})
	if r.Err != "http 401" {
		t.Fatalf("Err %q, want http 401", r.Err)
	}
	if want := "Bearer " + key + "|" + other + "|perf"; len(seen) != 1 || seen[0] != want {
		t.Errorf("server saw headers %q, want %q", seen, want)
	}
	var res tare.Result
	c.Do(context.Background(), &res)
	type holder struct {
		C *Client
		V Client
	}
	shown := []string{
		c.String(), r.Detail, r.Err, res.Err,
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c, c, c),
		fmt.Sprintf("%v %+v %#v", *c, *c, *c),
		fmt.Sprintf("%v %+v %#v", holder{c, *c}, holder{c, *c}, holder{c, *c}),
		fmt.Sprintf("%+v %#v", r, r), fmt.Sprintf("%+v", res),
	}
	for _, s := range shown {
		if strings.Contains(s, key) || strings.Contains(s, other) {
			t.Errorf("a credential is shown in %q", s)
		}
	}
	if !strings.Contains(r.Detail, "[redacted]") {
		t.Errorf("Detail %q, want the echoed key redacted", r.Detail)
	}
	if got, want := c.String(), url+"/chat/completions model m"; got != want {
		t.Errorf("String %q, want %q", got, want)
	}
}

func TestConcurrentCalls(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{TokenCost: 100 * time.Microsecond, MeanTokens: 5, TokenSpread: 0.5, Seed: 7})
	c := newClient(t, Config{URL: ts.URL + "/v1"})
	var wg sync.WaitGroup
	results := make([]Response, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.Call(context.Background(), Request{})
		}()
	}
	wg.Wait()
	total := 0
	for i, r := range results {
		if !r.OK() || r.TokenSource != "usage" || r.OutputTokens != r.Chunks {
			t.Errorf("call %d: err %q (%s), %d tokens from %q, %d chunks", i, r.Err, r.Detail, r.OutputTokens, r.TokenSource, r.Chunks)
		}
		total += r.OutputTokens
	}
	if total == 0 {
		t.Error("no tokens at all")
	}
}

// TestRedirectNotFollowed: an endpoint that redirects is answered by its
// 3xx; the call never reaches the redirect's target (issue 20, item 1).
func TestRedirectNotFollowed(t *testing.T) {
	var reached sync.Mutex // locked once the other server was reached
	other := rawServer(t, func(w http.ResponseWriter, r *http.Request) { reached.TryLock() })
	url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/chat/completions", http.StatusTemporaryRedirect)
	})
	r := newClient(t, Config{URL: url}).Call(context.Background(), Request{})
	if r.Status != http.StatusTemporaryRedirect || r.Err != "http 307" {
		t.Errorf("status %d, err %q; want 307, http 307", r.Status, r.Err)
	}
	if !reached.TryLock() {
		t.Errorf("the call followed the redirect to another server")
	}
}

// TestDoKeepsTheServersWords: a failed request's words reach the load
// engine's Result, the server's own message included, so a summary can
// say why every request was refused (issue 44: Ollama's "model is
// required" was shown nowhere); and a stream that timed out after its 200
// keeps that status beside its timeout.
func TestDoKeepsTheServersWords(t *testing.T) {
	tests := []struct {
		name       string
		sim        modelsim.Config
		cfg        Config
		wantErr    string
		wantStatus int
		wantDetail string
	}{
		{name: "unknown model", cfg: Config{Model: "gpt-9", Timeout: 10 * time.Second},
			wantErr: "http 404", wantStatus: 404, wantDetail: "gpt-9"},
		{name: "timed out mid-stream", sim: modelsim.Config{TokenCost: 20 * time.Millisecond, MeanTokens: 200},
			cfg: Config{Timeout: 300 * time.Millisecond}, wantErr: tare.KindTimeout, wantStatus: 200, wantDetail: "read stream after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := testservice.Model(t, tt.sim)
			tt.cfg.URL = ts.URL + "/v1"
			c := newClient(t, tt.cfg)
			var res tare.Result
			c.Do(context.Background(), &res)
			if res.Err != tt.wantErr || res.Status != tt.wantStatus || !strings.Contains(res.Detail, tt.wantDetail) {
				t.Errorf("Err %q, Status %d, Detail %q; want %q, %d and a detail holding %q", res.Err, res.Status, res.Detail, tt.wantErr, tt.wantStatus, tt.wantDetail)
			}
		})
	}
}

// TestPromptWords: Do counts the prompt it sent in words, tare's own
// count, beside the server's usage: the simulated model counts words too,
// so they agree.
func TestPromptWords(t *testing.T) {
	ts := testservice.Model(t, modelsim.Config{TokenCost: 100 * time.Microsecond, MeanTokens: 2, Seed: 1})
	prompts := func(seq uint64) tare.Prompt {
		return tare.Prompt{Messages: []tare.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "why  is\tthe sky blue"}}}
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"default prompt", Config{URL: ts.URL + "/v1"}, len(strings.Fields(DefaultPrompt))},
		{"dataset", Config{URL: ts.URL + "/v1", Prompts: prompts}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res tare.Result
			newClient(t, tt.cfg).Do(context.Background(), &res)
			if res.Err != "" || res.PromptWords != tt.want || res.PromptTokens != tt.want || res.PromptTokenSource != "usage" {
				t.Errorf("err %q, words %d, server's tokens %d (%s); want %d both", res.Err, res.PromptWords, res.PromptTokens, res.PromptTokenSource, tt.want)
			}
		})
	}
}
