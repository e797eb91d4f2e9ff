package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// TestChooseModel: without a model named, the one model a server lists is
// used and said; several are a usage error that lists them; a server
// that lists none leaves the requests without one, said (issue 44: Ollama
// refused every request "model is required").
func TestChooseModel(t *testing.T) {
	list := func(body string, status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/models" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		})
	}
	tests := []struct {
		name      string
		server    http.Handler
		named     string
		wantModel string
		wantErr   string
		wantNote  string
	}{
		{name: "one model", server: list(`{"object":"list","data":[{"id":"tiny:latest","object":"model"}]}`, 200),
			wantModel: "tiny:latest", wantNote: "the server lists one, tiny:latest"},
		{name: "several", server: list(`{"object":"list","data":[{"id":"a"},{"id":"b"}]}`, 200),
			wantErr: "the server serves 2 models: name one of a, b"},
		{name: "no list", server: list("404 page not found", 404),
			wantNote: "did not list its models"},
		{name: "named", server: list(`{"data":[{"id":"a"},{"id":"b"}]}`, 200), named: "b", wantModel: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(tt.server)
			t.Cleanup(ts.Close)
			c := newClient(t, Config{URL: ts.URL + "/v1", Model: tt.named})
			err := c.ChooseModel(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("ChooseModel = %v, want an EINVALID error holding %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ChooseModel: %v", err)
			}
			if c.model != tt.wantModel {
				t.Errorf("model %q, want %q", c.model, tt.wantModel)
			}
			if notes := strings.Join(c.Notes(), "\n"); !strings.Contains(notes, tt.wantNote) || (tt.wantNote == "") != (notes == "") {
				t.Errorf("notes %q, want %q", notes, tt.wantNote)
			}
		})
	}
}

// TestChosenModelIsSent: the model chosen is the one every request names.
func TestChosenModelIsSent(t *testing.T) {
	sim := testservice.Model(t, modelsim.Config{Model: "tiny:latest", MeanTokens: 2, Seed: 1})
	simURL, err := url.Parse(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(simURL)
	// In front of the simulator, a server that refuses a request without
	// the model it serves, as Ollama does.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			var b strings.Builder
			_, _ = io.Copy(&b, r.Body)
			if !strings.Contains(b.String(), `"model":"tiny:latest"`) {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":{"message":"model is required","type":"api_error"}}`))
				return
			}
			r.Body = io.NopCloser(strings.NewReader(b.String()))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := newClient(t, Config{URL: ts.URL + "/v1"})
	if r := c.Call(context.Background(), Request{}); r.Err != "http 400" || !strings.Contains(r.Detail, "model is required") {
		t.Fatalf("before choosing: Err %q (%s), want http 400 with the server's words", r.Err, r.Detail)
	}
	if err := c.ChooseModel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := c.Call(context.Background(), Request{}); r.Err != "" {
		t.Errorf("after choosing: Err %q (%s)", r.Err, r.Detail)
	}
}
