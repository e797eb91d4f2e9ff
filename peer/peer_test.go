package peer

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/tare-dev/tare"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func readAll(t *testing.T, format, input string, opt Options) ([]tare.Result, *Reader, error) {
	t.Helper()
	f, err := Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(strings.NewReader(input), f, opt)
	if err != nil {
		t.Fatal(err)
	}
	var out []tare.Result
	for {
		var res tare.Result
		err := r.Read(&res)
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, res)
	}
}

func vegetaResults() []vegeta.Result {
	return []vegeta.Result{
		{Seq: 0, Code: 200, Timestamp: t0, Latency: 12 * time.Millisecond, BytesIn: 10, BytesOut: 2, Method: "GET", URL: "http://127.0.0.1/"},
		{Seq: 1, Code: 503, Timestamp: t0.Add(10 * time.Millisecond), Latency: 3 * time.Millisecond, Error: "503 Service Unavailable"},
		{Seq: 2, Code: 0, Timestamp: t0.Add(20 * time.Millisecond), Latency: 30 * time.Second, Error: `Get "http://127.0.0.1/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`},
		{Seq: 3, Code: 0, Timestamp: t0.Add(30 * time.Millisecond), Latency: time.Millisecond, Error: `Get "http://127.0.0.1:1/": dial tcp 127.0.0.1:1: connect: connection refused`},
	}
}

