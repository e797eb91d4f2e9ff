package prompts

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

func TestReadTrace(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		file string
		want []Request
	}{
		// Sorted by time, from the first.
		{"testdata/azure.csv", []Request{{0, 374, 44, nil}, {4314579 * time.Microsecond, 396, 109, nil}, {4519410 * time.Microsecond, 91, 16, nil}, {4759933 * time.Microsecond, 879, 55, nil}}},
		{"testdata/mooncake.jsonl", []Request{{0, 1100, 12, []uint64{0, 1, 2}}, {250 * ms, 1030, 8, []uint64{0, 1, 3}}, {1000 * ms, 40, 3, []uint64{4}}}},
	}
	for _, tt := range tests {
		got, err := ReadTrace(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("%s: %d requests, want %d", tt.file, len(got), len(tt.want))
		}
		for i, w := range tt.want {
			g := got[i]
			if g.At != w.At || g.Input != w.Input || g.Output != w.Output || len(g.Blocks) != len(w.Blocks) {
				t.Errorf("%s request %d = %+v, want %+v", tt.file, i, g, w)
			}
		}
	}
}

func TestParseTraceBad(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "no CSV header"},
		{"header", "time,in,out\n1,2,3\n", `lacks TIMESTAMP`},
		{"header only", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no request in it"},
		{"time", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", `line 2: TIMESTAMP "yesterday"`},
		{"tokens", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,x,2\n", `line 2: ContextTokens "x"`},
		{"zero input", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,0,2\n", "line 2: input length 0"},
		{"mooncake field", `{"timestamp": 1, "input_length": 5}`, "line 1: timestamp, input_length and output_length are all needed"},
		{"mooncake time", `{"timestamp": -1, "input_length": 5, "output_length": 1}`, "line 1: timestamp -1 ms"},
		{"mooncake json", "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}\n{", "line 2:"},
		{"mooncake hashes", `{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1, 2, 3]}`, "3 hash_ids for 5 input tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tt.in), "tr")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "the file must be an Azure") || tare.ErrorCode(err) != tare.EINVALID {
				t.Errorf("ParseTrace: %v; want EINVALID containing %q and the accepted forms", err, tt.want)
			}
		})
	}
}

// TestTraced: prompts have the trace's lengths, and two requests with the
// same leading hashes share exactly those blocks' words.
func TestTraced(t *testing.T) {
	reqs, err := ReadTrace("testdata/mooncake.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	gen := Traced(reqs, 1)
	var ws [][]string
	for seq := range uint64(len(reqs)) {
		p := gen(seq)
		ws = append(ws, strings.Fields(p.Text()))
		if len(ws[seq]) != reqs[seq].Input || p.MaxTokens != reqs[seq].Output {
			t.Errorf("request %d: %d words, budget %d; want %d and %d", seq, len(ws[seq]), p.MaxTokens, reqs[seq].Input, reqs[seq].Output)
		}
	}
	common := 0
	for common < len(ws[1]) && ws[0][common] == ws[1][common] {
		common++
	}
	// Blocks 0 and 1 shared, block 2 not: the words part somewhere in the
	// first few of block 2 (a word list of 100 repeats by chance).
	if common < 2*BlockTokens || common > 2*BlockTokens+4 {
		t.Errorf("requests 0 and 1 share %d leading words, want the %d of their two common blocks", common, 2*BlockTokens)
	}
	if strings.Join(ws[2][:5], " ") == strings.Join(ws[0][:5], " ") {
		t.Errorf("requests 0 and 2 share no block but start alike: %q", ws[2][:5])
	}
}

func FuzzParseTrace(f *testing.F) {
	for _, file := range []string{"testdata/azure.csv", "testdata/mooncake.jsonl"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		reqs, err := ParseTrace(strings.NewReader(s), "fuzz")
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("%v is not EINVALID", err)
			}
			return
		}
		for i, r := range reqs {
			if r.At < 0 || (i > 0 && r.At < reqs[i-1].At) || r.Input < 1 || r.Output < 0 {
				t.Fatalf("accepted request %d: %+v", i, r)
			}
		}
	})
}
