package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

func TestShardFlags(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name                   string
		f                      ShardSpec
		label                  string
		shards                 int // --shards
		wantRow, wantErrSubstr string
	}{
		{name: "unsharded", f: ShardSpec{}, wantRow: ""},
		{name: "explicit id", f: ShardSpec{Shard: "2/4", RunID: "abc"}, wantRow: "abc.shard-2-of-4"},
		{name: "derived id", f: ShardSpec{Shard: "1/2", StartAt: "2026-11-29T14:00:05Z"}, label: "checkout",
			wantRow: groupID("checkout", now.Add(5*time.Second)) + ".shard-1-of-2"},
		{name: "unix start", f: ShardSpec{Shard: "1/2", StartAt: fmt.Sprint(now.Unix() + 5)}, label: "checkout",
			wantRow: groupID("checkout", now.Add(5*time.Second)) + ".shard-1-of-2"},
		{name: "no id", f: ShardSpec{Shard: "1/2"}, wantErrSubstr: "--run-id"},
		{name: "past start", f: ShardSpec{StartAt: "2026-11-29T13:00:00Z"}, wantErrSubstr: "already past"},
		{name: "bad start", f: ShardSpec{StartAt: "tomorrow"}, wantErrSubstr: "RFC 3339"},
		{name: "bad shard", f: ShardSpec{Shard: "5/4", RunID: "x"}, wantErrSubstr: "--shard must be i/N"},
		{name: "slash in id", f: ShardSpec{Shard: "1/2", RunID: "a/b"}, wantErrSubstr: "--run-id"},
		{name: "indexed job", f: ShardSpec{Index: "0", RunID: "uid"}, shards: 4, wantRow: "uid.shard-1-of-4"},
		{name: "last index", f: ShardSpec{Index: "3", RunID: "uid"}, shards: 4, wantRow: "uid.shard-4-of-4"},
		{name: "index too high", f: ShardSpec{Index: "4", RunID: "uid"}, shards: 4, wantErrSubstr: "below N"},
		{name: "index without count", f: ShardSpec{Index: "0", RunID: "uid"}, wantErrSubstr: "--shards N"},
		{name: "index unexpanded", f: ShardSpec{Index: "$(JOB_COMPLETION_INDEX)", RunID: "uid"}, shards: 4, wantErrSubstr: "completionMode: Indexed"},
		{name: "index negative", f: ShardSpec{Index: "-1", RunID: "uid"}, shards: 4, wantErrSubstr: "from 0"},
		{name: "index and shard", f: ShardSpec{Index: "1", Shard: "2/4", RunID: "uid"}, shards: 4, wantErrSubstr: "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.Shards = tt.shards
			p, err := tt.f.Plan(tt.label, now)
			if tt.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("err %v; want EINVALID mentioning %q", err, tt.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.RowID(); got != tt.wantRow {
				t.Errorf("row id %q, want %q", got, tt.wantRow)
			}
		})
	}
}

func FuzzParseInstant(f *testing.F) {
	for _, s := range []string{"2026-11-29T14:00:00Z", "1795960800", "1795960800.25", "", "-1", "1e300", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseInstant(s); err != nil && tare.ErrorCode(err) != tare.EINVALID {
			t.Fatalf("parseInstant(%q): %v is not EINVALID", s, err)
		}
	})
}
