package openai

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/netconn"
)

// Defaults used when a Config field is zero.
const (
	DefaultPrompt  = "Explain in one short paragraph why a load test on a shared virtual machine can mislead."
	DefaultTimeout = 60 * time.Second
)

// Config describes the endpoint and the completion to ask for. The zero
// value of every field but URL means its default.
type Config struct {
	// URL is the API base, like http://127.0.0.1:8089/v1, or the full
	// URL of one of Endpoints.
	URL string
	// Endpoint is which of Endpoints to load: EndpointChat (the default,
	// or the one URL ends in), EndpointCompletions (the prompt as one
	// text) or EndpointEmbeddings (the prompt as input; no stream, no
	// output tokens, so TTFT is the whole call).
	Endpoint string
	// Model is the model id; empty leaves "model" out of the request
	// (Client.ChooseModel asks the server for it instead).
	Model string
	// Prompt is the user message; empty means DefaultPrompt.
	Prompt string
	// MaxTokens caps the output; 0 leaves the cap to the server.
	MaxTokens int
	// APIKey, when set, is sent as "Authorization: Bearer …". The caller
	// reads it from TARE_API_KEY or OPENAI_API_KEY; the Client never
	// prints it.
	APIKey string
	// Timeout bounds one whole completion, stream included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// NoStream asks for one JSON body instead of a stream. The content then
	// arrives at once: TTFT equals e2e (as in vLLM's benchmark), and TPOT
	// and ITL are unknown.
	NoStream bool
	// NoUsage leaves out stream_options.include_usage, for servers that
	// reject it; output tokens are then counted from the chunks.
	NoUsage bool
	// Prompts, when not nil, gives each arrival its own messages and
	// output budget (a prompt dataset), in place of Prompt and MaxTokens
	// (a budget of 0 keeps MaxTokens).
	Prompts tare.Prompts
	// Class, when not nil, names each arrival's class (tare.Result.Class),
	// like a shared prefix group's "group first".
	Class func(seq uint64) string
	// Header holds extra request headers. Credential headers
	// (Authorization, Api-Key, X-Api-Key) are kept as secret as APIKey.
	Header http.Header
	// UnixSocket is the path of a Unix-domain socket every connection
	// goes to, as curl's --unix-socket: URL's host is then only the Host
	// header, and no proxy is used.
	UnixSocket string
	// MaxConns is how many connections are open at once at most; further
	// calls wait for one. 0: no limit.
	MaxConns int
	// TLS is the configuration of an https:// endpoint's connections,
	// cloned (tlsclient builds it from --cacert, --cert, --key,
	// --servername and --insecure); nil means the system's CAs.
	TLS *tls.Config
}

// Client sends chat completions to one endpoint. It is safe for concurrent
// use and implements tare.Target.
type Client struct {
	endpoint  *url.URL
	kind      string // one of Endpoints
	model     string
	prompt    string
	maxTokens int
	timeout   time.Duration
	stream    bool
	usage     bool
	header    http.Header // non-secret headers only
	body      []byte      // the request body for the default Request
	prompts   tare.Prompts
	class     func(seq uint64) string

	// secret holds the credentials behind a pointer: fmt prints a pointer
	// nested in a struct as its address, so no verb applied to a Client
	// value, or to a struct holding one, can reveal the key.
	secret *secret
	http   *http.Client
	conns  *tare.ConnCounter
	// pinned makes an HTTP client of one connection, counted in conns,
	// for Pinned.
	pinned func() *http.Client
	notes  []string // said beside the verdict: how the model was chosen

	promptWords int // words of the default request's prompt: tare's count of it
}

var (
	_ tare.Target      = (*Client)(nil)
	_ tare.ConnCounted = (*Client)(nil)
	_ tare.Noted       = (*Client)(nil)
)

// secret is what must never be printed.
type secret struct {
	header http.Header // credential headers, Authorization included
	values []string    // their values, to redact from server messages
}

// credentialHeaders are moved out of Config.Header into the secret.
var credentialHeaders = []string{"Authorization", "Api-Key", "X-Api-Key", "Proxy-Authorization"}

