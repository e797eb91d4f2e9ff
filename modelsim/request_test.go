package modelsim

import (
	"errors"
	"testing"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    request
		wantErr string // substring of the error; "" when none
	}{
		{
			name: "minimal",
			body: `{"messages":[{"role":"user","content":"why is my p99 so high"}]}`,
			want: request{PromptTokens: 6},
		},
		{
			name: "streaming with usage",
			body: `{"model":"tare-sim","messages":[{"role":"system","content":"be brief"},{"role":"user","content":" two  words "}],"max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`,
			want: request{Model: "tare-sim", PromptTokens: 4, MaxTokens: 16, maxParam: "max_tokens", Stream: true, IncludeUsage: true},
		},
		{
			name: "max_completion_tokens wins",
			body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":99,"max_completion_tokens":3}`,
			want: request{PromptTokens: 1, MaxTokens: 3, maxParam: "max_completion_tokens"},
		},
		{
			name: "content parts",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"one two"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"three"}]}]}`,
			want: request{PromptTokens: 3},
		},
		{
			name: "null and empty content count as one token",
			body: `{"messages":[{"role":"assistant","content":null},{"role":"user","content":""}]}`,
			want: request{PromptTokens: 1},
		},
		{
			name: "unknown fields ignored",
			body: `{"messages":[{"role":"user","content":"a b"}],"temperature":0.2,"tools":[]}`,
			want: request{PromptTokens: 2},
		},
		{name: "not json", body: `{"messages":`, wantErr: "not valid JSON"},
		{name: "array body", body: `[1,2]`, wantErr: "expected a JSON object, but got an array instead"},
		{name: "trailing data", body: `{"messages":[{"role":"user","content":"a"}]} {}`, wantErr: "not valid JSON"},
		{name: "no messages", body: `{"model":"tare-sim"}`, wantErr: "Missing required parameter: 'messages'."},
		{name: "empty messages", body: `{"messages":[]}`, wantErr: "Invalid 'messages': empty array"},
		{name: "messages a string", body: `{"messages":"hi"}`, wantErr: "Invalid type for 'messages': expected an array of objects, but got a string instead."},
		{name: "message a string", body: `{"messages":["hi"]}`, wantErr: "Invalid type for 'messages[0]': expected an object, but got a string instead."},
		{name: "no role", body: `{"messages":[{"content":"a"}]}`, wantErr: "Missing required parameter: 'messages[0].role'."},
		{name: "model a number", body: `{"model":7,"messages":[{"role":"user","content":"a"}]}`, wantErr: "Invalid type for 'model': expected a string, but got an integer instead."},
		{name: "zero max_tokens", body: `{"messages":[{"role":"user","content":"a"}],"max_tokens":0}`, wantErr: "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."},
		{name: "negative max_completion_tokens", body: `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":-2}`, wantErr: "'max_completion_tokens'"},
		{name: "max_tokens a string", body: `{"messages":[{"role":"user","content":"a"}],"max_tokens":"16"}`, wantErr: "Invalid type for 'max_tokens': expected an integer, but got a string instead."},
		{name: "max_tokens a decimal", body: `{"messages":[{"role":"user","content":"a"}],"max_tokens":1.5}`, wantErr: "expected an integer, but got a decimal instead"},
		{name: "stream a string", body: `{"messages":[{"role":"user","content":"a"}],"stream":"yes"}`, wantErr: "Invalid type for 'stream': expected a boolean, but got a string instead."},
		{name: "several choices", body: `{"messages":[{"role":"user","content":"a"}],"n":2}`, wantErr: "Invalid 'n'"},
		{name: "stream options without stream", body: `{"messages":[{"role":"user","content":"a"}],"stream_options":{"include_usage":true}}`, wantErr: "'stream_options' parameter is only allowed when 'stream' is enabled"},
		{name: "numeric content", body: `{"messages":[{"role":"user","content":42}]}`, wantErr: "Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an integer instead."},
		{name: "bad parts", body: `{"messages":[{"role":"user","content":[1]}]}`, wantErr: "Invalid type for 'messages[0].content[0]': expected an object, but got an integer instead."},
		{name: "text part not a string", body: `{"messages":[{"role":"user","content":[{"type":"text","text":true}]}]}`, wantErr: "Invalid type for 'messages[0].content[0].text': expected a string, but got a boolean instead."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("parseRequest = %+v, want an error containing %q", got, tt.wantErr)
				}
				if !errors.Is(err, ErrRequest) {
					t.Errorf("error %q does not wrap ErrRequest", err)
				}
				if !contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRequest: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseRequest = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hello there"}],"max_tokens":4,"stream":true}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a b c"}]}],"stream":true,"stream_options":{"include_usage":false}}`,
		`{"messages":[]}`,
		`{"messages":[{"content":null}],"max_completion_tokens":1,"n":1}`,
		`{`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseRequest(body)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error %q does not wrap ErrRequest", err)
			}
			return
		}
		if req.PromptTokens < 1 || req.MaxTokens < 0 {
			t.Fatalf("parseRequest accepted %q as %+v", body, req)
		}
		if req.IncludeUsage && !req.Stream {
			t.Fatalf("usage without stream accepted from %q", body)
		}
	})
}
