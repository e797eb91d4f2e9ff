package modelsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sink keeps the result of the work loop observable, so no compiler can
// decide the loop is dead code.
var sink atomic.Uint64

// Server is the simulated endpoint, an http.Handler. It is safe for
// concurrent use.
type Server struct {
	cfg     Config
	burner  burner
	mux     *http.ServeMux
	slots   chan struct{} // a token per generation slot; nil when Parallel is 0
	created int64         // the models' "created" stamp

	mu  sync.Mutex // guards rng and seq: each request draws its plan under it
	rng *rand.Rand
	seq uint64

	active atomic.Int64 // requests holding a slot and burning CPU

	cache *prefixCache // nil when Config.PrefixCache is 0
	q     queue        // waiting requests and KV cache held, for /metrics
}

// New returns a server for cfg, calibrating the work loop first unless
// cfg.IterationsPerMS is set. An out-of-range field is a *tare.Error with
// code EINVALID.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	perMS := cfg.IterationsPerMS
	if perMS == 0 {
		perMS = Calibrate()
	}
	s := &Server{
		cfg:     cfg,
		burner:  burner{perMS: perMS},
		mux:     http.NewServeMux(),
		created: cfg.Now().Unix(),
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x746172652d73696d)),
	}
	if cfg.Parallel > 0 {
		s.slots = make(chan struct{}, cfg.Parallel)
	}
	if cfg.PrefixCache > 0 {
		s.cache = newPrefixCache(cfg.PrefixCache)
	}
	s.mux.HandleFunc("/v1/chat/completions", s.handleCompletions)
	s.mux.HandleFunc("/v1/completions", s.handleTextCompletions)
	s.mux.HandleFunc("/v1/embeddings", s.handleEmbeddings)
	s.mux.HandleFunc("/v1/models", s.handleModels)
	s.mux.HandleFunc("/v1/models/{id}", s.handleModel)
	s.mux.HandleFunc("/health", s.handleHealth)
	s.mux.HandleFunc("/metrics", s.handleMetrics)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found",
			fmt.Sprintf("no route for %s %s: try POST /v1/chat/completions or GET /v1/models", r.Method, r.URL.Path))
	})
	return s, nil
}

// IterationsPerMS is the calibration in use: rounds of the work loop per
// millisecond of an idle core.
func (s *Server) IterationsPerMS() float64 { return s.burner.perMS }

// Model is the model id served.
func (s *Server) Model() string { return s.cfg.Model }

// ServeHTTP answers the OpenAI-compatible routes. Every response, an error
// too, carries an x-request-id header, as OpenAI's do, so a client's log
// line can name the request it is about.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", newRequestID())
	s.mux.ServeHTTP(w, r)
}

// newRequestID is a request id in OpenAI's form: "req_" and 32 hex digits.
// It is random rather than seeded: no two responses, of this process or
// another, share one.
func newRequestID() string {
	return fmt.Sprintf("req_%016x%016x", rand.Uint64(), rand.Uint64())
}