// New checks cfg and returns a client for it. A bad URL or a negative
// figure is a *tare.Error with code EINVALID.
func New(cfg Config) (*Client, error) {
	endpoint, kind, err := parseEndpoint(cfg.URL, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.MaxTokens < 0:
		return nil, tare.Errorf(tare.EINVALID, "max tokens %d: want 0 (server default) or more", cfg.MaxTokens)
	case cfg.Timeout < 0:
		return nil, tare.Errorf(tare.EINVALID, "model timeout %v: want 0 (default %v) or more", cfg.Timeout, DefaultTimeout)
	case cfg.MaxConns < 0:
		return nil, tare.Errorf(tare.EINVALID, "max connections %d: want 0 (no limit) or more", cfg.MaxConns)
	}
	conns := new(tare.ConnCounter)
	c := &Client{
		endpoint:  endpoint,
		kind:      kind,
		model:     cfg.Model,
		prompt:    cmp.Or(cfg.Prompt, DefaultPrompt),
		maxTokens: cfg.MaxTokens,
		timeout:   cfg.Timeout,
		stream:    !cfg.NoStream && kind != EndpointEmbeddings,
		usage:     !cfg.NoStream && !cfg.NoUsage && kind != EndpointEmbeddings,
		header:    cfg.Header.Clone(),
		prompts:   cfg.Prompts,
		class:     cfg.Class,
		secret:    &secret{header: http.Header{}},
		http:      &http.Client{Transport: newTransport(cfg, conns), CheckRedirect: noRedirects},
		conns:     conns,
	}
	one := cfg
	one.MaxConns = 1
	c.pinned = func() *http.Client {
		return &http.Client{Transport: newTransport(one, conns), CheckRedirect: noRedirects}
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.header == nil {
		c.header = http.Header{}
	}
	for _, h := range credentialHeaders {
		if v := c.header.Values(h); len(v) > 0 {
			c.secret.header[h] = v
			c.secret.values = append(c.secret.values, v...)
			c.header.Del(h)
		}
	}
	if cfg.APIKey != "" {
		c.secret.header.Set("Authorization", "Bearer "+cfg.APIKey)
		c.secret.values = append(c.secret.values, cfg.APIKey)
	}
	c.body = c.requestBody(Request{})
	c.promptWords = countWords(c.prompt)
	return c, nil
}

// messageWords is tare's own count of a prompt: the words of its
// messages, as tare's prompt lengths are counted.
func messageWords(msgs []tare.Message) int {
	n := 0
	for _, m := range msgs {
		n += countWords(m.Content)
	}
	return n
}

// countWords counts runs of non-space characters, as strings.Fields
// splits them, without allocating.
func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// The endpoints a Client can load, for Config.Endpoint: each is the path
// after the API base.
const (
	EndpointChat        = "chat/completions"
	EndpointCompletions = "completions"
	EndpointEmbeddings  = "embeddings"
)

// Endpoints are the endpoints, the most specific path first.
var Endpoints = []string{EndpointChat, EndpointCompletions, EndpointEmbeddings}

// parseEndpoint turns a base URL into the URL of the endpoint kind ("":
// the one the URL ends in, else chat), and says which it is.
func parseEndpoint(raw, kind string) (*url.URL, string, error) {
	const want = "want http(s)://host[:port]/v1 or the full …/chat/completions, …/completions or …/embeddings URL"
	if raw == "" {
		return nil, "", tare.Errorf(tare.EINVALID, "model URL is empty: %s", want)
	}
	if kind != "" && !slices.Contains(Endpoints, kind) {
		return nil, "", tare.Errorf(tare.EINVALID, "model endpoint %q: want one of %s", kind, strings.Join(Endpoints, ", "))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := tare.RedactText(raw) // unparsable, it may still hold a password
		if err == nil {
			shown = u.Redacted()
		}
		return nil, "", tare.Errorf(tare.EINVALID, "model URL %q: %s", shown, want)
	}
	u.Fragment = ""
	path := strings.TrimRight(u.Path, "/")
	for _, e := range Endpoints {
		if strings.HasSuffix(path, "/"+e) {
			if kind != "" && kind != e {
				return nil, "", tare.Errorf(tare.EINVALID, "model URL %q ends in /%s, but the endpoint asked is %s: give the API base, like …/v1", u.Redacted(), e, kind)
			}
			return u, e, nil
		}
	}
	kind = cmp.Or(kind, EndpointChat)
	return u.JoinPath(strings.Split(kind, "/")...), kind, nil
}

// newTransport is tuned for a load generator: many idle connections per
// host, so an open loop does not churn TCP connections, and no transparent
// gzip, which would buffer an event stream. cfg.TLS, when not nil, is
// cloned for https://.
func newTransport(cfg Config, conns *tare.ConnCounter) *http.Transport {
	proxy := http.ProxyFromEnvironment
	if cfg.UnixSocket != "" {
		proxy = nil // every connection goes to the socket, as with curl
	}
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		tlsConfig = cfg.TLS.Clone()
	}
	return &http.Transport{
		TLSClientConfig:       tlsConfig,
		Proxy:                 proxy,
		DialContext:           netconn.Dialer(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, cfg.UnixSocket, conns),
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   cmp.Or(cfg.MaxConns, 1024),
		MaxConnsPerHost:       cfg.MaxConns, // net/http: 0 is no limit
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// String names the endpoint and model, never the key (nor a password in
// the URL).
func (c *Client) String() string {
	if c.model == "" {
		return c.endpoint.Redacted()
	}
	return c.endpoint.Redacted() + " model " + c.model
}

// Format prints String for every verb, %#v and %+v included, so a Client
// formatted by accident cannot show its credentials.
func (c *Client) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, c.String()) }

