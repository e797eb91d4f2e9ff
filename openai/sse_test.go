package openai

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// scanAll reads every event of input.
func scanAll(r io.Reader) ([]event, error) {
	sc := newSSEScanner(r)
	var evs []event
	for sc.Next() {
		evs = append(evs, sc.Event())
	}
	return evs, sc.Err()
}

func TestSSEScanner(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		input   string
		reader  func(io.Reader) io.Reader // wraps the input; nil for none
		want    []event
		wantErr error // nil, ErrSSE or the reader's error
	}{
		{
			name:  "two events",
			input: "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			want:  []event{{Data: `{"a":1}`}, {Data: "[DONE]"}},
		},
		{
			name:  "no space after the colon, and only one space dropped",
			input: "data:x\n\ndata:  y\n\n",
			want:  []event{{Data: "x"}, {Data: " y"}},
		},
		{
			name:  "multi-line data",
			input: "data: {\"a\":\ndata: 1}\n\n",
			want:  []event{{Data: "{\"a\":\n1}"}},
		},
		{
			name:  "comments ignored",
			input: ": keep-alive\n\n:\ndata: x\n: between\n\n",
			want:  []event{{Data: "x"}},
		},
		{
			name:  "CRLF line endings",
			input: "data: x\r\n\r\ndata: y\r\n\r\n",
			want:  []event{{Data: "x"}, {Data: "y"}},
		},
		{
			name:  "event names, reset after each event",
			input: "event: error\ndata: {}\n\ndata: z\n\n",
			want:  []event{{Name: "error", Data: "{}"}, {Data: "z"}},
		},
		{
			name:  "blank lines and an event without data dispatch nothing",
			input: "\n\n\nevent: ping\n\ndata: x\n\n\n",
			want:  []event{{Data: "x"}},
		},
		{
			name:  "bare data field is an empty event",
			input: "data\n\ndata:\n\n",
			want:  []event{{Data: ""}, {Data: ""}},
		},
		{
			name:  "id, retry and unknown fields ignored",
			input: "id: 7\nretry: 100\nfoo: bar\ndata: x\n\n",
			want:  []event{{Data: "x"}},
		},
		{
			name:  "byte order mark",
			input: "\ufeffdata: x\n\n",
			want:  []event{{Data: "x"}},
		},
		{
			name:  "last event without a blank line",
			input: "data: a\n\ndata: [DONE]\n",
			want:  []event{{Data: "a"}, {Data: "[DONE]"}},
		},
		{
			name:    "cut inside a line",
			input:   "data: a\n\ndata: {\"cho",
			want:    []event{{Data: "a"}},
			wantErr: ErrSSE,
		},
		{
			name:    "line too long",
			input:   "data: " + strings.Repeat("x", maxLine+1) + "\n\n",
			wantErr: ErrSSE,
		},
		{
			name:  "long line under the limit",
			input: "data: " + strings.Repeat("x", 100_000) + "\n\n",
			want:  []event{{Data: strings.Repeat("x", 100_000)}},
		},
		{
			name:   "one byte at a time",
			input:  "data: a\r\n\r\n: c\n\ndata: b\n\n",
			reader: iotest.OneByteReader,
			want:   []event{{Data: "a"}, {Data: "b"}},
		},
		{
			name:  "read error mid-event drops the event",
			input: "data: a\n\ndata: b\n",
			reader: func(r io.Reader) io.Reader {
				return io.MultiReader(r, iotest.ErrReader(errBoom))
			},
			want:    []event{{Data: "a"}},
			wantErr: errBoom,
		},
		{name: "empty stream", input: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.input)
			if tt.reader != nil {
				r = tt.reader(r)
			}
			got, err := scanAll(r)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("error %v, want nil", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want one wrapping %v", err, tt.wantErr)
			}
		})
	}
}

// encodeSSE writes events back as a stream.
func encodeSSE(evs []event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Name != "" {
			b.WriteString("event: " + ev.Name + "\n")
		}
		for _, line := range strings.Split(ev.Data, "\n") {
			b.WriteString("data: " + line + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func FuzzSSEScanner(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		": keep-alive\r\n\r\nevent: error\r\ndata: {\"error\":{\"message\":\"x\"}}\r\n\r\n",
		"data:a\ndata:b\n\ndata\n\n",
		"\ufeffdata: x\n",
		"data: cut",
		"id: 1\nretry: 2\n\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		evs, err := scanAll(strings.NewReader(input))
		if err != nil && !errors.Is(err, ErrSSE) {
			t.Fatalf("error %v from a string reader does not wrap ErrSSE", err)
		}
		// What was parsed survives a round trip through the encoder.
		again, err := scanAll(strings.NewReader(encodeSSE(evs)))
		if err != nil {
			t.Fatalf("re-encoded events do not parse: %v", err)
		}
		if len(evs) != len(again) || (len(evs) > 0 && !reflect.DeepEqual(evs, again)) {
			t.Fatalf("round trip changed the events:\n%q\n%q", evs, again)
		}
	})
}