// Serve serves on ln until ctx is cancelled, then shuts down. Requests in
// flight see their context cancelled with ctx and stop burning CPU, so
// shutdown is quick. It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve model on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(shutdown)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down model on %s: %w", ln.Addr(), err)
	}
	return nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.cfg.Model, Object: "model", Created: s.created, OwnedBy: "tare"}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{s.modelObject()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	if id := r.PathValue("id"); id != s.cfg.Model {
		modelNotFound(w, id)
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// plan is what one request will do, drawn up front under the lock so that
// a seed gives the same sequence of answers whatever the timing.
type plan struct {
	id     string
	seed   uint64 // seeds the request's words and its work loop
	tokens int
	finish string // "stop" or "length"
	fail   bool   // answer 503 at once
	cut    bool   // abort the stream half-way
}

func (s *Server) plan(req request) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	p := plan{
		id:     fmt.Sprintf("chatcmpl-sim-%d", s.seq),
		seed:   s.rng.Uint64(),
		tokens: s.drawTokens(),
		finish: "stop",
	}
	// Both fault draws happen on every request, so turning one knob does
	// not shift the other's sequence.
	p.fail = s.rng.Float64() < s.cfg.ErrorRate
	p.cut = s.rng.Float64() < s.cfg.CutRate
	if req.MaxTokens > 0 && p.tokens > req.MaxTokens {
		p.tokens, p.finish = req.MaxTokens, "length"
	}
	// The answer stops where the context ends (checkContext left room for
	// at least one token).
	if room := s.cfg.ContextLength - req.PromptTokens; p.tokens > room {
		p.tokens, p.finish = max(room, 1), "length"
	}
	return p
}

// drawTokens draws an output length from a lognormal with mean MeanTokens
// and sigma TokenSpread:
//
//	n = round(mean · exp(σZ − σ²/2)),  Z ~ N(0, 1),  1 ≤ n ≤ 32·mean
//
// The −σ²/2 keeps the mean at MeanTokens whatever the spread; the cap only
// trims a tail that would otherwise hold one request for minutes.
func (s *Server) drawTokens() int {
	mean := float64(s.cfg.MeanTokens)
	z := s.rng.NormFloat64()
	if s.cfg.TokenSpread == 0 {
		return s.cfg.MeanTokens
	}
	sigma := s.cfg.TokenSpread
	n := math.Round(mean * math.Exp(sigma*z-sigma*sigma/2))
	return int(min(max(n, 1), 32*mean))
}

// postBody is a POST's body, at most maxBody bytes; false when the
// request was answered already (another method, a body too large) or
// nobody is left to answer.
func postBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "",
				fmt.Sprintf("request body larger than %d bytes", maxBody))
		}
		// Otherwise the client went away while sending.
		return nil, false
	}
	return body, true
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := postBody(w, r)
	if !ok {
		return
	}
	req, err := parseRequest(body)
	if err == nil {
		err = checkContext(req, s.cfg.ContextLength)
	}
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{msg: err.Error()}
		}
		writeParamError(w, http.StatusBadRequest, re)
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		modelNotFound(w, req.Model)
		return
	}
	req.CachedTokens = s.cachedTokens(body, req)
	p := s.plan(req)
	if p.fail {
		writeError(w, http.StatusServiceUnavailable, "server_error", "overloaded",
			"simulated overload (error rate fault)")
		return
	}
	ctx := r.Context()
	if !s.acquire(ctx) {
		return
	}
	defer s.release()
	defer s.q.hold(req.PromptTokens + p.tokens)()
	g := s.generation(req, p)
	if req.Stream {
		s.stream(ctx, w, g)
		return
	}
	s.complete(ctx, w, g)
}

// acquire takes a generation slot, or gives up when the client goes away.
func (s *Server) acquire(ctx context.Context) bool {
	if s.slots != nil {
		defer s.q.wait()()
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	s.active.Add(1)
	return true
}

func (s *Server) release() {
	s.active.Add(-1)
	if s.slots != nil {
		<-s.slots
	}
}

// generation is one request being answered.
type generation struct {
	req     request
	plan    plan
	created int64
	words   *rand.Rand
	work    uint64 // the work loop's running value
}

func (s *Server) generation(req request, p plan) *generation {
	return &generation{
		req:     req,
		plan:    p,
		created: s.cfg.Now().Unix(),
		words:   rand.New(rand.NewPCG(p.seed, p.seed>>1|1)),
		work:    p.seed,
	}
}

// token returns the text of the i-th generated token: a word, with a
// leading space after the first, as BPE tokens carry.
func (g *generation) token(i int) string {
	w := words[g.words.IntN(len(words))]
	if i == 0 {
		return w
	}
	return " " + w
}

func (g *generation) usage() usage {
	return usage{
		PromptTokens:     g.req.PromptTokens,
		CompletionTokens: g.plan.tokens,
		TotalTokens:      g.req.PromptTokens + g.plan.tokens,
	}
}

// burn does d of CPU work for g, stopping early when ctx ends.
func (s *Server) burn(ctx context.Context, g *generation, d time.Duration) error {
	x, err := s.burner.burn(ctx, g.work, d)
	g.work = x
	sink.Add(x)
	return err
}

// complete answers a non-streaming request: all the work, then one body.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, g *generation) {
	if err := s.burn(ctx, g, s.prefill(g.req)); err != nil {
		return
	}
	var text strings.Builder
	for i := range g.plan.tokens {
		if err := s.burn(ctx, g, s.cfg.TokenCost); err != nil {
			return
		}
		text.WriteString(g.token(i))
	}
	writeJSON(w, http.StatusOK, wireCompletion(ctx, completion{
		ID:      g.plan.id,
		Object:  "chat.completion",
		Created: g.created,
		Model:   s.cfg.Model,
		Choices: []choice{{
			Message:      message{Role: "assistant", Content: text.String()},
			FinishReason: g.plan.finish,
		}},
		Usage: g.usage(),
	}))
}

