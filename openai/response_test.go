package openai

import (
	"context"
	"strings"
	"testing"
)

// kinds are the Err kinds reading a body can produce.
var kinds = map[string]bool{"": true, KindStreamError: true, KindStreamCut: true, KindBadResponse: true}

func FuzzReadStream(f *testing.F) {
	for _, s := range []string{
		role + tokenA + tokenB + finish + usage7 + done,
		": keep-alive\n\n" + tokenA + "data: [DONE]\n",
		"event: error\ndata: {\"error\":\"x\"}\n\n",
		`data: {"choices":[{"delta":{"reasoning_content":"r"}}],"usage":{"completion_tokens":null}}` + "\n\n",
		`data: {"object":"error","message":"m"}` + "\n\n",
		tokenA + "data: {\"cho",
		jsonReply,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, streamed := range []bool{true, false} {
			m := measure{ctx: context.Background(), callCtx: context.Background(), secret: &secret{values: []string{"k"}}}
			if streamed {
				m.readStream(strings.NewReader(body))
			} else {
				m.readBody(strings.NewReader(body))
			}
			r := m.r
			if !kinds[r.Err] {
				t.Fatalf("unexpected kind %q (%s)", r.Err, r.Detail)
			}
			if r.Done.IsZero() {
				t.Fatalf("no Done time, Err %q", r.Err)
			}
			if r.Chunks < 0 || (streamed && len(r.ITL) != max(r.Chunks-1, 0)) {
				t.Fatalf("%d chunks with %d ITLs", r.Chunks, len(r.ITL))
			}
			if streamed && r.Err == "" && r.TokenSource == "" {
				t.Fatalf("finished stream without a token source")
			}
			if strings.Contains(r.Detail, "k") && strings.Contains(body, "k") && !strings.Contains(r.Detail, "[redacted]") {
				t.Fatalf("credential %q shown in %q", "k", r.Detail)
			}
		}
	})
}
