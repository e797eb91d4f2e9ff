package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// modelsTimeout bounds the look at /v1/models before a run.
const modelsTimeout = 10 * time.Second

// Models asks the endpoint's /models (beside …/chat/completions) which
// models it serves, and returns their ids in the server's order. An
// answer other than 200 with OpenAI's list is an error naming the URL.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	u := *c.endpoint
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/chat/completions") + "/models"
	u.RawPath = ""
	ctx, cancel := context.WithTimeout(ctx, min(c.timeout, modelsTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("list models at %s: %w", u.Redacted(), err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for k, v := range c.secret.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list models at %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("list models at %s: read: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list models at %s: status %d: %.200s", u.Redacted(), resp.StatusCode, c.redact(strings.TrimSpace(string(body))))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("list models at %s: %w", u.Redacted(), err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// redact removes every credential from s.
func (c *Client) redact(s string) string {
	m := measure{secret: c.secret}
	return m.redact(s)
}

// ChooseModel names the model of every request when the Config named
// none, asking the server's /models: the one model it lists is used, and
// a note says so; several are an EINVALID error listing them, since the
// run cannot guess which was meant (Ollama refuses a request without a
// model: "model is required"). A server that does not list its models
// leaves the requests without one, noted. Call it before the first
// request: it is not safe beside concurrent ones.
func (c *Client) ChooseModel(ctx context.Context) error {
	if c.model != "" {
		return nil
	}
	ids, err := c.Models(ctx)
	switch {
	case err != nil:
		c.notes = append(c.notes, fmt.Sprintf("no model named, and the server did not list its models (%v): requests name no model", err))
		return nil
	case len(ids) == 0:
		c.notes = append(c.notes, "no model named, and the server lists none: requests name no model")
		return nil
	case len(ids) > 1:
		return tare.Errorf(tare.EINVALID, "the server serves %d models: name one of %s", len(ids), strings.Join(ids, ", "))
	}
	c.model = ids[0]
	c.body = c.requestBody(Request{})
	c.notes = append(c.notes, fmt.Sprintf("no model named: the server lists one, %s, which every request named", ids[0]))
	return nil
}

// Notes says how the model was chosen, when the Client chose it.
func (c *Client) Notes() []string { return c.notes }