// stream answers a streaming request: one SSE event per token, flushed as
// soon as the token's work is done, so the client's TTFT and ITL see the
// CPU time of every token.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, g *generation) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	lastWrite := time.Now()
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		lastWrite = time.Now()
		return rc.Flush()
	}
	send := func(c chunk) error {
		c.ID, c.Object, c.Created, c.Model = g.plan.id, "chat.completion.chunk", g.created, s.cfg.Model
		b, err := json.Marshal(wireChunk(ctx, c))
		if err != nil {
			return err
		}
		return write(append(append([]byte("data: "), b...), '\n', '\n'))
	}
	token := func(d delta, finish *string) chunk {
		return chunk{Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}

	// OpenAI opens with the role and no content: the client must not take
	// it for the first token.
	if send(token(delta{Role: "assistant"}, nil)) != nil {
		return
	}
	prefill := s.prefill(g.req)
	for prefill > 0 {
		piece := prefill
		if s.cfg.KeepAlive > 0 {
			piece = min(prefill, max(s.cfg.KeepAlive/4, time.Millisecond))
		}
		if s.burn(ctx, g, piece) != nil {
			return
		}
		prefill -= piece
		if s.cfg.KeepAlive > 0 && time.Since(lastWrite) >= s.cfg.KeepAlive {
			if write([]byte(": keep-alive\n\n")) != nil {
				return
			}
		}
	}
	for i := range g.plan.tokens {
		if g.plan.cut && i == g.plan.tokens/2 {
			// Drop the connection mid-stream, as a crashed or killed
			// server would: the client sees the stream end before [DONE].
			panic(http.ErrAbortHandler)
		}
		if s.burn(ctx, g, s.cfg.TokenCost) != nil {
			return
		}
		if send(token(delta{Content: g.token(i)}, nil)) != nil {
			return
		}
	}
	finish := g.plan.finish
	if send(token(delta{}, &finish)) != nil {
		return
	}
	if g.req.IncludeUsage {
		u := g.usage()
		if send(chunk{Choices: []chunkChoice{}, Usage: &u}) != nil {
			return
		}
	}
	_ = write([]byte("data: [DONE]\n\n"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes OpenAI's error body; an empty code is JSON null.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := errorBody{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, apiError{Error: e})
}

// writeParamError writes a refused request's error body, naming its
// parameter; an empty param or code is JSON null.
func writeParamError(w http.ResponseWriter, status int, re *requestError) {
	e := errorBody{Message: re.msg, Type: "invalid_request_error"}
	if re.param != "" {
		e.Param = &re.param
	}
	if re.code != "" {
		e.Code = &re.code
	}
	writeJSON(w, status, apiError{Error: e})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
		fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, allow))
}

func modelNotFound(w http.ResponseWriter, model string) {
	writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
		fmt.Sprintf("The model `%s` does not exist.", model))
}
