package httptarget

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tare-dev/tare"
)

// Request is one request of a targets file.
type Request struct {
	Name   string // the file's name for it; "" names it by method and URL
	Method string
	URL    string
	Header http.Header
	Body   []byte
	Weight float64 // its share of the arrivals, relative to the others'; 1 unless the file says
	Line   int     // where it starts in the file
}

// MaxTargets bounds a targets file: each request keeps its own connection
// pool and its own figures.
const MaxTargets = 1000

// The accepted forms, for messages.
const (
	httpForm = `vegeta's http format: "METHOD URL" on a line, then "Name: value" header lines, then optionally "@path" to a body file, a blank line between requests`
	jsonForm = `JSON lines like {"name": "home", "method": "GET", "url": "http://host/", "header": {"Accept": ["text/html"]}, "body": "...", "body_file": "path", "weight": 2}`
)

// ReadTargets reads a targets file: JSON lines when its first request
// starts with "{", else vegeta's http format. Bodies named by path
// ("@body.json", "body_file") are read relative to the file's directory.
// A bad file is a *tare.Error with code tare.EINVALID (tare.ENOTFOUND when
// it does not exist) naming the file, the line and the accepted form.
func ReadTargets(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, tare.Errorf(tare.ENOTFOUND, "targets file %q does not exist", path)
		}
		return nil, tare.Errorf(tare.EINVALID, "cannot read targets file %q: %w", path, err)
	}
	defer f.Close()
	return ParseTargets(f, path, filepath.Dir(path))
}

// ParseTargets parses a targets file read from r; file names it in
// messages and dir is where relative body paths start.
func ParseTargets(r io.Reader, file, dir string) ([]Request, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBodyLen+1))
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "cannot read targets file %q: %w", file, err)
	}
	if len(data) > MaxBodyLen {
		return nil, tare.Errorf(tare.EINVALID, "targets file %q is larger than %d MiB", file, MaxBodyLen>>20)
	}
	p := targetsParser{file: file, dir: dir}
	var reqs []Request
	if first := strings.TrimSpace(string(firstRequestLine(data))); strings.HasPrefix(first, "{") {
		reqs, err = p.jsonLines(data)
	} else {
		reqs, err = p.http(data)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case len(reqs) == 0:
		return nil, tare.Errorf(tare.EINVALID, "targets file %q has no request: write %s, or %s", file, httpForm, jsonForm)
	case len(reqs) > MaxTargets:
		return nil, tare.Errorf(tare.EINVALID, "targets file %q has %d requests; at most %d are mixed", file, len(reqs), MaxTargets)
	}
	return reqs, nil
}

// firstRequestLine is the first line that is neither blank nor a comment.
func firstRequestLine(data []byte) []byte {
	for line := range bytes.Lines(data) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return t
		}
	}
	return nil
}

type targetsParser struct {
	file, dir string
}

func (p *targetsParser) errorf(line int, form, format string, args ...any) error {
	return tare.Errorf(tare.EINVALID, "targets file %q, line %d: %s; the file must be %s", p.file, line, fmt.Sprintf(format, args...), form)
}

// http parses vegeta's http format:
//
//	GET http://127.0.0.1:8080/
//	X-Account: 8675309
//
//	POST http://127.0.0.1:8080/orders
//	Content-Type: application/json
//	@order.json
//
// Lines starting with "#" are comments. A line after the headers that is
// not a header and not "@path" starts the next request, as vegeta reads
// it; a blank line ends a request too.
func (p *targetsParser) http(data []byte) ([]Request, error) {
	var reqs []Request
	var cur *Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxHeaderLen+1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			cur = nil
			continue
		case strings.HasPrefix(line, "#"):
			continue
		case cur != nil && strings.HasPrefix(line, "@"):
			if cur.Body != nil {
				return nil, p.errorf(n, httpForm, "a second body for the request of line %d", cur.Line)
			}
			body, err := p.bodyFile(n, httpForm, strings.TrimPrefix(line, "@"))
			if err != nil {
				return nil, err
			}
			cur.Body = body
			continue
		case cur != nil && cur.Body == nil && !startsRequest(line):
			name, value, err := ParseHeader(line)
			if err != nil {
				return nil, p.errorf(n, httpForm, "%s", tare.ErrorMessage(err))
			}
			cur.Header.Add(name, value)
			continue
		}
		method, url, ok := strings.Cut(line, " ")
		url = strings.TrimSpace(url)
		if !ok || url == "" || strings.Contains(url, " ") || !validName(method) {
			return nil, p.errorf(n, httpForm, "%q is not a request line like GET http://127.0.0.1:8080/", clip(line))
		}
		if _, err := parseURL(url); err != nil {
			return nil, p.errorf(n, httpForm, "%s", tare.ErrorMessage(err))
		}
		reqs = append(reqs, Request{Method: method, URL: url, Header: http.Header{}, Weight: 1, Line: n})
		cur = &reqs[len(reqs)-1]
	}
	if err := sc.Err(); err != nil {
		return nil, tare.Errorf(tare.EINVALID, "targets file %q: a line longer than %d bytes", p.file, MaxHeaderLen)
	}
	return reqs, nil
}