func encodeVegeta(t testing.TB, json bool, rs []vegeta.Result) string {
	t.Helper()
	var buf bytes.Buffer
	enc := vegeta.NewEncoder(&buf)
	if json {
		enc = vegeta.NewJSONEncoder(&buf)
	}
	for i := range rs {
		if err := enc.Encode(&rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

func TestVegeta(t *testing.T) {
	for _, format := range []string{"vegeta", "vegeta-json"} {
		t.Run(format, func(t *testing.T) {
			got, r, err := readAll(t, format, encodeVegeta(t, format == "vegeta-json", vegetaResults()), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 || r.Count() != 4 {
				t.Fatalf("read %d results, want 4", len(got))
			}
			check := func(i int, lat time.Duration, status int, kind string) {
				t.Helper()
				g := got[i]
				if g.Seq != uint64(i) || g.Latency() != lat || g.Status != status || g.Err != kind || !g.Sent.Equal(g.Scheduled) {
					t.Errorf("result %d = seq %d latency %s status %d err %q, want latency %s status %d err %q", i, g.Seq, g.Latency(), g.Status, g.Err, lat, status, kind)
				}
			}
			check(0, 12*time.Millisecond, 200, "")
			check(1, 3*time.Millisecond, 503, "http 503")
			check(2, 30*time.Second, 0, tare.KindTimeout)
			check(3, time.Millisecond, 0, tare.KindRefused)
			if got[0].BytesIn != 10 || got[0].BytesOut != 2 || !got[0].Scheduled.Equal(t0) {
				t.Errorf("result 0 = %+v", got[0])
			}
			if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "actual send") || strings.Contains(ws[0], "coordinated omission") {
				t.Errorf("warnings = %q, want the open-loop note without a stall", ws)
			}
		})
	}
}

func TestHeyCSV(t *testing.T) {
	in := heyHeader + `
0.0123,0.0010,0.0002,0.0001,0.0100,0.0012,200,0.0005
0.0040,0.0000,0.0000,0.0001,0.0030,0.0009,500,0.0130

`
	got, r, err := readAll(t, "hey-csv", in, Options{Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d results, want 2", len(got))
	}
	if g := got[0]; g.Latency() != 12300*time.Microsecond || !g.Scheduled.Equal(t0.Add(500*time.Microsecond)) || g.Status != 200 || g.Err != "" ||
		g.FirstByte != g.Done.Add(-1200*time.Microsecond) {
		t.Errorf("result 0 = %+v", g)
	}
	if g := got[1]; g.Err != "http 500" || g.Seq != 1 {
		t.Errorf("result 1 = %+v", g)
	}
	ws := r.Warnings()
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "coordinated omission: hey is a closed loop") || !strings.Contains(ws[1], "leaves out") {
		t.Errorf("warnings = %q", ws)
	}
	f, _ := Lookup("hey-csv")
	if _, err := NewReader(strings.NewReader(in), f, Options{}); err == nil {
		t.Error("hey-csv without Options.Start: no error")
	}
}

func TestJSONL(t *testing.T) {
	in := `{"timestamp": "2026-01-02T15:04:05.5Z", "latency_ms": 12.5, "status": 200, "extra": 1}
{"timestamp": 1767366245.75, "latency_ms": 3000, "status": 0, "error": "timeout"}
{"timestamp": 1767366246, "latency_ms": 1, "status": 0}
{"timestamp": 1767366246, "latency_ms": 1, "status": 0, "error": "boom"}
`
	got, r, err := readAll(t, "jsonl", in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		at   time.Time
		lat  time.Duration
		kind string
	}{
		{t0.Add(500 * time.Millisecond), 12500 * time.Microsecond, ""},
		{t0.Add(750 * time.Millisecond), 3 * time.Second, "timeout"},
		{t0.Add(time.Second), time.Millisecond, ""},
		{t0.Add(time.Second), time.Millisecond, "other"},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; !g.Scheduled.Equal(w.at) || g.Latency() != w.lat || g.Err != w.kind {
			t.Errorf("line %d = at %s latency %s err %q, want %s %s %q", i+1, g.Scheduled, g.Latency(), g.Err, w.at, w.lat, w.kind)
		}
	}
	if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "cannot tell") {
		t.Errorf("warnings = %q", ws)
	}
}

func TestParseErrors(t *testing.T) {
	gob := encodeVegeta(t, false, vegetaResults())
	for _, tc := range []struct {
		name, format, in string
		want             []string // in the message
	}{
		{"jsonl not json", "jsonl", "{\"timestamp\": 1, \"latency_ms\": 1, \"status\": 200}\nnope\n", []string{"line 2", `"nope"`, "not a JSON object"}},
		{"jsonl no latency", "jsonl", `{"timestamp": 1767366246, "status": 200}`, []string{"line 1", "no latency_ms"}},
		{"jsonl no status", "jsonl", `{"timestamp": 1767366246, "latency_ms": 2}`, []string{"line 1", "no status"}},
		{"jsonl bad timestamp", "jsonl", `{"timestamp": "yesterday", "latency_ms": 2, "status": 200}`, []string{"line 1", `timestamp "yesterday"`}},
		{"jsonl negative", "jsonl", `{"timestamp": 1767366246, "latency_ms": -2, "status": 200}`, []string{"latency_ms -2"}},
		{"jsonl status", "jsonl", `{"timestamp": 1767366246, "latency_ms": 2, "status": 2000}`, []string{"status 2000"}},
		{"hey header", "hey-csv", "a,b\n", []string{"line 1", `"a,b"`, "header"}},
		{"hey empty", "hey-csv", "", []string{"line 1", "no header"}},
		{"hey fields", "hey-csv", heyHeader + "\n0.1,0.1\n", []string{"line 2", "2 fields"}},
		{"hey latency", "hey-csv", heyHeader + "\nx,0,0,0,0,0,200,0.1\n", []string{"line 2", `response-time "x"`}},
		{"hey status", "hey-csv", heyHeader + "\n0.1,0,0,0,0,0,ok,0.1\n", []string{"line 2", `status-code "ok"`}},
		{"vegeta-json", "vegeta-json", `{"code": 200, "timestamp": "2026-01-02T15:04:05Z", "latency": 5}` + "\n{\"code\": \"x\"}\n", []string{"line 2", `"{\"code\": \"x\"}"`}},
		{"vegeta-json no timestamp", "vegeta-json", `{"code": 200, "latency": 5}`, []string{"line 1", "no timestamp"}},
		{"vegeta truncated", "vegeta", gob[:len(gob)-3], []string{"record 4", "ends inside a record"}},
		{"vegeta not gob", "vegeta", "hello, this is text\n", []string{"record 1"}},
		{"vegeta huge", "vegeta", "\xfc\x7f\xff\xff\xff", []string{"record 1", "gob message of"}},
		{"vegeta json given", "vegeta", encodeVegeta(t, true, vegetaResults()), []string{"record 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readAll(t, tc.format, tc.in, Options{Start: t0})
			if !errors.Is(err, ErrParse) {
				t.Fatalf("err = %v, want ErrParse", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %s", err, w)
				}
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	for _, f := range []string{"vegeta", "vegeta-json", "jsonl"} {
		got, _, err := readAll(t, f, "", Options{})
		if err != nil || len(got) != 0 {
			t.Errorf("%s: empty file = %d results, %v; want none, no error", f, len(got), err)
		}
	}
	if got, _, err := readAll(t, "hey-csv", heyHeader+"\n", Options{Start: t0}); err != nil || len(got) != 0 {
		t.Errorf("hey-csv header only = %d results, %v", len(got), err)
	}
}

// TestStreams: a result is returned as soon as its record has arrived, the
// rest of the file still unwritten.
func TestStreams(t *testing.T) {
	rs := vegetaResults()
	for _, tc := range []struct {
		format, first string
	}{
		{"vegeta", encodeVegeta(t, false, rs[:1])},
		{"vegeta-json", encodeVegeta(t, true, rs[:1])},
		{"hey-csv", heyHeader + "\n0.0123,0.0010,0.0002,0.0001,0.0100,0.0012,200,0.0005\n"},
		{"jsonl", `{"timestamp": 1767366246, "latency_ms": 2, "status": 200}` + "\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			pr, pw := io.Pipe()
			go pw.Write([]byte(tc.first))
			f, _ := Lookup(tc.format)
			r, err := NewReader(pr, f, Options{Start: t0})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				var res tare.Result
				done <- r.Read(&res)
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Read waited for more than the first record")
			}
			pw.Close()
		})
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec("vegeta:/tmp/a:b.bin")
	if err != nil || s.Format.Name != "vegeta" || s.Path != "/tmp/a:b.bin" {
		t.Errorf("ParseSpec = %+v, %v", s, err)
	}
	for _, bad := range []string{"vegeta", "vegeta:", "wrk:out.txt", ":x"} {
		_, err := ParseSpec(bad)
		var te *tare.Error
		if !errors.As(err, &te) || te.Code != tare.EINVALID || !strings.Contains(err.Error(), "hey-csv") {
			t.Errorf("ParseSpec(%q) = %v, want EINVALID listing the formats", bad, err)
		}
	}
}

func TestStall(t *testing.T) {
	// A closed loop of 2 workers, 10 ms per request, whose server stalls
	// 1 s at 500 ms: both workers wait, nothing is sent.
	var sf stallFinder
	at := t0
	for i := 0; i < 200; i++ {
		lat := 10 * time.Millisecond
		if at.Sub(t0) >= 500*time.Millisecond && at.Sub(t0) < 510*time.Millisecond {
			lat = time.Second
		}
		sf.add(at, at.Add(lat))
		sf.add(at, at.Add(lat))
		at = at.Add(lat)
	}
	st := sf.longest()
	if !st.Significant || st.Length < 980*time.Millisecond || st.Length > time.Second || st.InFlight != 2 {
		t.Errorf("stall = %+v, want about 1 s with 2 in flight", st)
	}
	// An open loop with workers to spare: sends every 10 ms through the
	// stall, none of them held back.
	var open stallFinder
	for i := 0; i < 300; i++ {
		s := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		lat := 5 * time.Millisecond
		if i >= 50 && i < 150 {
			lat = time.Duration(150-i) * 10 * time.Millisecond
		}
		open.add(s, s.Add(lat))
	}
	if st := open.longest(); st.Significant {
		t.Errorf("open loop stall = %+v, want none", st)
	}
	// A pause with nothing in flight is not a stall.
	var idle stallFinder
	idle.add(t0, t0.Add(time.Millisecond))
	idle.add(t0.Add(5*time.Second), t0.Add(5*time.Second+time.Millisecond))
	if st := idle.longest(); st.Length != 0 {
		t.Errorf("idle pause = %+v, want none", st)
	}
}
