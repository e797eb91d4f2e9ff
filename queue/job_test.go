package queue

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// TestWireGolden pins the wire format that docs/job-protocol.md documents
// and workers in other languages rely on.
func TestWireGolden(t *testing.T) {
	job := sampleJob("42")
	res := sampleResult("42", "host-1-abc")
	failed := sampleResult("43", "host-1-abc")
	failed.Status, failed.Error, failed.FirstToken, failed.TokensOut, failed.TokenSource = StatusError, "http 503", time.Time{}, 0, ""
	failed.Deliveries = 2
	var b strings.Builder
	b.WriteString("# job entry (XADD tare:<queue>:jobs * …)\n")
	b.WriteString(formatFields(job.fields()))
	b.WriteString("\n# result entry, ok (XADD tare:<queue>:results * …)\n")
	b.WriteString(formatFields(res.fields()))
	b.WriteString("\n# result entry, failed after a redelivery\n")
	b.WriteString(formatFields(failed.fields()))
	goldenfile.Check(t, "wire.golden.txt", []byte(b.String()))
}

func TestJobRoundTrip(t *testing.T) {
	for _, j := range []Job{
		sampleJob("1"),
		{ID: "x", RunID: "r", Enqueued: time.Unix(0, 1)},
		{ID: "2", RunID: "r", Enqueued: time.Unix(1<<33, 999999999), Prompt: "multi\nline \"quoted\" ✓", MaxTokens: 1 << 20},
	} {
		got, err := parseJob(j.fields())
		if err != nil || !sameJob(got, j) {
			t.Errorf("parseJob(fields(%+v)) = %+v, %v", j, got, err)
		}
	}
	r := sampleResult("1", "w")
	got, err := parseResult(r.fields())
	if err != nil || !sameResult(got, r) {
		t.Errorf("parseResult(fields(%+v)) = %+v, %v", r, got, err)
	}
}

func TestParseJob(t *testing.T) {
	good := sampleJob("1").fields()
	with := func(k, v string) map[string]string {
		f := maps.Clone(good)
		f[k] = v
		return f
	}
	without := func(k string) map[string]string {
		f := maps.Clone(good)
		delete(f, k)
		return f
	}
	tests := []struct {
		name    string
		fields  map[string]string
		wantErr string // a substring of the error; "" for none
	}{
		{name: "good", fields: good},
		{name: "extra field ignored", fields: with("priority", "high")},
		{name: "no max tokens", fields: without(fieldMaxTokens)},
		{name: "no prompt", fields: without(fieldPrompt)},
		{name: "no id", fields: without(fieldID), wantErr: `job field "id" = "": malformed queue entry: missing`},
		{name: "empty run", fields: with(fieldRun, ""), wantErr: `"run"`},
		{name: "no enqueue time", fields: without(fieldEnqueued), wantErr: `"enqueued"`},
		{name: "enqueue time 0", fields: with(fieldEnqueued, "0"), wantErr: `"enqueued" = "0"`},
		{name: "enqueue time in seconds", fields: with(fieldEnqueued, "1.7e9"), wantErr: `"enqueued" = "1.7e9": malformed queue entry: want unix nanoseconds`},
		{name: "negative enqueue time", fields: with(fieldEnqueued, "-5"), wantErr: `"-5"`},
		{name: "negative max tokens", fields: with(fieldMaxTokens, "-1"), wantErr: `"max_tokens" = "-1"`},
		{name: "max tokens not a number", fields: with(fieldMaxTokens, "lots"), wantErr: `"lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseJob(tt.fields)
			checkParseErr(t, err, tt.wantErr)
		})
	}
}

func TestParseResult(t *testing.T) {
	good := sampleResult("1", "w").fields()
	with := func(kv ...string) map[string]string {
		f := maps.Clone(good)
		for i := 0; i < len(kv); i += 2 {
			f[kv[i]] = kv[i+1]
		}
		return f
	}
	without := func(k string) map[string]string {
		f := maps.Clone(good)
		delete(f, k)
		return f
	}
	tests := []struct {
		name    string
		fields  map[string]string
		wantErr string
	}{
		{name: "good", fields: good},
		{name: "error", fields: with(fieldStatus, StatusError, fieldError, "timeout")},
		{name: "no first token", fields: without(fieldFirstToken)},
		{name: "first token 0", fields: with(fieldFirstToken, "0")},
		{name: "no deliveries means 1", fields: without(fieldDeliveries)},
		{name: "counted tokens", fields: with(fieldTokenSource, TokensCounted)},
		{name: "unknown token source", fields: without(fieldTokenSource)},
		{name: "no status", fields: without(fieldStatus), wantErr: `"status"`},
		{name: "bad status", fields: with(fieldStatus, "fine"), wantErr: `result field "status" = "fine": malformed queue entry: want "ok" or "error"`},
		{name: "error without kind", fields: with(fieldStatus, StatusError, fieldError, ""), wantErr: `want an error kind`},
		{name: "ok with a kind", fields: with(fieldError, "timeout"), wantErr: `want no error kind`},
		{name: "no start", fields: without(fieldStart), wantErr: `"start"`},
		{name: "done 0", fields: with(fieldDone, "0"), wantErr: `"done" = "0"`},
		{name: "bad token source", fields: with(fieldTokenSource, "guessed"), wantErr: `"guessed"`},
		{name: "deliveries 0", fields: with(fieldDeliveries, "0"), wantErr: `"deliveries" = "0"`},
		{name: "negative tokens", fields: with(fieldTokensOut, "-3"), wantErr: `"tokens_out" = "-3"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseResult(tt.fields)
			checkParseErr(t, err, tt.wantErr)
		})
	}
}

func checkParseErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == "":
	case err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case !errors.Is(err, ErrParse):
		t.Errorf("error %v does not wrap ErrParse", err)
	case !strings.Contains(err.Error(), want):
		t.Errorf("error %q, want it to contain %q", err, want)
	}
}

// FuzzParseJob checks that no entry makes the parser panic, that every
// error wraps ErrParse, and that what parses survives a round trip.
func FuzzParseJob(f *testing.F) {
	f.Add("1", "run", "1700000000123456789", "hello", "16")
	f.Add("", "", "", "", "")
	f.Add("x", "r", "0", "", "-1")
	f.Add("x", "r", "99999999999999999999", "", "1e3")
	f.Add("x", "r", "1", "\x00\xff", "0")
	f.Fuzz(func(t *testing.T, id, run, enqueued, prompt, maxTokens string) {
		fields := map[string]string{fieldID: id, fieldRun: run, fieldEnqueued: enqueued, fieldPrompt: prompt, fieldMaxTokens: maxTokens}
		j, err := parseJob(fields)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		again, err := parseJob(j.fields())
		if err != nil || !sameJob(again, j) {
			t.Fatalf("round trip of %+v = %+v, %v", j, again, err)
		}
	})
}

// FuzzParseResult does the same for result entries.
func FuzzParseResult(f *testing.F) {
	f.Add("1", "run", "w", "1700000000000000000", "0", "1700000001000000000", "3", "4", "usage", "ok", "", "1")
	f.Add("1", "run", "w", "1", "1", "1", "", "", "", "error", "http 503", "")
	f.Add("", "", "", "", "", "", "", "", "", "", "", "")
	f.Add("1", "r", "w", "-1", "x", "1", "-1", "z", "guess", "meh", "kind", "0")
	f.Fuzz(func(t *testing.T, id, run, worker, start, first, done, in, out, source, status, kind, deliveries string) {
		fields := map[string]string{
			fieldID: id, fieldRun: run, fieldWorker: worker, fieldStart: start, fieldFirstToken: first,
			fieldDone: done, fieldTokensIn: in, fieldTokensOut: out, fieldTokenSource: source,
			fieldStatus: status, fieldError: kind, fieldDeliveries: deliveries,
		}
		r, err := parseResult(fields)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		again, err := parseResult(r.fields())
		if err != nil || !sameResult(again, r) {
			t.Fatalf("round trip of %+v = %+v, %v", r, again, err)
		}
	})
}

func TestValidateName(t *testing.T) {
	for _, q := range []string{"q", "tare", "load-test_1.v2", strings.Repeat("a", 64)} {
		if err := ValidateName(q); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", q, err)
		}
	}
	for _, q := range []string{"", "a:b", "a*", "a b", "ä", strings.Repeat("a", 65)} {
		if err := ValidateName(q); err == nil || !strings.Contains(err.Error(), "want 1 to 64 letters") {
			t.Errorf("ValidateName(%q) = %v, want an error saying what is accepted", q, err)
		}
	}
}

// formatFields prints fields one per line, sorted, for golden files and
// messages.
func formatFields(f map[string]string) string {
	var b strings.Builder
	args := fieldArgs(f)
	for i := 0; i < len(args); i += 2 {
		fmt.Fprintf(&b, "%s %q\n", args[i], args[i+1])
	}
	return b.String()
}