// Addr is the endpoint's scheme and host:port, the port defaulted: where
// the connections go (without a proxy).
func (c *Client) Addr() (scheme, addr string) {
	port := c.endpoint.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[c.endpoint.Scheme]
	}
	return c.endpoint.Scheme, net.JoinHostPort(c.endpoint.Hostname(), port)
}

// Pinned is an HTTP client for Request.Via of one connection of its own,
// opened at its first call and kept between calls, counted in Conns:
// close its idle connections when done with it.
func (c *Client) Pinned() *http.Client { return c.pinned() }

// Endpoint is which of Endpoints the client loads.
func (c *Client) Endpoint() string { return c.kind }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Conns counts the client's connections.
func (c *Client) Conns() *tare.ConnCounter { return c.conns }

// Request varies one completion from the client's Config.
type Request struct {
	Prompt    string // the user message; "" means the Config's
	MaxTokens int    // 0 means the Config's
	// Messages, when not empty, are the chat messages sent instead of
	// one user message.
	Messages []tare.Message
	// Header holds headers added to the client's for this call alone.
	Header http.Header
	// Via, when not nil, is the HTTP client the call goes through instead
	// of the Client's pool (a conversation's own connection: Pinned).
	Via *http.Client
	// KeepContent asks for the answer's text in Response.Content.
	KeepContent bool
}

