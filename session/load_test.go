package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/records"
	"github.com/tare-dev/tare/store"
)

// storeWith is a SQLite store in a temp dir holding finished runs of
// these ids, each with one record and one tick, except the ids in
// noTicks, which have no tick.
func storeWith(t *testing.T, ids []string, noTicks ...string) tare.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	for i, id := range ids {
		run := tare.Run{ID: id, Label: "load", Target: "http://127.0.0.1/", StartedAt: start.Add(time.Duration(i) * time.Minute)}
		if err := st.CreateRun(ctx, run, tare.Env{Hostname: "host"}); err != nil {
			t.Fatal(err)
		}
		at := run.StartedAt.Add(100 * time.Millisecond)
		if err := st.AppendResults(ctx, id, []tare.Result{{Scheduled: at, Sent: at, Done: at.Add(5 * time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(noTicks, " "), id) {
			tick := tare.Tick{Start: run.StartedAt, End: run.StartedAt.Add(time.Second), Arrivals: 1, Completions: 1}
			if err := st.AppendTicks(ctx, id, []tare.Tick{tick}); err != nil {
				t.Fatal(err)
			}
		}
		s := tare.Summary{Schema: tare.SummarySchema, Run: run, Requests: tare.Requests{Total: 1, OK: 1}}
		s.Run.Status, s.Run.EndedAt = tare.StatusComplete, run.StartedAt.Add(time.Second)
		if err := st.FinishRun(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestResolve(t *testing.T) {
	st := storeWith(t, []string{"0193a1", "0193a2", "0194b1", "g.shard-1-of-2", "g.shard-2-of-2"})
	tests := []struct {
		name, arg, want string
		wantCode        string
		wantMsg         string
	}{
		{name: "whole id", arg: "0193a1", want: "0193a1"},
		{name: "unique prefix", arg: "0194", want: "0194b1"},
		{name: "sharded run", arg: "g", want: "g"},
		{name: "one shard's row", arg: "g.shard-2-of-2", want: "g.shard-2-of-2"},
		{name: "ambiguous", arg: "0193", wantCode: tare.EINVALID, wantMsg: `run id "0193" is ambiguous: 2 runs start with it; give more of it`},
		{name: "not found", arg: "ffff", wantCode: tare.ENOTFOUND, wantMsg: `no stored run "ffff" (tare runs list shows them)`},
		{name: "empty", arg: "", wantCode: tare.EINVALID, wantMsg: "give a run id (tare runs list shows them)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(context.Background(), st, tt.arg)
			if tt.wantCode != "" {
				if tare.ErrorCode(err) != tt.wantCode || tare.ErrorMessage(err) != tt.wantMsg {
					t.Fatalf("Resolve(%q) = %q, %v; want %s %q", tt.arg, got, err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.arg, got, err, tt.want)
			}
		})
	}
}

// TestLoad: a prefix loads its run; a sharded run's id loads the shards
// merged, and its records stream from every shard.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	st := storeWith(t, []string{"0193a1", "g.shard-1-of-2", "g.shard-2-of-2"}, "0193a1")
	s, ticks, err := Load(ctx, st, "0193")
	if err != nil || s.Run.ID != "0193a1" || ticks != nil {
		t.Fatalf("Load(0193): run %q, %d ticks, %v", s.Run.ID, len(ticks), err)
	}
	s, _, err = Load(ctx, st, "g")
	if err != nil || s.Run.ID != "g" || s.Requests.Total != 2 || len(s.Shards) != 2 {
		t.Fatalf("Load(g): run %q, %d requests, %d shards, %v", s.Run.ID, s.Requests.Total, len(s.Shards), err)
	}
	var n int
	if err := StreamResults(ctx, st, "g", func(*tare.Result) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("StreamResults(g): %d records, %v", n, err)
	}
	if _, _, err := Load(ctx, st, "nope"); tare.ErrorCode(err) != tare.ENOTFOUND {
		t.Errorf("Load(nope): %v, want ENOTFOUND", err)
	}
}

// TestLoadInput: a stored run without ticks still has a timeline (empty,
// not nil), so a comparison tests it rather than naming it as a file.
func TestLoadInput(t *testing.T) {
	ctx := context.Background()
	st := storeWith(t, []string{"with", "without"}, "without")
	for _, id := range []string{"with", "without"} {
		in, err := LoadInput(ctx, st, id)
		if err != nil || in.Ticks == nil || in.Source != "store" {
			t.Errorf("LoadInput(%s): ticks %v, source %q, %v", id, in.Ticks, in.Source, err)
		}
	}
	if _, ticks, err := LoadRun(ctx, st, "without"); err != nil || ticks != nil {
		t.Errorf("LoadRun(without): ticks %v, %v; want them as stored (nil)", ticks, err)
	}
}

// TestImportRecords: raw JSONL records are stored as a new run,
// summarised again; a file of neither kind is refused by name.
func TestImportRecords(t *testing.T) {
	ctx := context.Background()
	st := storeWith(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	var b strings.Builder
	exp, err := records.NewExporter(&b, records.FormatJSONL, time.Time{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := StreamResults(ctx, storeWith(t, []string{"src"}), "src", exp.Write); err != nil {
		t.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := ImportRecords(ctx, st, path, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := Load(ctx, st, id)
	if err != nil || s.Requests.Total != 1 || s.Run.Label != "run.jsonl" || s.Run.Version != "test" {
		t.Fatalf("imported run: %d requests, label %q, version %q, %v", s.Requests.Total, s.Run.Label, s.Run.Version, err)
	}

	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(bad); tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("ReadSummary(bad): %v, want EINVALID", err)
	}
	_, _, err = Records{Path: bad, Command: "import"}.Summarise(nil, nil)
	if tare.ErrorCode(err) != tare.EINVALID || !strings.Contains(err.Error(), "import "+bad+": neither a tare.summary/v1 JSON") {
		t.Errorf("Summarise(bad): %v", err)
	}
}