// startsRequest reports whether a line looks like "METHOD http(s)://…"
// rather than a header.
func startsRequest(line string) bool {
	method, rest, ok := strings.Cut(line, " ")
	rest = strings.ToLower(strings.TrimSpace(rest))
	return ok && validName(method) && (strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://"))
}

// jsonTarget is one line of the JSON-lines form. The header takes a string
// or a list of strings per name (vegeta's JSON form has lists).
type jsonTarget struct {
	Name     string                     `json:"name"`
	Method   string                     `json:"method"`
	URL      string                     `json:"url"`
	Header   map[string]json.RawMessage `json:"header"`
	Body     *string                    `json:"body"`
	BodyFile string                     `json:"body_file"`
	Weight   *float64                   `json:"weight"`
}

func (p *targetsParser) jsonLines(data []byte) ([]Request, error) {
	var reqs []Request
	n := 0
	for raw := range bytes.Lines(data) {
		n++
		line := bytes.TrimSpace(raw)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var jt jsonTarget
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&jt); err != nil {
			return nil, p.errorf(n, jsonForm, "not a JSON target object (%s)", jsonMessage(err))
		}
		if _, err := parseURL(jt.URL); err != nil {
			return nil, p.errorf(n, jsonForm, "%s", tare.ErrorMessage(err))
		}
		req := Request{Name: jt.Name, Method: jt.Method, URL: jt.URL, Header: http.Header{}, Weight: 1, Line: n}
		if jt.Weight != nil {
			req.Weight = *jt.Weight
			if !(req.Weight > 0) || math.IsInf(req.Weight, 0) {
				return nil, p.errorf(n, jsonForm, "weight must be a positive number; got %v", req.Weight)
			}
		}
		for name, v := range jt.Header {
			var values []string
			var one string
			if json.Unmarshal(v, &values) != nil {
				if json.Unmarshal(v, &one) != nil {
					return nil, p.errorf(n, jsonForm, "header %q must be a string or a list of strings", name)
				}
				values = []string{one}
			}
			for _, value := range values {
				hn, hv, err := ParseHeader(name + ": " + value)
				if err != nil {
					return nil, p.errorf(n, jsonForm, "%s", tare.ErrorMessage(err))
				}
				req.Header.Add(hn, hv)
			}
		}
		switch {
		case jt.Body != nil && jt.BodyFile != "":
			return nil, p.errorf(n, jsonForm, "both body and body_file: give one")
		case jt.Body != nil:
			req.Body = []byte(*jt.Body)
		case jt.BodyFile != "":
			body, err := p.bodyFile(n, jsonForm, jt.BodyFile)
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		reqs = append(reqs, req)
	}
	return reqs, nil
}

// jsonMessage is a decoding error without the Go type names.
func jsonMessage(err error) string {
	if err == io.EOF {
		return "empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// bodyFile reads a body named in the file, relative to its directory.
func (p *targetsParser) bodyFile(line int, form, path string) ([]byte, error) {
	path = strings.TrimSpace(path)
	if path == "" {
		return nil, p.errorf(line, form, "a body file with no path, like @order.json")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	body, err := ReadBody("@" + path)
	if err != nil {
		return nil, p.errorf(line, form, "%s", tare.ErrorMessage(err))
	}
	if body == nil {
		body = []byte{}
	}
	return body, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// Mix sends each arrival one request of a targets file: the next by
// weight, drawn from the seed and the arrival's number alone (so the same
// seed gives the same sequence whatever order the workers take arrivals
// in), or the next in file order. It records which in Result.TargetIndex.
// It is safe for concurrent use.
type Mix struct {
	targets []*Target
	names   []string
	cum     []float64 // cumulative weights, normalised to end at 1
	inOrder bool
	seed    uint64
	file    string
}

var (
	_ tare.Target          = (*Mix)(nil)
	_ tare.ConnCounted     = (*Mix)(nil)
	_ tare.ProtocolCounted = (*Mix)(nil)
	_ tare.Noted           = (*Mix)(nil)
)

// NewMix builds a Target per request, each from base (timeout, redirects,
// TLS, connections; base's header goes with every request, the request's
// own header winning) with the request's method, URL, header and body. A
// request the Target refuses is an error naming its line. The requests
// share one pool of connections: those to one server take each other's
// idle ones, and base's MaxConns bounds each server's, not each request's.
func NewMix(file string, reqs []Request, base Config, inOrder bool, seed uint64) (*Mix, error) {
	m := &Mix{inOrder: inOrder, seed: seed, file: file}
	var total float64
	for _, r := range reqs {
		total += r.Weight
	}
	var sum float64
	for _, r := range reqs {
		cfg := base
		cfg.Method, cfg.URL, cfg.Body = r.Method, r.URL, r.Body
		cfg.Header = base.Header.Clone()
		if cfg.Header == nil {
			cfg.Header = http.Header{}
		}
		for name, values := range r.Header {
			cfg.Header[name] = values
		}
		var shared *Target
		if len(m.targets) > 0 {
			shared = m.targets[0]
		}
		t, err := newTargetOn(cfg, shared)
		if err != nil {
			m.Close()
			return nil, tare.Errorf(tare.EINVALID, "targets file %q, line %d: %s", file, r.Line, tare.ErrorMessage(err))
		}
		m.targets = append(m.targets, t)
		name := r.Name
		if name == "" {
			name = t.String()
		}
		m.names = append(m.names, name)
		sum += r.Weight
		m.cum = append(m.cum, sum/total)
	}
	return m, nil
}

// Names are the requests' names, by index: the file's, or method and URL.
func (m *Mix) Names() []string { return m.names }

// Pick is the index of the request arrival seq takes.
func (m *Mix) Pick(seq uint64) int {
	if m.inOrder {
		return int(seq % uint64(len(m.targets)))
	}
	u := float64(mix64(m.seed^mix64(seq))>>11) * 0x1p-53
	return min(sort.SearchFloat64s(m.cum, u+0x1p-60), len(m.targets)-1)
}

// mix64 is SplitMix64's finaliser: nearby inputs, unrelated outputs.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Do sends arrival res.Seq's request.
func (m *Mix) Do(ctx context.Context, res *tare.Result) {
	i := m.Pick(res.Seq)
	res.TargetIndex = i
	m.targets[i].Do(ctx, res)
}

// Close releases the requests' connections.
func (m *Mix) Close() {
	if len(m.targets) > 0 {
		m.targets[0].Close()
	}
}

// Conns counts the connections of every request of the file.
func (m *Mix) Conns() *tare.ConnCounter {
	if len(m.targets) == 0 {
		return new(tare.ConnCounter)
	}
	return m.targets[0].counter
}

// Protocols counts the connections of the file's HTTP/2 requests by what
// each spoke (Target.Protocols), every server's once; nil when none
// speaks HTTP/2.
func (m *Mix) Protocols() map[string]int {
	if len(m.targets) == 0 {
		return nil
	}
	return m.targets[0].h2s.protocols()
}

// ResetProtocols is Target.ResetProtocols, for every server's pool.
func (m *Mix) ResetProtocols() {
	if len(m.targets) > 0 {
		m.targets[0].h2s.resetProtocols()
	}
}

// Notes are Target.Notes, for every server's pool.
func (m *Mix) Notes() []string {
	if len(m.targets) == 0 {
		return nil
	}
	return m.targets[0].h2s.notes()
}

// Targets are the requests' targets, by index.
func (m *Mix) Targets() []*Target { return m.targets }

// String names the file and how many requests it mixes.
func (m *Mix) String() string {
	how := "by weight"
	if m.inOrder {
		how = "in order"
	}
	return fmt.Sprintf("targets %s (%d requests, %s)", m.file, len(m.targets), how)
}

// URL is request i's URL, secrets redacted.
func (m *Mix) URL(i int) string { return redactURL(m.targets[i].tmpl.URL) }