// chatRequest is the body sent to chat/completions; textRequest to
// completions (Prompt) and embeddings (Input).
type chatRequest struct {
	Model         string         `json:"model,omitempty"`
	Messages      []chatMessage  `json:"messages"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type textRequest struct {
	Model         string         `json:"model,omitempty"`
	Prompt        string         `json:"prompt,omitempty"`
	Input         string         `json:"input,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type chatMessage = tare.Message

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (c *Client) requestBody(req Request) []byte {
	body := chatRequest{
		Model:     c.model,
		Messages:  []chatMessage{{Role: "user", Content: cmp.Or(req.Prompt, c.prompt)}},
		MaxTokens: c.maxTokens,
		Stream:    c.stream,
	}
	if len(req.Messages) > 0 {
		body.Messages = req.Messages
	}
	if req.MaxTokens > 0 {
		body.MaxTokens = req.MaxTokens
	}
	if c.usage {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	var v any = body
	switch text := (tare.Prompt{Messages: body.Messages}).Text(); c.kind {
	case EndpointCompletions:
		v = textRequest{Model: body.Model, Prompt: text, MaxTokens: body.MaxTokens, Stream: body.Stream, StreamOptions: body.StreamOptions}
	case EndpointEmbeddings:
		v = textRequest{Model: body.Model, Input: text}
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Strings and ints always marshal.
		panic(fmt.Sprintf("openai: marshal request: %v", err))
	}
	return b
}

// Do performs one completion for the load engine: it fills FirstByte (the
// first content token), Done, Status, Err, OutputTokens, TokenSource and
// the byte counts. Sent is kept as the engine set it.
func (c *Client) Do(ctx context.Context, res *tare.Result) {
	var req Request
	words := c.promptWords
	if c.prompts != nil {
		p := c.prompts(res.Seq)
		req = Request{Messages: p.Messages, MaxTokens: p.MaxTokens}
		if len(p.Messages) > 0 {
			words = messageWords(p.Messages)
		}
	}
	if c.class != nil {
		res.Class = c.class(res.Seq)
	}
	r := c.Call(ctx, req)
	res.PromptWords = words
	if res.Sent.IsZero() {
		res.Sent = r.Sent
	}
	fill(res, &r)
}

// fill records r in res, all but Sent.
func fill(res *tare.Result, r *Response) {
	res.FirstByte = r.FirstToken
	res.Done = r.Done
	res.Status = r.Status
	res.Err = r.Err
	res.Detail = r.Detail
	res.BytesIn = r.BytesIn
	res.BytesOut = r.BytesOut
	res.OutputTokens = r.OutputTokens
	res.TokenSource = r.TokenSource
	res.PromptTokens, res.PromptTokenSource = r.PromptTokens, r.PromptSource
	res.Conn = r.Conn
}

// Call performs one completion and measures it. It never returns an error:
// a failed request is a measurement, reported in Response.Err and Detail.
// It returns once the completion is done, the client's Timeout has passed
// or ctx is cancelled, whichever comes first: every read is bounded by
// them. After [DONE] it reads on to the end of the response (at most 4 KiB,
// still bounded by the timeout) so the connection can be reused; Done is
// the moment [DONE] arrived.
func (c *Client) Call(ctx context.Context, req Request) Response {
	body := c.body
	if req.Prompt != "" || req.MaxTokens != 0 || len(req.Messages) > 0 {
		body = c.requestBody(req)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	m := measure{ctx: ctx, callCtx: callCtx, secret: c.secret, keep: req.KeepContent}
	var onConn netconn.Request
	hreq, err := http.NewRequestWithContext(onConn.Trace(callCtx, c.conns), http.MethodPost, c.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return m.fail(tare.KindOther, "build request: "+err.Error())
	}
	for k, v := range c.header {
		hreq.Header[k] = v
	}
	for k, v := range req.Header {
		hreq.Header[k] = v
	}
	for k, v := range c.secret.header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", "tare")
	}

	m.r.Sent = time.Now()
	m.r.BytesOut = int64(len(body))
	via := c.http
	if req.Via != nil {
		via = req.Via
	}
	resp, err := via.Do(hreq)
	m.r.Conn = onConn.ID
	if err != nil {
		return m.transportFail("send", err)
	}
	defer func() {
		resp.Body.Close()
		if resp.Close {
			onConn.Closing()
		}
	}()
	m.r.Status = resp.StatusCode
	in := &countingReader{r: resp.Body}
	switch ct := strings.ToLower(resp.Header.Get("Content-Type")); {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		m.readHTTPError(in)
	case strings.HasPrefix(ct, "text/event-stream"):
		m.readStream(in)
	default:
		// A server that ignores "stream": true answers with one JSON body;
		// read it as such rather than as a malformed stream.
		m.readBody(in)
	}
	if m.r.Err == "" {
		// Drain what little may follow, so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(in, 4<<10))
	}
	m.r.BytesIn = in.n
	return m.r
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// noRedirects keeps a call on the endpoint named. Following a redirect
// would send the load elsewhere uncounted, and turn the POST of a 301 or 302
// into a GET: the 3xx is the answer, recorded as "http 3xx".
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
